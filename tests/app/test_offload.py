"""Uncached releases answered by a child process (COHORT_OFFLOAD_UNCACHED=1): same door,
one ledger row, refusals as they are, cached answers inline."""

from __future__ import annotations

import os

import pytest

from dp_engine.errors import BudgetExceededError
from services.identity.roles import Role
from services.identity.session import Identity
from services.views.queries import ViewRequest

COLLAB = Identity("carl", Role.COLLABORATOR, True)


def views(ledger) -> list:
    """The served answers of views (not the groupings' DP sizes a pricing step releases)."""
    return [r for r in ledger.releases(dataset_id="pirads")
            if not r.query_key.startswith("internal:")]
REQ = ViewRequest("pirads", "mean", "Age", "PIRADS score", "sound", Role.COLLABORATOR)


@pytest.fixture
def services(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path, "offload_uncached": True,
                      "budgets": {"third_party": 0.01}})
    s = services_of(app)
    yield s
    s.releases.offload.close()


def test_an_uncached_release_is_drawn_by_the_child_and_recorded_once(services):
    first = services.releases.answer(COLLAB, REQ, price=True)
    pool = services.releases.offload._pool
    assert pool is not None
    (child,) = pool._processes.values()
    assert child.pid != os.getpid()
    (row,) = views(services.ledger)
    assert row.epsilon + 0.25 == pytest.approx(first.epsilon_charged)    # sizes priced too
    assert first.realized_noise_percent is None and not first.cached
    again = services.releases.answer(COLLAB, REQ)        # cached: served inline, free
    assert again.cached and again.epsilon_charged == 0 and again.values == first.values
    assert len(views(services.ledger)) == 1


def test_a_refusal_in_the_child_comes_back_as_a_refusal(services):
    third = Identity("tina", Role.THIRD_PARTY, True)
    req = ViewRequest("pirads", "histogram", "Age", "PIRADS score", "sound", Role.THIRD_PARTY)
    with pytest.raises(BudgetExceededError, match="Nothing was charged"):
        services.releases.answer(third, req, price=True)
    assert services.ledger.releases(dataset_id="pirads") == []


# ---- whole Explore screens: previews, pricing and fresh releases in the child ------------

@pytest.fixture
def app(tmp_path):
    from app import create_app, services_of

    app = create_app({"data_dir": tmp_path, "offload_uncached": True})
    yield app
    services_of(app).releases.offload.close()


def _count_calls(monkeypatch, offload) -> list[str]:
    calls: list[str] = []
    real = offload.call

    def counted(fn, *args, **kwargs):
        calls.append(fn.__name__)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(offload, "call", counted)
    return calls


def test_screens_that_compute_are_drawn_by_the_child_and_cached_ones_here(app, monkeypatch):
    from app import services_of
    from layouts import ids
    from tests.app.explore_client import PRICED, post

    s = services_of(app)
    calls = _count_calls(monkeypatch, s.releases.offload)
    client = app.server.test_client()
    values = {"dataset": "pirads", "role": "owner", "view": "median", "x": "Age",
              "group": "Prostatitis"}
    shown = post(client, ids.EX_VIEW, **values)                  # a free preview
    assert shown.status == 200 and shown.preview and calls == ["screen_for"]
    assert s.ledger.releases(dataset_id="pirads") == []
    priced = post(client, ids.EX_RELEASE, **values)              # pricing: the group sizes
    assert PRICED in priced.text and len(calls) == 2 and views(s.ledger) == []
    released = post(client, ids.EX_RELEASE, **values)            # the release itself
    assert released.release_ids() and len(calls) == 3
    (row,) = views(s.ledger)
    assert row.epsilon > 0 and str(row.id) in released.release_ids()
    again = post(client, ids.EX_RELEASE, **values)               # cached: drawn here, free
    assert "Opened free" in again.text and len(calls) == 3
    assert again.figures() == released.figures()
    assert len(views(s.ledger)) == 1
    moved = post(client, ids.EX_GROUP, **values)                 # a control back to it: free
    assert "Opened free" in moved.text and len(calls) == 3


def test_a_broken_child_means_the_screen_is_drawn_inline(app, monkeypatch):
    from app import services_of
    from layouts import ids
    from tests.app.explore_client import post

    def broken(*_args, **_kwargs):
        raise RuntimeError("child gone")

    monkeypatch.setattr(services_of(app).releases.offload, "call", broken)
    shown = post(app.server.test_client(), ids.EX_VIEW, dataset="pirads", role="owner",
                 view="mean", x="Age", group="PIRADS score")
    assert shown.status == 200 and shown.preview


def test_every_kind_of_computing_screen_works_in_the_child(app, monkeypatch):
    from app import services_of
    from layouts import ids
    from tests.app.explore_client import post, preset, render

    calls = _count_calls(monkeypatch, services_of(app).releases.offload)
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
    assert calls == ["screen_for"] * 4                                   # one per screen
    assert "could not be computed" not in " ".join(
        r.text for r in (compare, paper, chosen, switched))


def test_a_failing_ledger_read_before_the_screen_is_no_500_and_prices_first(app, monkeypatch):
    from app import services_of
    from layouts import ids
    from tests.app.explore_client import PRICED, post

    s = services_of(app)
    real, failed = s.ledger.quotes, []

    def flaky(sources, **kwargs):
        if not failed:        # the read that decides where to draw the screen
            failed.append(sources)
            raise RuntimeError("database gone for a moment")
        return real(sources, **kwargs)

    monkeypatch.setattr(s.ledger, "quotes", flaky)
    pressed = post(app.server.test_client(), ids.EX_RELEASE, dataset="pirads", role="owner",
                   view="mean", x="Age", group="Prostatitis")
    assert failed and pressed.status == 200
    assert PRICED in pressed.text and views(s.ledger) == []


def test_a_child_that_died_is_replaced_and_the_answer_drawn_inline_meanwhile(services):
    import signal

    services.releases.answer(COLLAB, REQ, price=True)        # starts the child
    pool = services.releases.offload._pool
    (child,) = pool._processes.values()
    os.kill(child.pid, signal.SIGKILL)                       # e.g. the OOM killer
    child.join(timeout=30)
    other = ViewRequest("pirads", "mean", "Age", "BPH", "sound", Role.COLLABORATOR)
    drawn = services.releases.answer(COLLAB, other, price=True)   # inline, not an error
    assert drawn.epsilon_charged > 0 and not drawn.cached
    assert services.releases.offload._pool is None           # the broken pool is dropped
    third = ViewRequest("pirads", "variance", "Age", "BPH", "sound", Role.COLLABORATOR)
    services.releases.answer(COLLAB, third, price=True)
    (fresh,) = services.releases.offload._pool._processes.values()
    assert fresh.pid != child.pid and fresh.is_alive()
    assert len(views(services.ledger)) == 3
