"""Hypothesis-generated messy CSV files never crash the loader: a result or a DPError only."""

from __future__ import annotations

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dp_engine.errors import DPError
from dp_engine.schema import ColumnSpec, Schema
from services.data.registry import load_csv

NAMES = ["Age", "BPH", "PIRADS score", "Prostatitis", "Seen", "ID", "", " ", "Age", "Näme",
         "a,b", 'q"uote', "Gleason score", "x"]
CELLS = ["", "NA", "n/a", "61", "61.5", "61,5", "-3", "1e400", "nan", "inf", ">3", "<=2", "yes",
         "N", "True", "0", "1", "acute on chronic", "chr", "2017-03-14", "14.03.2017",
         "03/14/2017", "31/02/2017", "Müller", "ß", '"quoted, comma"', '"unclosed', "\t", ";",
         "   ", "é" * 3, "\x00", "\x7f", "999999999999999999999999", "12:30", "🙂",
         "1e308", "-1e308", "5e-324", "9999-12-31", "0001-01-01"]
SCHEMA = Schema("fuzz", (
    ColumnSpec("Age", "numeric", lower=20, upper=100, bin_width=5),
    ColumnSpec("BPH", "boolean"),
    ColumnSpec("PIRADS score", "ordinal", lower=1, upper=5, categories=(1, 2, 3, 4, 5)),
    ColumnSpec("Prostatitis", "categorical", categories=("n", "chr", "y")),
    ColumnSpec("Seen", "date"),
))


@st.composite
def messy_csv(draw) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=6))
    delim = draw(st.sampled_from([",", ";", "\t", "|"]))
    newline = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    rows = draw(st.lists(
        st.lists(st.sampled_from(CELLS) | st.text(max_size=6), min_size=0, max_size=8),
        max_size=8,
    ))
    text = newline.join(delim.join(r) for r in [names, *rows])
    if draw(st.booleans()):
        text += newline
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "utf-16"]))
    return text.encode(encoding, errors="replace")


def _check(content: bytes, schema: Schema | None) -> None:
    try:
        frame, applied, report = load_csv(content, filename="fuzz.csv", schema=schema,
                                          max_bytes=10_000)
    except DPError as exc:
        assert str(exc)  # a message the owner can read
        return
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == applied.names
    assert report.rows == len(frame) > 0


FUZZ = settings(max_examples=150, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(messy_csv())
def test_messy_csv_without_schema(content):
    _check(content, None)


@FUZZ
@given(messy_csv())
def test_messy_csv_with_schema(content):
    _check(content, SCHEMA)
