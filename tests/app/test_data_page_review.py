"""Issues 13 and 23 on the Data page: confirmation per kind of decision and the patient unit.

Nothing read off the data becomes public until the owner ticks its kind of decision in the
checklist (which lists what becomes public, with the clamp counts beside each bound) or edits
that column; the confirm button publishes and is refused, naming the unticked items, while
any remain. Recognised clinical defaults are public facts, confirmed with the schema. The
owner picks the patient column and k inside the same checklist; the page says "per patient"
or "per row" truthfully.
"""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes

from callbacks import data as data_callbacks
from layouts import ids
from layouts.data import page as data_page
from services.data import decisions
from services.data.errors import UnknownDatasetError
from services.data.limits import MAX_CATEGORIES
from services.data.registry import DatasetRegistry
from services.identity.roles import Role
from tests.app.conftest import SessionAs
from tests.app.test_data_page import _text, data_url, tokens
from tests.app.test_schema_proposal import gleason_2_to_10, one_row_per_test, ward_table

ROW = (data_page.ROW_UNIT, 1, True)
MERGE = [decisions.MERGE]


def upload(services, frame: pd.DataFrame, filename: str):
    content = frame.to_csv(index=False).encode()
    return data_callbacks.handle(services, ids.DATA_UPLOAD, data_url(content), filename,
                                 "pirads", None)


def row(rows: list[dict], name: str) -> dict:
    return next(r for r in rows if r["name"] == name)


def save(services, dataset: str, rows, unit=ROW, button=ids.DATA_SAVE, ticks=None):
    return data_callbacks.handle(services, button, None, None, dataset, rows, unit, ticks)


def props(tree: object, cid: str) -> dict:
    """The props of the component with id ``cid`` in a rendered layout (JSON)."""
    found = _find(json.loads(_text(tree)), cid)
    assert found is not None, cid
    return found


def _find(node: object, cid: str) -> dict | None:
    if isinstance(node, dict):
        p = node.get("props", {})
        if p.get("id") == cid:
            return p
        children = [v for v in p.values() if isinstance(v, list | dict)]
        return next((f for c in children if (f := _find(c, cid)) is not None), None)
    if isinstance(node, list):
        return next((f for c in node if (f := _find(c, cid)) is not None), None)
    return None


def patient_controls(listed) -> tuple:
    """(options, value) of the patient dropdown, k, and the k tick's label, as rendered."""
    dropdown = props(listed, ids.DATA_PATIENT)
    return (dropdown["options"], dropdown["value"], props(listed, ids.DATA_PATIENT_K)["value"],
            props(listed, ids.DATA_PATIENT_K_CONFIRM))


@pytest.fixture
def services(tmp_path):
    """What the page's callbacks receive: a registry and an owner's session."""
    return SimpleNamespace(registry=DatasetRegistry(tmp_path / "s", max_upload_bytes=2_000_000),
                           identity=SessionAs(Role.OWNER, "olga"))


# --- clamping defaults ask, with the clamp count beside each bound --------------------------
def test_gleason_default_asks_with_the_clamp_count(services):
    *_, listed, rows = upload(services, gleason_2_to_10(), "gleason.csv")
    g = row(rows, "Gleason score")
    assert (g["lower"], g["upper"], g["clamp_low"], g["clamp_high"]) == ("2", "10", "0", "0")
    assert "would clamp 43 of 146 values" in g["review"] and g["flag"] == data_page.FLAG
    # listed before the owner confirms: what becomes public and what it clamps
    text = _text(listed)
    assert "This bound read from the data becomes public" in text
    assert "2 to 10; levels 2, 3, 4, 5, 6, 7, 8, 9, 10" in text
    assert "clamped: 0 up to 2, 0 down to 10" in text and "would clamp 43 of 146" in text
    msg, *_ = save(services, "gleason", rows, button=ids.DATA_CONFIRM)  # no tick: refused
    assert "This bound read from the data becomes public" in _text(msg)
    assert "tick it, or edit those columns" in _text(msg)
    assert not services.registry.get("gleason").schema.confirmed


def test_choosing_the_default_shows_what_it_clamps(services):
    *_, rows = upload(services, gleason_2_to_10(), "gleason.csv")
    rows = [dict(r, lower="6", categories="6; 7; 8; 9; 10") if r["name"] == "Gleason score"
            else r for r in rows]
    *_, rows = save(services, "gleason", rows)
    g = row(rows, "Gleason score")
    assert (g["clamp_low"], g["clamp_high"]) == ("43", "0") and g["flag"] != data_page.FLAG


