"""Issue 13, items 1 and 3 (data side): a proposed schema a hospital's data officer can trust.

Each failure seen with real clinical exports is rebuilt from scikit-learn's bundled clinical
tables (diabetes: 442 patients; breast cancer: 569 tumours) or from a small table of the same
shape written here: a constant column, a Gleason column on the older 2-10 scale, ``NA_NA``
and ``999`` codes, integer site codes, rare levels, and one row per test instead of per patient.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes

from dp_engine.errors import SchemaError
from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from services.data.limits import RARE_LEVEL_MIN
from services.data.registry import DatasetRegistry, load_csv


def load(frame: pd.DataFrame | str, schema: Schema | None = None, **kw):
    text = frame if isinstance(frame, str) else frame.to_csv(index=False)
    return load_csv(text.encode(), filename="t.csv", schema=schema, max_bytes=10_000_000, **kw)


@pytest.fixture(scope="module")
def diabetes() -> pd.DataFrame:
    """442 diabetes patients: age, sex (1/2), BMI, blood pressure, six serum measures."""
    return load_diabetes(scaled=False, as_frame=True).frame


# --- constant and empty columns: kept and marked, never a whole-file refusal --------------
def test_a_53_row_table_with_a_constant_column_loads(diabetes):
    nodal = diabetes.head(53).assign(m=1)  # the nodal-status table: 'm' is 1 on every row
    frame, schema, report = load(nodal)
    m = schema.column("m")
    assert len(frame) == 53 and frame["m"].tolist() == [1] * 53
    assert m.categories == (1,) and not m.has_bounds and m.derived_from_data
    review = report.review.column("m")
    assert review.constant == "1" and "Constant" in review.notes(RARE_LEVEL_MIN)[0]
    assert report.review.column("age").constant is None


def test_constant_text_and_empty_columns_are_kept_and_marked():
    cancer = load_breast_cancer(as_frame=True).frame.iloc[:, :4]
    cancer = cancer.assign(grade="G2", biopsy_note=np.nan)
    frame, schema, report = load(cancer)
    assert list(frame.columns) == [*cancer.columns]
    assert report.review.column("grade").constant == "G2"
    assert report.review.column("biopsy_note").all_missing
    assert not schema.column("biopsy_note").queryable


# --- clinical defaults that would clamp real data ask the owner ---------------------------
def gleason_2_to_10() -> pd.DataFrame:
    """146 biopsies graded on the older 2-10 scale: 43 below 6 (the current minimum)."""
    rng = np.random.default_rng(146)
    scores = np.concatenate([rng.integers(2, 6, 43), rng.integers(6, 11, 103)])
    return pd.DataFrame({"Gleason score": rng.permutation(scores)})


def test_gleason_on_the_2_to_10_scale_is_not_clamped_to_the_6_to_10_default():
    frame, schema, report = load(gleason_2_to_10())
    spec = schema.column("Gleason score")
    assert (spec.lower, spec.upper) == (2, 10) and spec.derived_from_data  # asks, flagged
    assert report.clamped == {} and frame["Gleason score"].min() == 2
    check = report.review.column("Gleason score").default
    assert (check.lower, check.upper, check.below, check.above, check.present) == (6, 10, 43, 0,
                                                                                   146)
    assert "would clamp 43 of 146 values" in " ".join(report.review.notes("Gleason score"))


def test_owner_choosing_the_default_sees_the_clamp_count_per_bound():
    _, schema, _ = load(gleason_2_to_10())
    chosen = schema.with_column(ColumnSpec("Gleason score", "ordinal", lower=6, upper=10,
                                           bin_width=1, categories=(6, 7, 8, 9, 10)))
    frame, _, report = load(gleason_2_to_10(), chosen)
    review = report.review.column("Gleason score")
    assert (review.clamped_below, review.clamped_above) == (43, 0)
    assert review.default is None and frame["Gleason score"].min() == 6


def test_a_default_that_clamps_at_most_one_percent_is_applied(diabetes):
    ages = diabetes[["age"]].copy()
    ages.loc[0, "age"] = 120.0  # 1 of 442 (0.2 %) above the 0-110 default
    frame, schema, report = load(ages)
    age = schema.column("age")
    assert (age.lower, age.upper, age.derived_from_data) == (0, 110, False)
    assert report.review.column("age").clamped_above == 1 and frame["age"].max() == 110


# --- missing-value codes ------------------------------------------------------------------
@pytest.mark.parametrize("code", ["NA_NA", "na_na", "  ", "", "NA", ".", "-", " NA "])
def test_missing_value_codes_are_missing_not_categories(code):
    stage = ["T1", "T2", code, "T3", "T1", code, "T2", "T1"] * 3
    frame, schema, _ = load(pd.DataFrame({"stage": stage, "n": range(24)}))
    assert schema.column("stage").categories == ("T1", "T2", "T3")
    assert frame["stage"].isna().sum() == 6


def test_na_na_is_missing_under_a_given_schema_too():
    schema = Schema("t", (ColumnSpec("stage", "categorical", categories=("T1", "T2")),
                          ColumnSpec("psa", "numeric", lower=0, upper=100)))
    frame, _, report = load("stage,psa\nT1,4.2\nNA_NA,NA_NA\n T2 , \n", schema)
    assert frame.isna().sum().to_dict() == {"stage": 1, "psa": 2}
    assert report.dropped == {}  # missing, not "unreadable"


def test_a_999_sentinel_is_proposed_as_missing_and_flagged(diabetes):
    lab = diabetes[["s3"]].copy()
    lab.loc[::40, "s3"] = 999.0  # 12 cells coded 999 in a serum measure of 22-99
    frame, schema, report = load(lab)
    spec = schema.column("s3")
    assert spec.missing_codes == ("999",) and spec.derived_from_data
    assert spec.upper < 200 and frame["s3"].isna().sum() == 12
    assert report.coded == {"s3": 12} and report.review.column("s3").coded == 12


def test_a_code_declared_per_column_is_missing():
    """A categorical code 2 meaning 'not recorded', declared by the owner for this column."""
    schema = Schema("t", (ColumnSpec("smoker", "categorical", categories=("0", "1"),
                                     missing_codes=("2",)),
                          ColumnSpec("cigs", "numeric", lower=0, upper=80,
                                     missing_codes=("999", "-1"))))
    frame, _, report = load("smoker,cigs\n0,0\n1,20\n2,999\n1,-1\n2,10\n", schema)
    assert frame["smoker"].isna().tolist() == [False, False, True, False, True]
    assert frame["cigs"].isna().tolist() == [False, False, True, True, False]
    assert report.coded == {"smoker": 2, "cigs": 2} and report.dropped == {}


# --- site and institution codes are categories --------------------------------------------
@pytest.mark.parametrize("name", ["site", "inst", "Institution", "centre_code", "Hospital"])
def test_integer_site_codes_are_categorical(diabetes, name):
    rng = np.random.default_rng(3)
    table = diabetes[["age", "bmi"]].assign(**{name: rng.integers(1, 33, len(diabetes))})
    frame, schema, _ = load(table)
    spec = schema.column(name)
    assert spec.kind is ColumnKind.CATEGORICAL and spec.role is ColumnRole.QUASI_IDENTIFIER
    assert spec.derived_from_data and "7" in spec.categories
    assert set(frame[name].dropna()) <= set(spec.categories)


def test_an_integer_column_with_another_name_stays_numeric(diabetes):
    _, schema, _ = load(diabetes[["bp"]])
    assert schema.column("bp").kind is ColumnKind.NUMERIC


# --- rare levels --------------------------------------------------------------------------
def ward_table() -> pd.DataFrame:
    wards = ["cardio"] * 40 + ["onco"] * 30 + ["uro"] * 12 + ["tropical"] * 3 + ["burns"] * 1
    return pd.DataFrame({"ward": wards, "n": range(len(wards))})


def test_rare_levels_are_listed_with_their_counts():
    _, schema, report = load(ward_table())
    assert schema.column("ward").derived_from_data
    assert report.review.column("ward").rare_levels == (("burns", 1), ("tropical", 3))
    assert "Rare levels (fewer than 10 records): burns (1), tropical (3)" in " ".join(
        report.review.notes("ward"))


def test_the_rare_threshold_is_configurable():
    _, _, report = load(ward_table(), rare_level_min=2)
    assert report.review.column("ward").rare_levels == (("burns", 1),)


def test_merged_levels_are_read_as_other():
    schema = Schema("t", (ColumnSpec("ward", "categorical",
                                     categories=("cardio", "onco", "uro", "other"),
                                     other_level="other"),))
    frame, schema, report = load(ward_table()[["ward"]], schema)
    assert (frame["ward"] == "other").sum() == 4 and frame["ward"].notna().all()
    assert report.other == {"ward": 4} and "tropical" not in str(schema.to_dict())
    with pytest.raises(SchemaError, match="catch-all"):
        ColumnSpec("ward", "categorical", categories=("a",), other_level="other")


# --- the unit of privacy: rows that are not patients --------------------------------------
def one_row_per_test(diabetes: pd.DataFrame) -> pd.DataFrame:
    """442 lab rows of 150 patients: 126 have 3 tests, 20 have 2 and 4 have 6."""
    rng = np.random.default_rng(150)
    per_patient = np.concatenate([np.full(4, 6), np.full(126, 3), np.full(20, 2)])
    ids = np.repeat(np.arange(1000, 1150), per_patient)
    assert len(ids) == len(diabetes)
    return diabetes[["s1", "s5"]].assign(patient_id=rng.permutation(ids))


def test_duplicate_patient_ids_are_detected_and_a_bound_proposed(diabetes):
    table = one_row_per_test(diabetes)
    _, schema, report = load(table)
    assert schema.patient_column == "patient_id" and schema.patient_bound_derived
    stats = report.review.patients["patient_id"]
    assert stats.patients == 150 and stats.repeated == 150 and stats.max_rows == 6
    assert schema.max_rows_per_patient == 3  # the 95th percentile of rows per patient
    assert stats.rows_beyond(3) == 4 * 3
    assert schema.awaiting_confirmation()[-1] == "rows per patient"
    text = " ".join(report.review.unit_lines(schema))
    assert "per patient" in text and "at most 3 row(s)" in text and "proposed" in text
    as_rows = Schema(schema.dataset, schema.columns)
    assert "NOT per patient" in " ".join(report.review.unit_lines(as_rows))


def test_one_row_per_patient_is_said_to_be_per_patient(diabetes):
    table = diabetes[["age"]].assign(patient_id=range(len(diabetes)))
    _, schema, report = load(table)
    assert schema.patient_column is None and schema.privacy_unit == "row"
    assert "each row is one patient" in " ".join(report.review.unit_lines(schema))


def test_patient_unit_is_stored_with_the_schema(tmp_path, diabetes):
    registry = DatasetRegistry(tmp_path, sample=False)
    ds = registry.add_upload("labs.csv", one_row_per_test(diabetes).to_csv(index=False).encode())
    edited = ds.schema.confirm_columns(["s1", "s5"])
    edited = Schema(edited.dataset, edited.columns, title=edited.title,
                    patient_column="patient_id", max_rows_per_patient=2)
    registry.update_schema(ds.id, edited)
    registry.confirm_schema(ds.id)
    again = DatasetRegistry(tmp_path, sample=False).get(ds.id)  # another worker
    assert (again.schema.patient_column, again.schema.contribution_bound) == ("patient_id", 2)
    assert again.schema.confirmed and again.schema.privacy_unit == "patient"
    assert Schema.from_dict(again.schema.to_dict()) == again.schema


@pytest.mark.parametrize("change, words", [
    ({"patient_column": "s1"}, "identifier"),
    ({"patient_column": "nope"}, "not in the dataset"),
    ({"max_rows_per_patient": 0}, "at least 1"),
    ({"max_rows_per_patient": 2.5}, "whole number"),
    ({"patient_column": None, "max_rows_per_patient": 3}, "needs the column"),
])
def test_invalid_patient_units_are_refused(change, words):
    columns = (ColumnSpec("patient_id", "identifier"),
               ColumnSpec("s1", "numeric", lower=0, upper=400))
    fields = {"patient_column": "patient_id", "max_rows_per_patient": 2, **change}
    with pytest.raises(SchemaError, match=words):
        Schema("t", columns, **fields)
