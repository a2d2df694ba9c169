"""Heavy work in the runner's child processes (COHORT_RUNNER_PROCESSES ≥ 1): the same door,
one ledger row, refusals as they are, screens of answers the role has served in the web
worker, a dead child replaced. The child returns data; the web worker draws it."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from app import create_app, services_of
from layouts import ids
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger.audit import check_invariants
from services.runner import Lanes
from services.views.screen import RELEASE, screen_data
from tests.app.explore_client import PRICED, post, preset, render


def views(ledger) -> list:
    """The served answers of views (not the groupings' DP sizes a pricing step releases)."""
    return [r for r in ledger.releases(dataset_id="pirads")
            if not r.query_key.startswith("internal:")]


@pytest.fixture
def app(tmp_path):
    app = create_app({"data_dir": tmp_path, "runner_processes": 1,
                      "budgets": {"third_party": 0.01}})
    yield app
    services_of(app).runner.close()


def _count_calls(monkeypatch, runner) -> list[str]:
    calls: list[str] = []
    real = runner.call

    def counted(fn, *args, **kwargs):
        calls.append(fn.__name__)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(runner, "call", counted)
    return calls


def test_screens_that_compute_are_drawn_by_a_child_and_cached_ones_here(app, monkeypatch):
    s = services_of(app)
    assert isinstance(s.runner, Lanes)
    calls = _count_calls(monkeypatch, s.runner)
    client = app.server.test_client()
    values = {"dataset": "pirads", "role": "owner", "view": "median", "x": "Age",
              "group": "Prostatitis"}
    shown = post(client, ids.EX_VIEW, **values)                  # a free preview
    assert shown.status == 200 and shown.preview and calls == ["screen_data"]
    (quick,) = s.runner.quick.pids()              # a preview spends nothing: the quick lane
    assert quick != os.getpid() and s.runner.heavy.pids() == []
    assert s.ledger.releases(dataset_id="pirads") == []
    priced = post(client, ids.EX_RELEASE, **values)              # pricing: the group sizes
    assert PRICED in priced.text and len(calls) == 2 and views(s.ledger) == []
    released = post(client, ids.EX_RELEASE, **values)            # the release itself
    assert released.release_ids() and calls[2:] == ["released"]   # the door alone
    (heavy,) = s.runner.heavy.pids()              # pricing and releases: the heavy lane
    assert heavy != quick
    (row,) = views(s.ledger)
    assert row.epsilon > 0 and str(row.id) in released.release_ids()
    again = post(client, ids.EX_RELEASE, **values)               # cached: drawn here, free
    assert "Opened free" in again.text and len(calls) == 3
    assert again.figures() == released.figures()
    assert len(views(s.ledger)) == 1
    moved = post(client, ids.EX_GROUP, **values)                 # a control back to it: free
    assert "Opened free" in moved.text and len(calls) == 3
    assert sorted(s.runner.pids()) == sorted([heavy, quick])
    assert check_invariants(s.ledger) == []


def test_a_refusal_in_the_child_comes_back_as_a_refusal(app):
    s = services_of(app)
    tina = Identity("tina", Role.THIRD_PARTY, True)
    values = {"dataset": "pirads", "role": "third_party", "view": "histogram", "x": "Age",
              "group": "PIRADS score", "mechanism": "sound", "without": []}
    data = s.runner.call(screen_data, tina, RELEASE, None, values)      # pricing: over 0.01
    assert data.kind == "message" and data.colour == "danger"
    assert "Nothing was charged" in data.message
    assert s.ledger.releases(dataset_id="pirads") == [] and check_invariants(s.ledger) == []


def test_every_kind_of_computing_screen_works_in_the_child(app, monkeypatch):
    calls = _count_calls(monkeypatch, services_of(app).runner)
    client = app.server.test_client()
    base = {"dataset": "pirads", "role": "owner", "view": "histogram", "x": "Age",
            "group": "PIRADS score"}
    compare = post(client, ids.EX_COMPARE, **base, compare=True)        # three tiers
    assert compare.status == 200 and len(compare.figures()) == 3 and compare.preview
    paper = render(client, **base, mechanism="paper")                    # paper mode
    assert paper.release_ids() and "not differentially private" in paper.text
    chosen = preset(client, "fig3", **base)           # a preset whose grouping is unpriced
    assert chosen.figures() and chosen.preview and "Price this grouping" in chosen.text
    switched = post(client, ids.EX_DATASET, **base)                      # dataset switch
    assert switched.status == 200 and switched.figures()
    # the paper release was decided by the worker's read: only the door's work crossed
    assert calls == ["screen_data", "released", "screen_data", "screen_data"]
    assert "could not be computed" not in " ".join(
        r.text for r in (compare, paper, chosen, switched))


def test_a_failing_ledger_read_before_the_screen_is_no_500_and_prices_first(app, monkeypatch):
    s = services_of(app)
    real, failed = s.ledger.look, []

    def flaky(sources, **kwargs):
        if not failed:        # the read that decides where to draw the screen
            failed.append(sources)
            raise RuntimeError("database gone for a moment")
        return real(sources, **kwargs)

    monkeypatch.setattr(s.ledger, "look", flaky)
    pressed = post(app.server.test_client(), ids.EX_RELEASE, dataset="pirads", role="owner",
                   view="mean", x="Age", group="Prostatitis")
    assert failed and pressed.status == 200
    assert PRICED in pressed.text and views(s.ledger) == []


def test_a_child_that_died_is_replaced(app):
    s = services_of(app)
    client = app.server.test_client()
    values = {"dataset": "pirads", "role": "owner", "view": "mean", "x": "Age",
              "group": "Prostatitis"}
    post(client, ids.EX_VIEW, **values)                          # starts the child
    (child,) = s.runner.pids()
    os.kill(child, signal.SIGKILL)                               # e.g. the OOM killer
    shown = post(client, ids.EX_VIEW, **{**values, "view": "variance"})
    assert shown.status == 200 and (shown.preview or "ended before" in shown.text)
    again = post(client, ids.EX_VIEW, **{**values, "view": "histogram"})
    assert again.status == 200 and again.preview
    (fresh,) = s.runner.pids()
    assert fresh != child
    assert check_invariants(s.ledger) == []


def held_until(services, progress, gate: str) -> str:
    """Heavy work that holds its child until the test creates ``gate``."""
    progress(0.0, "held")
    while not os.path.exists(gate):
        time.sleep(0.05)
    return "done"


def test_a_preview_does_not_queue_behind_a_release(app, tmp_path):
    s = services_of(app)
    gate = tmp_path / "go"
    started: list[str] = []
    values = {"dataset": "pirads", "role": "owner", "view": "median", "x": "Age",
              "group": "Prostatitis"}
    with ThreadPoolExecutor(2) as pool:
        held = pool.submit(s.runner.call, held_until, str(gate),
                           progress=lambda _f, text: started.append(text))
        while not started and not held.done():   # the heavy lane's one child is busy
            time.sleep(0.05)
        shown = pool.submit(post, app.server.test_client(), ids.EX_VIEW, **values)
        deadline = time.monotonic() + 600        # a hang guard, not a speed limit
        while not shown.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        answered_first = shown.done()
        gate.touch()                             # let the heavy work go either way
        assert held.result() == "done"
    assert answered_first, "the preview waited for the heavy lane"
    assert shown.result().status == 200 and shown.result().preview
