"""Compare mode (issue 23): the tiers on one scale, a panel of this very release, and paper
mode asked for with Compare answered in sound mode, saying so."""

from __future__ import annotations

import re

from layouts.components.figures import fmt
from layouts.explore.panel import COMPARE_MODE
from services.identity.roles import Role
from tests.app.explore_client import render


def _value_ranges(reply) -> list[list[float]]:
    return [fig["layout"]["yaxis"]["range"] for fig in reply.figures()]


def _drawn(fig: dict) -> list[float]:
    """Every bar top and error-bar end a histogram figure draws."""
    out: list[float] = []
    for trace in fig["data"]:
        ys = [y for y in trace.get("y", []) if y is not None]
        err = trace.get("error_y", {})
        ups = err.get("array", [None] * len(ys))
        out += ys + [y + e for y, e in zip(ys, ups, strict=False) if e is not None]
    return out


def _used(panel: str) -> str:
    found = re.search(r"you used ε ([0-9.,]+)", panel)
    assert found, panel
    return found.group(1)


def test_compared_tiers_share_one_value_axis_that_holds_every_bar(client):
    reply = render(client, compare=True)
    assert reply.status == 200, reply.text
    ranges = _value_ranges(reply)
    assert len(ranges) == 3 and ranges[0] == ranges[1] == ranges[2], ranges
    low, high = ranges[0]
    assert low == 0.0
    tops = [max(_drawn(fig)) for fig in reply.figures()]
    assert max(tops) <= high < 1.2 * max(tops), (tops, high)     # no tier cut, none shrunk
    # a single view keeps its own automatic range
    single = render(client)
    assert "range" not in single.figures()[0]["layout"]["yaxis"]


def test_compare_panel_is_this_release_s_and_the_budget_after_it(explore_app, client):
    from app import services_of

    first = render(client)                                    # an earlier, single release
    assert first.status == 200 and "Released" in first.release_label
    reply = render(client, compare=True, group="none")         # another view, three tiers
    assert reply.status == 200, reply.text
    ledger = services_of(explore_app).ledger
    status = ledger.status(role=Role.OWNER, dataset_id="pirads", user="test-owner")
    panel = reply.panel_text
    assert _used(panel) == fmt(status.user.spent)              # the budget after this screen
    assert "for the three tiers" in panel and "sound mode" in panel
    again = render(client, compare=True, group="none")         # the same: stored, free
    assert "all three were released to your role before" in again.panel_text
    assert _used(again.panel_text) == fmt(status.user.spent)


def test_paper_mode_with_compare_says_it_draws_sound_mode(client):
    reply = render(client, compare=True, mechanism="paper")
    assert reply.status == 200, reply.text
    assert len(reply.figures()) == 3
    assert COMPARE_MODE in reply.message
    assert "Not differentially private" not in reply.panel_text   # drawn in sound mode
    plain = render(client, compare=True)                           # sound + compare: no note
    assert COMPARE_MODE not in plain.message
