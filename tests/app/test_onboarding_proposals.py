"""Issue 23, item 2: the proposals for each table of ``sample_data/`` and three stand-ins of
public clinical exports, and the checklist that confirms each in a few ticks.

The stand-ins (``tests/app/clinical_standins.py``) carry the patterns that went wrong: yes/no
written as ``0_no``/``1_yes``; sex and status coded 1/2 without labels; a 2-value test type
named ``test_id``; clinic names; an enrolment year whose bounds read as ``2.02e+03``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from callbacks import data as data_callbacks
from dp_engine.schema import ColumnKind, ColumnRole, Schema
from layouts import ids
from services.data import decisions
from services.data.registry import DatasetRegistry, load_csv
from services.data.review import readable
from services.data.schema_files import read_schema_file
from services.data.value_parsing import coded, match_categories, parse_booleans, truth
from services.identity.roles import Role
from tests.app.clinical_standins import (
    CLINICS,
    YES_NO_CODED,
    csv_bytes,
    survival_table,
    testing_table,
    trial_table,
)
from tests.app.conftest import SessionAs
from tests.app.test_data_page import _text, data_url

SAMPLE_DIR = Path(__file__).resolve().parents[2] / "sample_data"
K = ColumnKind
MAX_CLICKS = 10


def propose(frame: pd.DataFrame):
    return load_csv(csv_bytes(frame), filename="t.csv", max_bytes=50_000_000, schema=None)


def report_of(frame: pd.DataFrame):
    return propose(frame)[2].review


@pytest.fixture(scope="module")
def trial():
    return trial_table(), *propose(trial_table())


@pytest.fixture(scope="module")
def testing():
    return testing_table(), *propose(testing_table())


@pytest.fixture(scope="module")
def survival():
    return survival_table(), *propose(survival_table())


# --- sample_data: every shipped table is proposed as its shipped schema says -------------
@pytest.mark.parametrize("path", sorted(SAMPLE_DIR.glob("*.csv")), ids=lambda p: p.name)
def test_each_sample_table_is_proposed_as_its_shipped_schema(path):
    _, proposed, report = load_csv(path.read_bytes(), filename=path.name,
                                   max_bytes=50_000_000, schema=None)
    shipped = read_schema_file(path.with_name(f"{path.stem}.schema.json"))
    assert proposed.names == shipped.names
    for spec in shipped.columns:
        got = proposed.column(spec.name)
        assert got.kind is spec.kind, spec.name
        assert got.queryable == spec.queryable, spec.name
        if got.derived_from_data:  # read off the data: flagged, and listed for a tick
            assert decisions.kind_of(got) in (decisions.BOUNDS, decisions.LEVELS,
                                              decisions.LABELS)
    listed = decisions.checklist(proposed, report.review)
    text = json.dumps([[e.public, e.effect] for d in listed for e in d.entries])
    assert "e+" not in text and "2017 to 2018" in text  # the Year, readable
    assert 1 + sum(d.asks for d in listed) + 1 <= MAX_CLICKS


# --- yes/no columns, whatever the spelling --------------------------------------------
def test_yes_no_and_0_no_1_yes_columns_are_booleans(trial):
    raw, frame, schema, _ = trial
    for name in (*YES_NO_CODED, "smoker"):
        spec = schema.column(name)
        assert spec.kind is K.BOOLEAN and not spec.derived_from_data, name
    assert frame["outcome"].tolist() == (raw["outcome"] == "1_yes").tolist()
    assert frame["smoker"].tolist() == (raw["smoker"] == "yes").tolist()


@pytest.mark.parametrize("text, expected", [
    ("0_no", False), ("1_yes", True), ("1 = yes", True), ("2_no", False), ("0 = No", False),
    ("yes", True), ("0", False), ("1.0", True), ("0_no SOD", None), ("1_placebo", None),
    ("maybe", None), ("2_5", None),
])
def test_truth_of_yes_no_spellings(text, expected):
    assert truth(text) is expected


def test_labelled_codes_split_into_code_and_label():
    assert coded("0_no") == ("0", "no") and coded("1 = male") == ("1", "male")
    assert coded("3_type 3") == ("3", "type 3") and coded(" 12_UM ") == ("12", "UM")
    assert coded("10_20") is None and coded("2017-03-14") is None and coded("n/a") is None


def test_parse_booleans_reads_labelled_codes_and_counts_the_rest():
    parsed = parse_booleans(pd.Series(["0_no", "1_yes", "1_yes", "2_unknown", None]))
    assert parsed.values.tolist()[:3] == [False, True, True] and parsed.bad == 1


# --- 1/2 codes: labelled levels, never an ordinal 1-2 ---------------------------------
def test_sex_and_status_coded_1_2_get_their_labels(survival):
    raw, frame, schema, _ = survival
    sex, status = schema.column("sex"), schema.column("status")
    assert sex.kind is K.CATEGORICAL and sex.categories == ("1 = male", "2 = female")
    assert sex.role is ColumnRole.QUASI_IDENTIFIER and sex.derived_from_data
    assert status.categories == ("1 = censored", "2 = event") and status.derived_from_data
    assert (frame["sex"] == "2 = female").sum() == (raw["sex"] == 2).sum()
    assert (frame["status"] == "2 = event").sum() == (raw["status"] == 2).sum()
    assert not any(c.kind is K.ORDINAL and c.categories == (1, 2) for c in schema.columns)
    listed = {d.key: d for d in decisions.checklist(schema, None)}
    assert set(listed[decisions.LABELS].columns) == {"sex", "status"}
    assert listed[decisions.LABELS].title == "Read these 2 coded columns with these labels"


def test_labelled_sex_codes_in_the_cells_are_their_levels(trial):
    raw, frame, schema, _ = trial
    assert schema.column("gender").categories == ("1_female", "2_male")
    assert schema.column("site").categories == ("1_north", "2_east", "3_south", "4_west")
    assert schema.column("type").categories[0] == "0_no SOD"
    assert frame["gender"].tolist() == raw["gender"].tolist()


def test_unlabelled_1_2_codes_ask_for_labels_and_the_owners_labels_read_the_codes():
    table = pd.DataFrame({"smoking": np.tile([1, 2, 2], 20), "n": range(60)})
    _, schema, _ = propose(table)
    spec = schema.column("smoking")
    assert spec.categories == ("1", "2") and spec.derived_from_data
    assert "'1 = …; 2 = …'" in spec.description
    listed = {d.key: d for d in decisions.checklist(schema, report_of(table))}
    assert "name them by typing '1 = …; 2 = …'" in listed[decisions.LEVELS].entries[0].effect
    labelled = schema.with_column(spec.__class__(
        "smoking", "categorical", categories=("1 = yes", "2 = no")))
    frame, _, report = load_csv(csv_bytes(table), filename="t.csv", max_bytes=10**7,
                                schema=labelled)
    assert frame["smoking"].value_counts().to_dict() == {"2 = no": 40, "1 = yes": 20}
    assert report.dropped == {}


def test_a_category_named_code_equals_label_takes_codes_labels_and_coded_cells():
    parsed = match_categories(pd.Series(["1", "male", "2_female", "2", "3", "1.0"]),
                              ("1 = male", "2 = female"))
    assert [v if isinstance(v, str) else None for v in parsed.values] == [
        "1 = male", "1 = male", "2 = female", "2 = female", None, "1 = male"]
    assert parsed.bad == 1


# --- a handful of values is never an identifier; sites and clinics are categories -----------
def test_a_two_value_test_type_is_a_category_not_the_patient(testing):
    _, _, schema, report = testing
    spec = schema.column("test_id")
    assert spec.kind is K.CATEGORICAL and spec.categories == ("covid", "covid2")
    assert spec.queryable and "test_id" not in report.review.candidates
    assert schema.patient_column == "subject_id" and schema.patient_bound_derived


def test_clinic_names_are_site_categories_with_rare_levels_listed(testing):
    raw, frame, schema, report = testing
    clinic = schema.column("clinic_name")
    assert clinic.kind is K.CATEGORICAL and clinic.role is ColumnRole.QUASI_IDENTIFIER
    assert set(clinic.categories) == set(raw["clinic_name"]) and len(clinic.categories) > 30
    assert set(clinic.categories) <= set(CLINICS) and clinic.derived_from_data
    rare = report.review.column("clinic_name").rare_levels
    assert rare and all(n < 10 for _, n in rare)
    for name in ("fake_first_name", "fake_last_name", "subject_id"):
        assert not schema.column(name).queryable, name  # people's names stay hidden


@pytest.mark.parametrize("name", ["site_id", "clinic_id", "hospital_name", "Clinic Name"])
def test_site_columns_named_like_ids_or_names_are_categories(name):
    table = pd.DataFrame({name: np.tile(["A", "B", "C", "D"], 30), "n": range(120)})
    _, schema, _ = propose(table)
    assert schema.column(name).kind is K.CATEGORICAL


def test_real_identifiers_stay_identifiers():
    table = pd.DataFrame({"patient_id": range(200), "email": ["a@b.c"] * 200,
                          "record_id": np.repeat(range(50), 4)})
    _, schema, _ = propose(table)
    assert all(schema.column(n).kind is K.IDENTIFIER for n in schema.names)


def test_integer_institution_codes_are_categories(survival):
    _, _, schema, _ = survival
    inst = schema.column("inst")
    assert inst.kind is K.CATEGORICAL and inst.categories[:3] == ("1", "3", "5")


# --- readable bounds for years and dates ----------------------------------------------
def test_years_and_dates_read_as_years_and_dates(trial):
    _, frame, schema, report = trial
    year = schema.column("enrol_year")
    assert (year.lower, year.upper) == (2009, 2012) and year.derived_from_data
    assert schema.column("enrol_date").kind is K.DATE
    listed = {d.key: d for d in decisions.checklist(schema, report.review)}
    bounds = {e.column: e for e in listed[decisions.BOUNDS].entries}
    assert bounds["enrol_year"].public == "2009 to 2012; levels 2009, 2010, 2011, 2012"
    hidden = {e.column: e for e in listed[decisions.HIDDEN].entries}
    first, last = frame["enrol_date"].min(), frame["enrol_date"].max()
    assert f"Dates from {first:%Y-%m-%d} to {last:%Y-%m-%d}" in hidden["enrol_date"].effect


def test_a_year_with_many_levels_gets_whole_bounds_and_bins():
    table = pd.DataFrame({"diagnosis_year": np.arange(1987, 2013).repeat(3)})
    _, schema, _ = propose(table)
    spec = schema.column("diagnosis_year")
    assert spec.kind is K.NUMERIC and float(spec.bin_width).is_integer()
    assert float(spec.lower).is_integer() and spec.lower <= 1987 and spec.upper >= 2012


@pytest.mark.parametrize("value, text", [(2017.0, "2017"), (2017, "2017"), (0.25, "0.25"),
                                         (1234567.5, "1234567.5"), (1e-7, "0.0000001"),
                                         (-30.0, "-30"), (None, "")])
def test_readable_numbers_never_use_scientific_notation(value, text):
    assert readable(value) == text


# --- each table confirmed in a few ticks, through the page's own callback -------------------
@pytest.fixture
def services(tmp_path):
    return SimpleNamespace(registry=DatasetRegistry(tmp_path / "s", max_upload_bytes=20_000_000),
                           identity=SessionAs(Role.OWNER, "olga"))


@pytest.mark.parametrize("make", [trial_table, testing_table, survival_table],
                         ids=lambda f: f.__name__)
def test_each_stand_in_is_confirmed_in_at_most_ten_clicks(services, make):
    clicks = 1  # choosing the file
    out = data_callbacks.handle(services, ids.DATA_UPLOAD, data_url(csv_bytes(make())),
                                f"{make.__name__}.csv", "pirads", None)
    dataset_id, rows = out[3], out[-1]
    ds = services.registry.get(dataset_id)
    listed = decisions.checklist(ds.schema, ds.load_report.review)
    flagged = {c.name for c in ds.schema.flagged_columns()}
    asked = {n for d in listed if d.asks and d.key != decisions.PATIENT for n in d.columns}
    assert flagged == asked  # every column read off the data is in a box that asks
    ticks = [[d.token] for d in listed if d.asks and d.key != decisions.PATIENT]
    clicks += len(ticks)
    unit = (ds.schema.patient_column or "__row__", ds.schema.max_rows_per_patient,
            ds.schema.patient_bound_derived)
    clicks += int(ds.schema.patient_bound_derived)  # the k tick
    msg, *_ = data_callbacks.handle(services, ids.DATA_CONFIRM, None, None, dataset_id, rows,
                                    unit, [*ticks, [decisions.MERGE]])
    clicks += 1  # Confirm schema
    confirmed = services.registry.get(dataset_id, owner=False).schema
    assert confirmed.confirmed, _text(msg)
    assert clicks <= MAX_CLICKS
    assert not confirmed.flagged_columns() and not confirmed.patient_bound_derived
    assert Schema.from_dict(confirmed.to_dict()) == confirmed
