"""Progress that moves (issue 23 item 4): a studio job writes each stage as it reaches it
(the copy, its metrics, each auto-tune try, the figures, the model check) with a percent that
only grows, and the page's poll draws the stage the job is in. Observed through the store's
writes and through polls made while the job is held at a known stage (events, no sleeps)."""

from __future__ import annotations

import json
import queue
import threading

import pytest

from callbacks.studio.jobs import poll_view
from layouts import ids
from services.identity.roles import Role
from services.identity.session import Identity
from services.runner import jobs
from services.studio.store import RunStore
from tests.app.test_studio_http import _post, _run
from tests.app.test_studio_service import CHOICES

OWNER = Identity("olga", Role.OWNER, True)
TUNE = {(ids.ST_TOL_KS, "value"): 0, (ids.ST_TUNE_BUDGET, "value"): 10}


class ObservedStore(RunStore):
    """A RunStore that keeps every state a job writes, as a poll would read it."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.seen: list[dict] = []

    def update(self, user: str, token: str, **fields) -> dict | None:
        record = super().update(user, token, **fields)
        self.seen.append(self.get(user, token))
        return record


@pytest.fixture
def services(explore_app):
    from app import services_of

    return services_of(explore_app)


def _bar(record: dict) -> tuple[str, str]:
    """(text, percent) of the progress bar the poll draws for ``record``."""
    bar = json.dumps(poll_view(record, lambda _r: None, "progress")[0].to_plotly_json(),
                     default=lambda o: o.to_plotly_json(), ensure_ascii=False)
    text = bar.split('"aria-valuetext": "')[1].split('"')[0]
    return text, bar.split('"aria-valuenow": "')[1].split('"')[0]


def test_an_auto_tune_writes_every_stage_and_the_bar_draws_each(services, tmp_path,
                                                                  monkeypatch):
    from dp_engine.release import Tolerances

    store = services.studio.store = ObservedStore(tmp_path / "runs")

    def inline(store, user, kind, fn, *args, mark=None):   # the job's own path, run here
        token = store.new(user, kind, mark=mark)
        services.studio.jobs._run(jobs._Held(store, user, token), fn, args)
        return token

    monkeypatch.setattr(services.studio.jobs, "submit", inline)
    token = services.studio.start_record(OWNER, "pirads", CHOICES, "BPH",
                                         tune=(Tolerances(max_ks=0.0), 10.0))
    running = [r for r in store.seen if r["state"] == "running"]
    texts = [r["text"] for r in running]
    assert texts == ["Starting…",
                     "Auto-tune try 1 (ε 3 of the 10 budget): making the per-record copy…",
                     "Auto-tune try 1 (ε 3 of the 10 budget): measuring privacy and utility…",
                     "Auto-tune try 2 (ε 6 of the 10 budget): making the per-record copy…",
                     "Auto-tune try 2 (ε 6 of the 10 budget): measuring privacy and utility…",
                     "Figures of each column…", "Model check…"]
    fractions = [r["progress"] for r in running]
    assert fractions == sorted(fractions) and len(set(fractions)) == len(fractions)
    # try 1 costs 3 of the 10 budget: its share of the bar is 0.75 * 3 / 10
    assert fractions[1] == pytest.approx(0.05) and fractions[3] == pytest.approx(0.275)
    bars = [_bar(r) for r in running]
    assert [t for t, _ in bars] == [f"{t} {p} %" for t, p in zip(texts, [b[1] for b in bars],
                                                                 strict=True)]
    assert [int(p) for _, p in bars] == [round(100 * f) for f in fractions]
    assert store.get(OWNER.user, token)["state"] == "done"


def test_a_poll_during_the_run_shows_the_stage_the_job_is_in(client, services):
    """The job (a real background thread) is held after each try; each poll then shows that
    try's stage and a larger percent."""
    real, reached, go = services.studio.run, queue.Queue(), threading.Semaphore(0)

    def held(*args, **kwargs):
        out = real(*args, **kwargs)
        reached.put(kwargs.get("stage", ""))
        assert go.acquire(timeout=60), "the test never let the job go on"
        return out

    services.studio.run = held
    resp = _run(client, tune=True, extra=TUNE).json["response"]
    token = resp[ids.ST_LAST]["data"]
    assert "progressbar" in json.dumps(resp[ids.ST_PROGRESS])

    def poll() -> tuple[str, int]:
        out = _post(client, ids.ST_PROGRESS, {(ids.ST_LAST, "data"): token},
                    (ids.ST_POLL, "n_intervals")).json["response"]
        assert out[ids.ST_POLL]["disabled"] is False          # still polling
        bar = json.dumps(out[ids.ST_PROGRESS], ensure_ascii=False)
        return (bar.split('"aria-valuetext": "')[1].split('"')[0],
                int(bar.split('"aria-valuenow": "')[1].split('"')[0]))

    percents = []
    for n in (1, 2):
        assert reached.get(timeout=60).startswith(f"Auto-tune try {n}")
        text, pct = poll()
        assert text.startswith(f"Auto-tune try {n} (") and "measuring privacy" in text
        percents.append(pct)
        go.release()
    assert 0 < percents[0] < percents[1] < 100
    for _ in range(600):                 # bounded: the job finishes once let go
        record = services.studio.job(services.identity.current(), token)
        if record["state"] == "done":
            break
        threading.Event().wait(0.05)
    assert record["state"] == "done" and record["result"]["verdict"]["ok"] is False
    # the first poll that finds it done says so at 100 % while the page draws; the next
    # one sends the results and stops polling
    assert poll() == ("Done: drawing the results… 100 %", 100)
    out = _post(client, ids.ST_PROGRESS, {(ids.ST_LAST, "data"): token},
                (ids.ST_POLL, "n_intervals")).json["response"]
    assert out[ids.ST_POLL]["disabled"] is True and out[ids.ST_PROGRESS]["children"] is None
    assert "Auto-tune failed" in json.dumps(out[ids.ST_RESULTS])
