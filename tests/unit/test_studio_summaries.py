"""Release page summaries and figures: counts on the public bins (outside values in the end
bins), no original side unless asked, every figure's table has the figure's numbers."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from dp_engine.schema import ColumnSpec, Schema
from layouts.studio import figures as figs
from services.studio.summaries import numeric_summary, run_summaries

SCHEMA = Schema("t", (ColumnSpec("age", "numeric", lower=0, upper=10, bin_width=5),
                 ColumnSpec("sex", "categorical", categories=("f", "m"))))
METRICS = {"columns": {"age": {"kind": "numeric"},
                       "sex": {"kind": "categorical", "shares_original": {"f": 0.5, "m": 0.5},
                               "shares_dp": {"f": 0.25, "m": 0.75}}},
           "corr_names": ["age", "sex"], "corr_original": [[1.0, 0.5], [0.5, 1.0]],
           "corr_dp": [[1.0, 0.1], [0.1, float("nan")]]}


def test_numeric_counts_use_the_public_bins_and_keep_outside_values_in_the_end_bins():
    s = numeric_summary([1, 2, 6, 9], [-3.0, 4.0, 7.5, 42.0, np.nan], np.array([0.0, 5, 10]),
                        include_original=True)
    assert s["counts_original"] == [2, 2] and s["counts_dp"] == [2, 2]
    assert s["box_original"] == [1.0, 1.75, 4.0, 6.75, 9.0]
    assert s["box_dp"][0] == -3.0 and s["box_dp"][-1] == 42.0


def test_without_the_original_no_original_number_is_summarized():
    original = pd.DataFrame({"age": [1, 2, 6, 9], "sex": ["f", "m", "f", "m"]})
    copy = pd.DataFrame({"age": [3.0, 3.5, 8.0, 1.0], "sex": ["m", "m", "f", "m"]})
    out = run_summaries(original, copy, SCHEMA, METRICS, include_original=False)
    assert "original" not in json.dumps(out)
    assert out["columns"]["age"]["counts_dp"] == [3, 1]
    assert out["corr"]["dp"] == [[1.0, 0.1], [0.1, None]]
    # the figures draw the DP side only, and their tables hold the same numbers
    hist = figs.histogram(out["columns"]["age"])
    assert [t["name"] for t in hist["data"]] == ["DP copy"] and hist["data"][0]["y"] == [3, 1]
    assert figs.histogram_table(out["columns"]["age"])[1] == [["0 to 5", "3"], ["5 to 10", "1"]]
    assert figs.pies_table(out["columns"]["sex"])[1] == [["f", "25.0 %"], ["m", "75.0 %"]]


def test_owner_summaries_compare_both_sides():
    original = pd.DataFrame({"age": [1, 2, 6, 9], "sex": ["f", "m", "f", "m"]})
    out = run_summaries(original, original, SCHEMA, METRICS, include_original=True)
    assert [t["name"] for t in figs.box(out["columns"]["age"])["data"]] == ["Original",
                                                                            "DP copy"]
    header, rows = figs.correlation_table(out["corr"])
    assert header == ["pair", "Original", "DP copy", "difference"]
    assert rows == [["age × sex", "0.5", "0.1", "0.4"]]
