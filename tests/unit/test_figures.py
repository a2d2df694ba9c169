"""Figure builders: valid Plotly JSON, labelled with ε, and built from DP numbers only."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from layouts.components.figures import build
from services.views.answer import ViewAnswer
from services.views.plans import PLANS


def _answer(view: str, groups: list[str], cells: list[str], mechanism: str = "sound",
            tier: int = 1) -> ViewAnswer:
    base = 60.0 if view != "histogram" else 10.0
    plan = PLANS[view]
    values = [[base + i + j for j in range(len(cells))] for i in range(len(groups))]
    return ViewAnswer(
        dataset_id="d", dataset_title="D", view=view, x="Age", x_label="Age (years)",
        unit="years", group="G" if len(groups) > 1 else None, group_label="Group",
        mechanism=mechanism, mechanism_label="discrete Laplace", role="collaborator",
        tier=tier, band=(5.0, 10.0), epsilon=0.4321, sensitivity="1", groups=groups,
        cells=cells, values=values,
        ci_low=[[v - 2 for v in row] for row in values],
        ci_high=[[v + 2 for v in row] for row in values],
        expected_error=1.0, expected_relative_error=7.0, calibration_note="", n_estimate=900,
        figure=plan.figure, statistic_label=plan.statistic_label, dp=mechanism != "paper",
    )


CASES = {
    "histogram": (["a", "b"], ["20–25", "25–30", "30–35"]),
    "mean": (["a", "b", "c"], ["mean"]),
    "variance": (["a", "b"], ["variance"]),
    "median": (["a", "b"], ["q0.05", "q0.25", "q0.5", "q0.75", "q0.95"]),
}


@pytest.mark.parametrize("view", list(CASES))
@pytest.mark.parametrize("compact", [False, True])
def test_figures_are_valid_plotly_and_labelled_with_epsilon(view, compact):
    groups, cells = CASES[view]
    fig = build(_answer(view, groups, cells), compact=compact)
    go.Figure(fig)                                   # raises on any invalid property
    assert "ε = 0.432" in fig["layout"]["title"]["text"]
    assert fig["layout"]["xaxis"]["title"]["text"] or fig["layout"]["yaxis"]["title"]["text"]
    json.dumps(fig)                                  # serializable as sent to the browser


def test_box_plot_has_only_dp_quantiles_and_interval_in_hover():
    fig = build(_answer("median", *CASES["median"]))
    boxes = [t for t in fig["data"] if t["type"] == "box"]
    assert len(boxes) == 2
    for b in boxes:
        assert "y" not in b and b["boxpoints"] is False
        assert b["q1"][0] < b["median"][0] < b["q3"][0]
    hovers = [t["hovertemplate"] for t in fig["data"] if t["type"] == "scatter"]
    assert all("95 % interval of the median" in h for h in hovers)


def test_paper_mode_figures_claim_no_interval():
    fig = build(_answer("mean", *CASES["mean"], mechanism="paper", tier=0))
    assert "95 %" not in json.dumps(fig)
    assert "paper mode" in fig["layout"]["title"]["text"]


def test_compared_figures_share_a_value_axis_that_holds_every_value_and_interval():
    from dataclasses import replace

    from layouts.components.figures import VALUE_AXIS, shared_range

    hist = _answer("histogram", *CASES["histogram"])
    taller = replace(hist, values=[[v * 3 for v in row] for row in hist.values],
                     ci_high=[[v * 3 + 5 for v in row] for row in hist.values])
    lo, hi = shared_range([hist, taller])
    top = max(v for row in taller.ci_high for v in row)
    assert lo == 0.0 and top < hi <= top * 1.1           # from zero (bars), the top inside
    fig = build(hist, compact=True, value_range=(lo, hi))
    assert fig["layout"][VALUE_AXIS["histogram"]]["range"] == [lo, hi]
    # a withheld group's numbers never set the scale
    gone = replace(taller, withheld=[True, True], withheld_reason=["small", "small"])
    assert shared_range([hist, gone])[1] < top
    # box plots: quantiles, not from zero; kinds that differ share nothing
    box = _answer("median", *CASES["median"])
    low_box, _ = shared_range([box, box])
    assert 0 < low_box < min(v for row in box.ci_low for v in row)
    assert shared_range([hist, box]) is None
    assert "range" not in build(hist)["layout"]["yaxis"]
