"""Loading messy real-world CSV files: every bad input is a clear DatasetError or a repair."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from dp_engine.errors import DPError, SchemaError
from dp_engine.schema import ColumnKind, ColumnSpec, Schema
from services.data.registry import (
    SAMPLE_CSV,
    DatasetError,
    DatasetRegistry,
    UnknownDatasetError,
    load_csv,
    propose_schema,
    read_schema_file,
    write_schema_file,
)

LIMIT = 1_000_000
AGE_SCHEMA = Schema("t", (
    ColumnSpec("Age", "numeric", lower=20, upper=100, bin_width=5),
    ColumnSpec("BPH", "boolean"),
))


def load(text: str | bytes, schema: Schema | None = None, **kw):
    content = text.encode("utf-8") if isinstance(text, str) else text
    return load_csv(content, filename=kw.pop("filename", "t.csv"), schema=schema,
                    max_bytes=kw.pop("max_bytes", LIMIT))


def refused(text: str | bytes, *words: str, **kw) -> str:
    with pytest.raises(DatasetError) as info:
        load(text, **kw)
    message = str(info.value)
    for word in words:
        assert word.lower() in message.lower(), message
    return message


# --- layout of the file --------------------------------------------------------------
@pytest.mark.parametrize("delim", [",", ";", "\t", "|"])
def test_delimiter_is_sniffed(delim):
    text = delim.join(["Age", "BPH", "Note"]) + "\n" + delim.join(["61.5", "yes", "a, b"]) + "\n"
    text += delim.join(["70", "no", "c"]) + "\n"
    if delim == ",":
        text = text.replace("a, b", '"a, b"')
    frame, schema, report = load(text)
    assert list(frame.columns) == ["Age", "BPH", "Note"]
    assert report.delimiter == delim
    assert frame["Age"].tolist() == [61.5, 70.0]


def test_semicolon_file_with_decimal_commas():
    frame, schema, _ = load("Age;PSA value\n61,5;4,2\n70;10\n")
    assert frame["Age"].tolist() == [61.5, 70.0]
    assert frame["PSA value"].tolist() == [4.2, 10.0]


def test_excel_separator_hint_line():
    frame, _, report = load("sep=;\nAge;Ward\n61,5;A\n70;B\n")
    assert list(frame.columns) == ["Age", "Ward"] and report.delimiter == ";"
    assert frame["Age"].tolist() == [61.5, 70.0]
    refused("sep=;\n", "no header row")


def test_utf8_bom_is_not_part_of_the_first_name():
    frame, _, report = load(b"\xef\xbb\xbfAge,BPH\n61,yes\n", schema=AGE_SCHEMA)
    assert list(frame.columns) == ["Age", "BPH"] and report.encoding == "utf-8-sig"


def test_latin1_is_read_with_a_warning():
    content = "Name des Arztes;Prostatitis\nDr. Müller;akut\nDr. Schröder;n\n".encode("latin-1")
    frame, _, report = load(content)
    assert frame["Name des Arztes"].tolist() == ["Dr. Müller", "Dr. Schröder"]
    assert report.encoding in ("cp1252", "latin-1")
    assert any("not UTF-8" in w for w in report.warnings)


def test_utf16_export_is_read():
    frame, _, _ = load("Age\tBPH\n61\tY\n".encode("utf-16"))
    assert frame["Age"].tolist() == [61.0]


@pytest.mark.parametrize("content", [b"", b"   \n\r\n  ", b"\n\n"])
def test_empty_file(content):
    refused(content, "empty")


def test_header_only():
    refused("Age,BPH\n", "header row but no data rows")
    refused("Age,BPH", "no data rows")


def test_duplicate_column_names():
    refused("Age,BPH,Age\n1,2,3\n", "duplicate column names", "Age")
    refused("Age, Age \n1,2\n", "duplicate")  # names that differ only by spaces


def test_blank_column_name_with_values_is_refused():
    refused("Age,,BPH\n61,x,yes\n", "no name", "2")


def test_empty_unnamed_trailing_column_is_dropped():
    frame, _, report = load("Age,BPH,\n61,yes,\n70,no,\n")
    assert list(frame.columns) == ["Age", "BPH"]
    assert any("empty column" in w for w in report.warnings)


def test_ragged_rows_are_refused_with_the_line():
    refused("Age,BPH\n61,yes\n70,no,extra,more\n", "line 3")


@pytest.mark.parametrize("content, what", [
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "PNG"),
    (b"PK\x03\x04" + b"\x00" * 200, "Excel"),
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "PDF"),
    (bytes(np.random.default_rng(7).integers(0, 256, 4000, dtype=np.uint8)), "binary"),
    (b"Age,BPH\n61,\x00yes\n", "binary"),
])
def test_binary_file_renamed_csv(content, what):
    refused(content, what, "CSV", filename="cohort.csv")


def test_over_size_limit():
    refused("Age\n" + "61\n" * 1000, "above the upload limit", "0.0 MB", max_bytes=500)


# --- values --------------------------------------------------------------------------
def test_text_in_numeric_column_is_missing_and_counted():
    frame, _, report = load("Age,BPH\n61,yes\nunknown,no\n70,no\n65,yes\n", schema=AGE_SCHEMA)
    assert np.isnan(frame["Age"][1]) and frame["Age"].notna().sum() == 3
    assert report.dropped == {"Age": 1} and report.missing["Age"] == 1


def test_mostly_text_in_numeric_column_is_refused():
    refused("Age,BPH\nold,yes\nyoung,no\n70,no\n", "should hold numbers", "Age",
            schema=AGE_SCHEMA)


def test_inference_keeps_a_mostly_text_column_as_categories():
    frame, schema, _ = load("Stage,N\nearly,1\nlate,2\nearly,3\n4,4\n")
    assert schema.column("Stage").kind is ColumnKind.CATEGORICAL
    assert set(frame["Stage"]) == {"early", "late", "4"}


def test_values_outside_bounds_are_clamped_and_counted():
    frame, _, report = load("Age,BPH\n150,yes\n5,no\n64,no\n", schema=AGE_SCHEMA)
    assert frame["Age"].tolist() == [100.0, 20.0, 64.0]
    assert report.clamped == {"Age": 2}
    assert any("outside the bounds" in line for line in report.lines())


def test_dates_in_several_formats():
    text = "Seen\n2017-03-14\n14.03.2017\n03/14/2017\n14/03/2017\n2017-03-14 10:30\n14 Mar 2017\n"
    frame, schema, report = load(text)
    assert schema.column("Seen").kind is ColumnKind.DATE
    assert (frame["Seen"].dt.normalize() == pd.Timestamp("2017-03-14")).all()
    assert report.dropped == {}


@pytest.mark.parametrize("yes, no", [
    ("yes", "no"), ("Y", "N"), ("1", "0"), ("True", "False"), ("TRUE", "false"), ("ja", "nein"),
])
def test_boolean_spellings(yes, no):
    frame, schema, _ = load(f"BPH,Age\n{yes},60\n{no},61\n{yes},62\n")
    assert schema.column("BPH").kind is ColumnKind.BOOLEAN
    assert frame["BPH"].tolist() == [True, False, True]
    assert str(frame["BPH"].dtype) == "boolean"


def test_unreadable_boolean_is_missing_and_counted():
    frame, _, report = load("Age,BPH\n61,yes\n62,perhaps\n63,N\n", schema=AGE_SCHEMA)
    assert frame["BPH"].isna().tolist() == [False, True, False]
    assert report.dropped == {"BPH": 1}


@pytest.mark.parametrize("na", ["NA", "", "n/a", "N/A", "null", "-", "NaN"])
def test_missing_spellings(na):
    frame, _, report = load(f"Age,BPH\n61,yes\n{na},{na}\n70,no\n", schema=AGE_SCHEMA)
    assert frame.isna().sum().to_dict() == {"Age": 1, "BPH": 1}
    assert report.dropped == {} and report.missing == {"Age": 1, "BPH": 1}


def test_absurd_magnitudes_and_far_dates_do_not_crash():
    frame, schema, _ = load("x\n1e308\n-1e308\n" + "".join(f"{i}.5\n" for i in range(12)))
    lo, hi = schema.column("x").bounds()
    assert lo <= -1e308 and hi >= 1e308 and frame["x"].notna().all()
    frame, _, report = load("Seen\n9999-12-31\n2017-01-01\n0001-01-01\n")
    assert frame["Seen"].notna().tolist() == [False, True, False]
    assert report.dropped == {"Seen": 2}


def test_open_ended_counts_read_at_their_limit():
    frame, _, report = load("Number_of_Lesions\n1\n>3\n2\n>=5\n<1\n")
    assert frame["Number_of_Lesions"].tolist() == [1.0, 4.0, 2.0, 5.0, 0.0]
    assert report.open_ended == {"Number_of_Lesions": 3}


def test_unknown_category_becomes_missing_and_counted():
    schema = Schema("t", (ColumnSpec("Prostatitis", "categorical",
                                     categories=("n", "chr", "y", "acute", "acute on chronic")),))
    frame, _, report = load("Prostatitis\nn\nACUTE\n chr \nmaybe\n", schema=schema)
    assert frame["Prostatitis"].tolist()[:3] == ["n", "acute", "chr"]
    assert pd.isna(frame["Prostatitis"][3]) and report.dropped == {"Prostatitis": 1}


def test_ordinal_out_of_bounds_clamped_and_non_levels_dropped():
    schema = Schema("t", (ColumnSpec("PIRADS score", "ordinal", lower=1, upper=5,
                                     categories=(1, 2, 3, 4, 5)),))
    frame, _, report = load("PIRADS score\n1\n7\n3.5\n0\n", schema=schema)
    assert frame["PIRADS score"].tolist()[:2] == [1, 5] and frame["PIRADS score"][3] == 1
    assert pd.isna(frame["PIRADS score"][2])
    assert report.clamped == {"PIRADS score": 2} and report.dropped == {"PIRADS score": 1}


def test_schema_column_missing_from_file():
    refused("Age\n61\n", "lacks column", "BPH", schema=AGE_SCHEMA)


# --- proposed schemas ----------------------------------------------------------------
def test_proposal_uses_clinical_defaults_and_flags_the_rest():
    frame = pd.DataFrame({
        "Age": [61.0, 70.2, 55.0], "PI-RADS": [3, 5, 2], "Ward": ["A", "B", "A"],
        "Creatinine": [0.9, 1.4, 1.1], "Patient ID": ["p1", "p2", "p3"],
        "Comments": ["ok", "see report", "none"],
    })
    schema = propose_schema(frame, "x")
    assert not schema.confirmed
    age, pirads = schema.column("Age"), schema.column("PI-RADS")
    assert (age.lower, age.upper, age.derived_from_data) == (0, 110, False)
    assert pirads.categories == (1, 2, 3, 4, 5) and not pirads.derived_from_data
    ward, creat = schema.column("Ward"), schema.column("Creatinine")
    assert ward.derived_from_data and ward.categories == ("A", "B")
    assert creat.derived_from_data and creat.lower <= 0.9 and creat.upper >= 1.4
    assert not schema.column("Patient ID").queryable
    assert not schema.column("Comments").queryable
    assert {c.name for c in schema.flagged_columns()} == {"Ward", "Creatinine"}


def test_schema_file_round_trip(tmp_path):
    schema = read_schema_file(SAMPLE_CSV.with_name("pirads_cohort.schema.json"))
    write_schema_file(tmp_path / "s.json", schema)
    assert read_schema_file(tmp_path / "s.json") == schema
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SchemaError, match="not valid JSON"):
        read_schema_file(tmp_path / "bad.json")


# --- the registry --------------------------------------------------------------------
@pytest.fixture()
def registry(tmp_path):
    return DatasetRegistry(tmp_path / "store", max_upload_bytes=100_000)


UPLOAD = "Age;BPH;Ward\n61,5;ja;A\n70;nein;B\n55;ja;A\n200;nein;C\n"


def test_sample_first_and_confirmed(registry):
    first = registry.list()[0]
    assert first.id == "pirads" and first.schema.confirmed and len(first.frame) == 920
    assert len(first.version) == 16


def test_upload_is_proposed_flagged_and_stored(registry):
    ds = registry.add_upload("Ward Export.csv", UPLOAD.encode())
    assert ds.id == "ward-export" and not ds.schema.confirmed
    assert ds.schema.column("Ward").derived_from_data
    # the clinical default 0-110 would clamp 1 of 4 ages (> 1 %): not applied, the owner is asked
    assert ds.frame["Age"].tolist() == [61.5, 70.0, 55.0, 200.0]
    assert ds.schema.column("Age").derived_from_data and ds.load_report.clamped == {}
    default = ds.load_report.review.column("Age").default
    assert (default.lower, default.upper, default.below, default.above) == (0, 110, 0, 1)
    stored = registry.storage_dir / "uploads" / f"{ds.version}.csv"
    assert stored.read_bytes() == UPLOAD.encode()
    assert [d.id for d in registry.list()] == ["pirads", "ward-export"]
    assert registry.add_upload("again.csv", UPLOAD.encode()) is ds  # same bytes, same dataset


def test_bad_upload_leaves_datasets_loaded(registry):
    good = registry.add_upload("good.csv", UPLOAD.encode())
    for bad in (b"", b"Age,Age\n1,2\n", b"\x89PNG\r\n" + b"\x00" * 50, b"x" * 200_000):
        with pytest.raises(DatasetError):
            registry.add_upload("bad.csv", bad)
    assert [d.id for d in registry.list()] == ["pirads", good.id]
    assert registry.get(good.id) is good


def test_edit_confirm_and_restart(registry):
    ds = registry.add_upload("w.csv", UPLOAD.encode())
    age = ds.schema.column("Age")
    edited = registry.update_schema(ds.id, ds.schema.with_column(
        ColumnSpec(age.name, age.kind, age.role, lower=50, upper=80, bin_width=5)))
    assert edited.frame["Age"].tolist() == [61.5, 70.0, 55.0, 80.0]
    assert not edited.schema.confirmed
    with pytest.raises(SchemaError, match="read off the data.*Ward"):
        registry.confirm_schema(ds.id)  # Ward's categories were read off the data
    registry.confirm_columns(ds.id, ["Ward"])
    confirmed = registry.confirm_schema(ds.id)
    assert confirmed.schema.confirmed and not confirmed.schema.flagged_columns()
    assert not any("derived from the data" in n for n in confirmed.schema.notes)
    again = DatasetRegistry(registry.storage_dir)  # another worker / a restart
    reloaded = again.get(ds.id)
    assert reloaded.schema == confirmed.schema and reloaded.version == ds.version
    assert reloaded.frame["Age"].tolist() == [61.5, 70.0, 55.0, 80.0]


def test_worker_sees_a_confirmation_made_by_another(registry):
    ds = registry.add_upload("w.csv", UPLOAD.encode())
    other = DatasetRegistry(registry.storage_dir)
    other.confirm_columns(ds.id, ["Age", "Ward"])
    other.confirm_schema(ds.id)
    assert registry.get(ds.id).schema.confirmed


def test_update_schema_must_name_the_same_columns(registry):
    ds = registry.get("pirads")
    with pytest.raises(SchemaError, match="exactly the dataset's columns"):
        registry.update_schema("pirads", Schema("pirads", ds.schema.columns[:3]))


def test_unknown_dataset(registry):
    # The message reaches every role: it names the request, never the other datasets
    # (an unconfirmed upload's id is not a non-owner's to see).
    with pytest.raises(UnknownDatasetError, match="no dataset 'nope'") as refused:
        registry.get("nope")
    assert "pirads" not in str(refused.value)
    with pytest.raises(DPError):
        registry.confirm_schema("nope")


def test_configured_paths_with_and_without_sidecar(tmp_path):
    (tmp_path / "a.csv").write_text("Age,Ward\n60,A\n61,B\n")
    (tmp_path / "b.csv").write_text("Age,Ward\n60,A\n61,B\n")
    write_schema_file(tmp_path / "b.schema.json", Schema("b", (
        ColumnSpec("Age", "numeric", lower=0, upper=100), ColumnSpec("Ward", "categorical",
                                                                     categories=("A", "B"))),
        confirmed=True))
    (tmp_path / "bad.csv").write_bytes(b"")
    reg = DatasetRegistry(tmp_path / "store", sample=False, extra_paths=[
        tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "bad.csv", tmp_path / "gone.csv"])
    assert [d.id for d in reg.list()] == ["a", "b"]
    assert not reg.get("a").schema.confirmed and reg.get("b").schema.confirmed
    assert len(reg.problems) == 2 and any("empty" in p for p in reg.problems)


def test_configured_parquet(tmp_path):
    frame = pd.DataFrame({"Age": [60.0, 70.0], "Ward": ["A", "B"]})
    path = tmp_path / "c.parquet"
    try:
        frame.to_parquet(path)
    except ImportError:  # no parquet engine installed: the owner is told what to install
        path.write_bytes(b"PAR1" + b"\x00" * 20)
        reg = DatasetRegistry(tmp_path / "store", sample=False, extra_paths=[path])
        assert reg.list() == [] and "pyarrow" in reg.problems[0]
        return
    reg = DatasetRegistry(tmp_path / "store", sample=False, extra_paths=[path])
    assert reg.get("c").frame["Age"].tolist() == [60.0, 70.0]


def test_schema_edit_keeps_the_version_and_is_unconfirmed(registry):
    ds = registry.get("pirads")
    age = ds.schema.column("Age")
    edited = registry.update_schema("pirads", ds.schema.with_column(
        ColumnSpec(age.name, age.kind, age.role, age.label, age.unit, 30, 90, 5)))
    assert edited.version == ds.version and edited.schema.column("Age").lower == 30
    assert json.loads(json.dumps(edited.schema.to_dict()))["confirmed"] is False