def test_a_kind_is_confirmed_by_its_one_tick(services):
    *_, rows = upload(services, gleason_2_to_10(), "gleason.csv")
    with pytest.raises(UnknownDatasetError):  # other roles only see confirmed datasets
        services.registry.get("gleason", owner=False)
    msg, *_ = save(services, "gleason", rows, button=ids.DATA_CONFIRM,
                   ticks=tokens(services, "gleason", decisions.BOUNDS))
    ds = services.registry.get("gleason", owner=False)
    assert ds.schema.confirmed and (ds.schema.column("Gleason score").lower == 2)
    assert "now public metadata" in _text(msg)


def test_a_tick_on_a_listing_that_changed_confirms_nothing(services):
    upload(services, gleason_2_to_10(), "gleason.csv")
    ticks = tokens(services, "gleason", decisions.BOUNDS)  # ticked on the first listing
    ds = services.registry.get("gleason")  # meanwhile the bounds changed, still flagged
    edited = ds.schema.with_column(
        dataclasses.replace(ds.schema.column("Gleason score"), lower=1, derived_from_data=True))
    ds = services.registry.update_schema("gleason", edited)
    rows = data_page.schema_rows(ds.schema, ds.load_report.review)
    msg, *_ = save(services, "gleason", rows, button=ids.DATA_CONFIRM, ticks=ticks)
    assert "changed since you ticked it" in _text(msg)
    assert not services.registry.get("gleason").schema.confirmed


@pytest.mark.parametrize("forged", [["bounds:0000"], [["levels"]], "bounds", [[None, 3]],
                                    [[{"bounds": True}]]])
def test_forged_ticks_confirm_nothing(services, forged):
    *_, rows = upload(services, gleason_2_to_10(), "gleason.csv")
    msg, *_ = save(services, "gleason", rows, button=ids.DATA_CONFIRM, ticks=forged)
    assert "Not confirmed yet" in _text(msg)
    assert services.registry.get("gleason").schema.flagged_columns()


def test_bulk_confirm_covers_recognised_clinical_defaults_only(services):
    clinical = pd.DataFrame({"Age": [61.0, 70.2, 55.0, 66.0], "PSA": [4.1, 8.0, 12.5, 6.6]})
    *_, rows = upload(services, clinical, "clinical.csv")
    assert all(r["flag"] != data_page.FLAG for r in rows)
    save(services, "clinical", rows, button=ids.DATA_CONFIRM)
    assert services.registry.get("clinical").schema.confirmed
    *_, rows = upload(services, clinical.assign(Ward=["A", "B", "A", "B"]), "mixed.csv")
    save(services, "mixed", rows, button=ids.DATA_CONFIRM)
    assert not services.registry.get("mixed").schema.confirmed


# --- rare levels: listed, merged into "other" before they are public -----------------------
def test_rare_levels_are_merged_into_other_on_the_owners_decision(services):
    *_, listed, rows = upload(services, ward_table(), "wards.csv")
    assert "burns (1), tropical (3)" in row(rows, "ward")["review"]
    assert "Rare (fewer than 10 records): burns (1), tropical (3)" in _text(listed)
    assert props(listed, {"type": ids.DATA_DECISION, "key": decisions.MERGE})["value"] == MERGE
    ticks = [*tokens(services, "wards", decisions.LEVELS, decisions.BOUNDS), MERGE]
    *_, rows = save(services, "wards", rows, button=ids.DATA_CONFIRM, ticks=ticks)
    ds = services.registry.get("wards")
    assert ds.schema.confirmed
    assert ds.schema.column("ward").categories == ("cardio", "onco", "uro", "other")
    assert (ds.frame["ward"] == "other").sum() == 4
    assert "burns" not in str(ds.schema.to_dict()) and "tropical" not in str(rows)


def test_too_many_categories_typed_into_the_table_are_refused(services):
    *_, rows = upload(services, ward_table(), "wards.csv")
    many = "; ".join(f"w{i}" for i in range(MAX_CATEGORIES + 1))
    msg, *rest = save(services, "wards", [dict(r, categories=many) if r["name"] == "ward"
                                         else r for r in rows])
    assert "more than" in _text(msg) and "other" in _text(msg)
    assert services.registry.get("wards").schema.column("ward").categories == (
        "burns", "cardio", "onco", "tropical", "uro")


