"""Killing the process that runs heavy work (SIGKILL) mid-release, mid-synthetic-copy and
mid-anonymize: the work reads "failed, nothing charged", no process is left behind, and the
ledger's books still add up (issue 22). The child is stopped at a known point by a hook
(``tests/app/runner_hooks.py``), never by timing; the waits below only bound a failure."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from app import create_app, services_of
from callbacks import anonymize as anonymize_cb
from layouts import ids
from services.container import runner_services
from services.identity.roles import Role
from services.identity.session import Identity
from services.ledger.audit import check_invariants
from services.runner import Jobs, ProcessRunner, jobs
from tests.app import runner_hooks
from tests.app.explore_client import PRICED, post

ROOT = Path(__file__).resolve().parents[2]
OLGA = Identity("olga", Role.OWNER, True)
BOUND = 120.0
"""Seconds after which a wait below is a failure (a child starts in a few seconds)."""


def _until(what, done, bound: float = BOUND):
    """Poll ``what()`` until ``done(value)``; the value (a failure after ``bound`` s)."""
    end = time.monotonic() + bound
    while True:
        value = what()
        if done(value):
            return value
        if time.monotonic() > end:
            raise AssertionError(f"still {value!r} after {bound} s")
        time.sleep(0.05)


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _kill_when_stopped(data_dir: Path) -> int:
    """Wait for the child to reach its hook, SIGKILL it, return its pid."""
    started = runner_hooks.started_file(data_dir)
    _until(started.exists, bool)
    pid = int(_until(started.read_text, str.strip))
    assert pid != os.getpid()
    os.kill(pid, signal.SIGKILL)
    return pid


def _hooked(services, hook) -> ProcessRunner:
    """The app's runner replaced by one whose children stop at ``hook``."""
    services.runner.close()
    runner = ProcessRunner(services.config, 1, runner_services, initializer=hook)
    services.runner = runner
    services.studio.jobs = Jobs(runner)
    return runner


def _spend(s) -> tuple:
    st = s.ledger.status(role=Role.OWNER, dataset_id="pirads", user="olga")
    return (st.role.spent, st.user.spent, st.dataset.loss)


def _books(s) -> list:
    return [r for r in s.ledger.releases() if not r.query_key.startswith("internal:")]


@pytest.fixture
def app(tmp_path):
    app = create_app({"data_dir": tmp_path, "runner_processes": 1})
    yield app
    services_of(app).runner.close()


def _no_child_left(runner: ProcessRunner, killed: int) -> None:
    assert _gone(killed) and killed not in runner.pids()
    alive = runner.pids()
    runner.close()
    assert all(_until(lambda p=p: _gone(p), bool) for p in alive)
    mine = [c for c in psutil.Process().children(recursive=True)
            if c.status() != psutil.STATUS_ZOMBIE and "spawn_main" in " ".join(c.cmdline())]
    assert mine == []


def _release_killed(app, hook) -> tuple:
    """Press Release on a priced view with the child stopped at ``hook`` and killed there:
    (the screen, the spend and books before, the runner, the killed pid)."""
    s = services_of(app)
    client = app.server.test_client()
    values = {"dataset": "pirads", "role": "owner", "view": "mean", "x": "Age",
              "group": "Prostatitis"}
    assert PRICED in post(client, ids.EX_RELEASE, **values).text     # sizes priced, public
    before, books = _spend(s), _books(s)
    runner = _hooked(s, hook)
    got: list = []
    pressing = threading.Thread(target=lambda: got.append(post(client, ids.EX_RELEASE,
                                                               **values)))
    pressing.start()
    killed = _kill_when_stopped(s.config.data_dir)
    pressing.join(BOUND)
    (shown,) = got
    assert shown.status == 200
    return shown, before, books, runner, killed


def test_killed_mid_release_the_screen_says_failed_and_nothing_was_charged(app):
    s = services_of(app)
    shown, before, books, runner, killed = _release_killed(app, runner_hooks.mid_release)
    assert "ended before it finished. Nothing was charged" in shown.text
    assert not shown.release_ids()
    assert _spend(s) == before and _books(s) == books and check_invariants(s.ledger) == []
    _no_child_left(runner, killed)


def test_killed_after_the_door_stored_the_release_the_screen_says_so(app):
    """The release was recorded before the child died: the screen says it was, not
    "nothing charged", and the books hold exactly that one release."""
    s = services_of(app)
    shown, before, books, runner, killed = _release_killed(app, runner_hooks.after_release)
    assert "ended after its release was recorded" in shown.text
    assert _spend(s) != before and len(_books(s)) == len(books) + 1
    assert check_invariants(s.ledger) == []
    _no_child_left(runner, killed)


def test_killed_mid_synthetic_copy_the_job_says_failed_and_nothing_was_charged(app):
    s = services_of(app)
    runner = _hooked(s, runner_hooks.mid_synthetic_fit)
    token = s.studio.start_synthetic(OLGA, "pirads", 1.0)
    killed = _kill_when_stopped(s.config.data_dir)
    record = _until(lambda: s.studio.job(OLGA, token), lambda r: r["state"] == "error",
                    bound=60.0)                                   # "within a minute"
    assert "Nothing was charged" in record["text"]
    assert _books(s) == [] and _spend(s) == (0.0, 0.0, 0.0)
    assert check_invariants(s.ledger) == []
    _no_child_left(runner, killed)


def test_killed_mid_anonymize_the_page_says_failed_and_nothing_was_released(app):
    s = services_of(app)
    runner = _hooked(s, runner_hooks.mid_anonymize)
    page = SimpleNamespace(registry=s.registry, runner=runner,
                           identity=SimpleNamespace(current=lambda: OLGA))
    got: list = []
    running = threading.Thread(target=lambda: got.append(anonymize_cb.handle_run(
        page, ids.AN_RUN, "pirads", ["Age"], [], 5, "hybrid", "flatten", "Age", "Age", None)))
    running.start()
    killed = _kill_when_stopped(s.config.data_dir)
    running.join(BOUND)
    (out,) = got
    message, _report, _figure, store, _disabled = out
    assert "Nothing was released or charged" in json.dumps(message.to_plotly_json(),
                                                           default=str)
    assert not isinstance(store, dict)                            # no table to download
    assert _books(s) == [] and check_invariants(s.ledger) == []
    _no_child_left(runner, killed)


def test_a_killed_web_worker_takes_its_children_and_its_job_reads_failed(tmp_path,
                                                                          monkeypatch):
    """The web worker itself is killed mid-synthetic-copy: its runner child ends with it, and
    another worker reading the job sees it failed once the heartbeat stopped."""
    monkeypatch.setattr(jobs, "HEARTBEAT", 0.2)
    worker = subprocess.Popen([sys.executable, "-m", "tests.app.runner_worker", str(tmp_path)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        started = json.loads(worker.stdout.readline())
        assert psutil.Process(started["child"]).ppid() == worker.pid
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(BOUND)
        _until(lambda: _gone(started["child"]), bool, bound=60.0)   # no orphan
        other = services_of(create_app({"data_dir": tmp_path}))
        record = _until(lambda: other.studio.job(OLGA, started["token"]),
                        lambda r: r["state"] == "error", bound=60.0)
        assert "Nothing was charged" in record["text"]
        assert _books(other) == [] and check_invariants(other.ledger) == []
    finally:
        if worker.poll() is None:
            worker.kill()