# --- the unit of privacy --------------------------------------------------------------------
@pytest.fixture(scope="module")
def labs() -> pd.DataFrame:
    return one_row_per_test(load_diabetes(scaled=False, as_frame=True).frame)


def test_one_row_per_test_proposes_the_patient_column_and_k(services, labs):
    *_, listed, rows = upload(services, labs, "labs.csv")
    options, patient, k, tick = patient_controls(listed)
    assert {"label": "Patients are identified by 'patient_id'", "value": "patient_id"} in options
    assert (patient, k, tick["value"]) == ("patient_id", 3, False)
    assert tick["label"] == "I confirm k = 3 rows per patient (read from the data)"
    text = _text(listed)
    assert "per patient" in text and "Rows per patient: at most 3" in text
    assert "Ids repeat: 150 of 150" in row(rows, "patient_id")["review"]
    bounds = tokens(services, "labs", decisions.BOUNDS)
    msg, *_ = save(services, "labs", rows, ("patient_id", 3, False), ids.DATA_CONFIRM, bounds)
    # k read off the data: not confirmed with the rest, and named where its tick is
    assert "Rows per patient: at most 3 of each patient" in _text(msg)
    assert "tick 'I confirm k' in its box" in _text(msg)
    assert not services.registry.get("labs").schema.confirmed
    save(services, "labs", rows, ("patient_id", 3, True), ids.DATA_CONFIRM)
    schema = services.registry.get("labs").schema
    assert schema.confirmed and (schema.patient_column, schema.contribution_bound) == (
        "patient_id", 3)


def test_a_k_the_owner_types_is_theirs(services, labs):
    *_, rows = upload(services, labs, "labs.csv")
    *_, listed, _ = save(services, "labs", rows, ("patient_id", 2, False))
    _, patient, k, tick = patient_controls(listed)
    assert (patient, k) == ("patient_id", 2) and "d-none" in tick["class_name"]  # no tick asked
    assert not services.registry.get("labs").schema.patient_bound_derived
    assert "at most 2 row(s)" in _text(listed) and "130 patient(s) have more than 2" in _text(
        listed)


def test_choosing_one_row_per_patient_is_said_to_be_per_row(services, labs):
    *_, rows = upload(services, labs, "labs.csv")
    *_, listed, _ = save(services, "labs", rows, ROW)
    _, patient, k, _ = patient_controls(listed)
    assert (patient, k) == (data_page.ROW_UNIT, 1)
    assert "NOT per patient" in _text(listed) and "'patient_id' repeats" in _text(listed)
    schema = services.registry.get("labs").schema
    assert schema.patient_column is None and schema.privacy_unit == "row"


@pytest.mark.parametrize("unit, words", [
    (("s1", 2, True), "identifier"),
    (("nope", 2, True), "no column named"),
    (("patient_id", 0, True), "at least 1"),
    (("patient_id", "two", True), "whole number"),
])
def test_invalid_patient_choices_are_refused(services, labs, unit, words):
    *_, rows = upload(services, labs, "labs.csv")
    before = services.registry.get("labs").schema
    msg, *rest = save(services, "labs", rows, unit)
    assert words in _text(msg) and services.registry.get("labs").schema == before


def test_layout_has_the_patient_controls_with_labels(services):
    text = _text(data_page.layout(services.registry, services.identity.current()))
    for needle in (ids.DATA_PATIENT, ids.DATA_PATIENT_K, ids.DATA_PATIENT_K_CONFIRM,
                   ids.DATA_CHECKLIST, "Who is a patient?", "What becomes public",
                   "Clamped up to it"):
        assert needle in text, needle


def test_site_codes_and_na_na_through_the_page(services):
    rng = np.random.default_rng(5)
    table = pd.DataFrame({"site": rng.integers(1, 4, 40),
                          "stage": rng.choice(["T1", "T2", "NA_NA"], 40)})
    *_, rows = upload(services, table, "sites.csv")
    assert row(rows, "site")["kind"] == "categorical" and row(rows, "site")["lower"] == ""
    assert row(rows, "stage")["categories"] == "T1; T2"
