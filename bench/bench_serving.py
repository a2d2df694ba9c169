"""Cached answers while uncached 1e7 requests run from 8 sessions (issue 14, serving).

    python -m bench.bench_serving [--rows 1e7] [--config 4:4 --config 2:4 ...] [--sessions 8]
                                  [--duration 90] [--out bench/RESULTS_warehouse.md]

The real app under ``gunicorn -c docs/deploy/gunicorn.conf.py`` (``--config W:T`` overrides
workers and gthread threads), users mode (a users file, real HTTP logins), its dataset
``cohort`` a 1e7-row Parquet warehouse entry made by the project's generator and streaming
ingestion (``bench_warehouse.prepare``). ``--sessions`` threads, each its own cookie jar,
half owners and half collaborators, press Release on distinct views (no two sessions ask the
same view, owners and collaborators never share one), so every press is a fresh release: a
never-priced grouping is priced by the first press and released by the second, exactly as
the page does (``tests/app/explore_client.py``). One more session (a collaborator) presses
Release on a view it already has, over and over: a cached answer. Each configuration gets a
fresh data directory (ledger, sessions, precomputed tables): nothing is cached across runs.

Latency is client wall clock from sending the request to the last byte of the (gzip) answer,
measured in this process, which shares the 2 cores with the server.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import http.client
import json
import os
import random
import resource
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psutil

from bench.bench_warehouse import prepare, warehouse_env
from bench.common import BENCH_DIR, ROOT, DataCheckFailed, header_markdown, load_average
from dp_engine.schema import ColumnKind, Schema
from layouts import ids
from services.data.registry import SAMPLE_SCHEMA, read_schema_file
from services.identity.users import add_user
from services.views.queries import GROUPABLE_KINDS
from tests.app.explore_client import PRICED, render
from tests.app.explore_client import post as press
from tests.app.gunicorn_app import Client, GunicornApp

PASSWORD = "a long enough password"
DATASET = "cohort"
CACHED_VIEW = {"view": "histogram", "x": "Age", "group": "PIRADS score"}
FREE = "Opened free: already released to your role."
DEPLOY_CONF = ROOT / "docs" / "deploy" / "gunicorn.conf.py"
DEPLOY_ENV = ROOT / "docs" / "deploy" / "cohort.env"
SECTION = "## Cached answers under uncached load"
TARGET_P95 = 0.050


# ------------------------------------------------------------------------------ sessions


@dataclass
class _Reply:
    """What ``explore_client.post`` reads of a Flask test-client response."""

    status_code: int
    body: bytes

    def get_data(self, as_text: bool = False):
        return self.body.decode("utf-8", "replace") if as_text else self.body


@dataclass
class HttpSession:
    """One logged-in browser, shaped like Flask's test client so explore_client drives it.

    A new connection per request, gzip accepted; ``last`` is the wall time of the last POST.
    """

    port: int
    cookies: dict[str, str]
    last: float = 0.0

    def post(self, path: str, json: dict) -> _Reply:  # noqa: A002 - the test-client keyword
        body = _dumps(json)
        headers = {"Content-Type": "application/json", "Accept-Encoding": "gzip",
                   "Connection": "close",
                   "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        start = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            conn.request("POST", path, body, headers)
            res = conn.getresponse()
            data = res.read()
            self.last = time.perf_counter() - start
            if res.getheader("Content-Encoding") == "gzip":
                data = gzip.decompress(data)
            return _Reply(res.status, data)
        finally:
            conn.close()


def _dumps(payload: dict) -> bytes:
    return json.dumps(payload).encode()


@dataclass
class Record:
    kind: str          # cached | price | release | free | refused | error
    role: str
    seconds: float
    at: float          # start, seconds since the load began


@dataclass
class Run:
    records: list[Record] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, rec: Record, message: str = "") -> None:
        with self.lock:
            self.records.append(rec)
            if message and len(self.messages) < 5:
                self.messages.append(message)


def uncached_views(schema: Schema, seed: int = 0) -> dict[str, deque]:
    """Distinct (view, x, group) for each role, never shared between roles, shuffled."""
    cols = schema.queryable_columns()
    groups = [None] + [c.name for c in cols if c.kind in GROUPABLE_KINDS and c.categories]
    combos = []
    for x in cols:
        measured = x.kind in (ColumnKind.NUMERIC, ColumnKind.ORDINAL) and x.has_bounds
        for view in ("histogram", "mean", "median", "variance") if measured else ("histogram",):
            combos += [{"view": view, "x": x.name, "group": g} for g in groups if g != x.name]
    combos = [c for c in combos if c != CACHED_VIEW]
    random.Random(seed).shuffle(combos)
    return {"owner": deque(combos[0::2]), "collaborator": deque(combos[1::2])}


def uncached_session(http: HttpSession, role: str, todo: deque, run: Run, t0: float,
                     deadline: float, pace: float = 0.0) -> None:
    """Press Release on fresh views until the list is empty or time is up; ``pace``: the
    least seconds from one view's first press to the next view's (a person reading the
    answer), 0 for back to back."""
    while time.perf_counter() < deadline:
        try:
            view = todo.popleft()
        except IndexError:
            return
        begun = time.perf_counter()
        values = {"dataset": DATASET, "role": role, "mechanism": "sound", **view}
        at = time.perf_counter() - t0
        reply = press(http, ids.EX_RELEASE, **values)
        if PRICED in reply.text:
            run.add(Record("price", role, http.last, at))
            at = time.perf_counter() - t0
            reply = press(http, ids.EX_RELEASE, **values)
        if reply.status != 200:
            run.add(Record("error", role, http.last, at), f"{reply.status} {reply.text[:200]}")
        elif FREE in reply.text:
            run.add(Record("free", role, http.last, at))
        elif reply.release_ids():
            run.add(Record("release", role, http.last, at))
        else:
            run.add(Record("refused", role, http.last, at), f"{view}: {reply.message[:200]}")
        time.sleep(max(0.0, min(begun + pace, deadline) - time.perf_counter()))


def cached_session(http: HttpSession, run: Run | None, t0: float, stop: threading.Event,
                   count: int | None = None) -> None:
    """Press Release on a view the session already has: served from the ledger's store."""
    values = {"dataset": DATASET, "role": "collaborator", "mechanism": "sound", **CACHED_VIEW}
    done = 0
    while not stop.is_set() and (count is None or done < count):
        at = time.perf_counter() - t0
        reply = press(http, ids.EX_RELEASE, **values)
        done += 1
        if run is not None:
            ok = reply.status == 200 and FREE in reply.text
            run.add(Record("cached" if ok else "error", "collaborator", http.last, at),
                    "" if ok else f"cached view not free: {reply.text[:200]}")


# ------------------------------------------------------------------------------ server


def deployed(name: str) -> str:
    """The value ``docs/deploy/cohort.env`` gives ``name`` ('' if it sets none)."""
    for line in DEPLOY_ENV.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return ""


@dataclass(frozen=True)
class Setting:
    """``W:T[:C[:P]]``: workers, gthread threads, worker connections (default: the config's),
    and the runner's child processes per worker, ``P`` (0: heavy work inline; default: as
    ``docs/deploy/cohort.env`` sets COHORT_RUNNER_PROCESSES)."""

    workers: int
    threads: int
    connections: int | None = None
    processes: int = 1

    @classmethod
    def parse(cls, text: str) -> Setting:
        w, t, *rest = text.split(":")
        c = rest[0] if rest else ""
        p = rest[1] if len(rest) > 1 else deployed("COHORT_RUNNER_PROCESSES") or "0"
        if not p.isdigit():
            raise ValueError(f"{text}: the fourth part is the runner's processes per worker "
                             "(0: inline)")
        return cls(int(w), int(t), int(c) if c else None, int(p))

    @property
    def args(self) -> str:
        extra = f" --worker-connections {self.connections}" if self.connections else ""
        return f"-k gthread --threads {self.threads}{extra}"

    @property
    def label(self) -> str:
        where = (f"heavy work in {self.processes} runner process(es) per worker"
                 if self.processes else "heavy work inline")
        return f"-w {self.workers} {self.args}, {where}"

    def named(self, database: str | None) -> str:
        return f"{self.label}, {'PostgreSQL' if database else 'SQLite'} ledger"


class Monitor(threading.Thread):
    """Samples every worker's RSS, with its runner children's (max kept), while the load runs."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.procs = [psutil.Process(p) for p in pids]
        self.peak = {p.pid: self._rss(p) for p in self.procs}
        self.stop = threading.Event()

    @staticmethod
    def _family(p: psutil.Process) -> list[psutil.Process]:
        with contextlib.suppress(psutil.Error):
            return [p, *p.children(recursive=True)]
        return [p]

    def _rss(self, p: psutil.Process) -> int:
        total = 0
        for q in self._family(p):
            with contextlib.suppress(psutil.Error):
                total += q.memory_info().rss
        return total

    def run(self) -> None:
        while not self.stop.wait(0.5):
            for p in self.procs:
                self.peak[p.pid] = max(self.peak[p.pid], self._rss(p))

    def cpu(self) -> float:
        """CPU seconds of the workers and their children, live or ended."""
        total = 0.0
        for p in self.procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
            for q in self._family(p)[1:]:
                with contextlib.suppress(psutil.Error):
                    total += sum(q.cpu_times()[:2])
        return total


@contextlib.contextmanager
def ledger_database(server_url: str | None) -> Iterator[str]:
    """'' (SQLite in the data directory), or a fresh PostgreSQL database, dropped after."""
    if not server_url:
        yield ""
        return
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(server_url)
    name = f"bench_serving_{os.getpid()}_{int(time.time())}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def serve(glob: str, tmp: Path, setting: Setting, sessions: int,
          database_url: str) -> GunicornApp:
    """The app on a fresh data directory, users mode, unlimited collaborator budget."""
    users = tmp / "users.json"
    for name, role in users_of(sessions).items():
        add_user(users, name, role, PASSWORD)
    env = warehouse_env(glob, tmp)
    args = f"-c {DEPLOY_CONF} {setting.args}"
    extra = {"COHORT_USERS_FILE": str(users), "SECRET_KEY": "bench-serving-" + "s" * 40,
             "DATABASE_URL": database_url, "GUNICORN_CMD_ARGS": args,
             "COHORT_BUDGETS": json.dumps({"collaborator": "unlimited", "dataset_cap": None}),
             "COHORT_LOGIN_CLIENT_MAX_FAILURES": "1000",
             "COHORT_RUNNER_PROCESSES": str(setting.processes)}
    if not database_url:          # SQLite: the line left out (an empty one is refused)
        del extra["DATABASE_URL"]
    srv = GunicornApp({k: env[k] for k in ("COHORT_WAREHOUSE", "COHORT_DATA_DIR")} | extra,
                      tmp / "log", workers=setting.workers)
    srv.start()
    return srv


def users_of(sessions: int = 8) -> dict[str, str]:
    """Owners o1.., collaborators c1.. (alternating), and the cached-view reader 'reader'."""
    names = {f"{'o' if i % 2 == 0 else 'c'}{i // 2 + 1}":
             "owner" if i % 2 == 0 else "collaborator" for i in range(sessions)}
    return names | {"reader": "collaborator"}


def logged_in(srv: GunicornApp, name: str) -> HttpSession:
    client = Client(srv)
    reply = client.login(name, PASSWORD)
    if reply.status != 302:
        raise RuntimeError(f"login of {name} failed: {reply.status} {reply.text[:300]}")
    return HttpSession(srv.port, client.cookies)


# ------------------------------------------------------------------------------ one run


def measure(glob: str, schema: Schema, setting: Setting, *, sessions: int,
            duration: float, database: str | None = None, pace: float = 0.0) -> dict:
    """One server, one load: latencies by kind, throughput, memory, CPU, load averages."""
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as name, \
            ledger_database(database) as url:
        tmp = Path(name)
        srv = serve(glob, tmp, setting, sessions, url)
        try:
            return _load(srv, schema, sessions, duration, pace)
        finally:
            srv.stop()


def _load(srv: GunicornApp, schema: Schema, sessions: int, duration: float,
          pace: float = 0.0) -> dict:
    names = users_of(sessions)
    reader = logged_in(srv, "reader")
    render(reader, dataset=DATASET, role="collaborator", mechanism="sound", **CACHED_VIEW)
    alone = Run()
    stop = threading.Event()
    cached_session(reader, None, 0.0, stop, count=10)       # warm every worker's path
    cached_session(reader, alone, time.perf_counter(), stop, count=40)
    todo = uncached_views(schema)
    clients = [(logged_in(srv, n), role) for n, role in names.items() if n != "reader"]
    monitor = Monitor(srv.workers())
    monitor.start()
    cpu0, self0 = monitor.cpu(), _self_cpu()
    load_before = load_average()
    run = Run()
    t0 = time.perf_counter()
    deadline = t0 + duration
    threads = [threading.Thread(target=uncached_session,
                                args=(http, role, todo[role], run, t0, deadline, pace))
               for http, role in clients]
    reading = threading.Thread(target=cached_session, args=(reader, run, t0, stop))
    reading.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    reading.join()
    wall = time.perf_counter() - t0
    monitor.stop.set()
    monitor.join()
    return {"run": run, "alone": alone, "wall": wall, "load_before": load_before,
            "load_after": load_average(), "server_cpu": monitor.cpu() - cpu0,
            "client_cpu": _self_cpu() - self0, "peak_rss": monitor.peak,
            "left": {r: len(q) for r, q in todo.items()}}


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------------ report


def _pct(values: list[float], q: float) -> str:
    return f"{np.percentile(values, q) * 1000:.0f}" if values else "–"


def report(setting: Setting, m: dict, database: str | None) -> tuple[list[str], list[str]]:
    """The table row of one configuration, and notes on unexpected outcomes."""
    run: Run = m["run"]
    by: dict[str, list[float]] = {}
    for rec in run.records:
        by.setdefault(rec.kind, []).append(rec.seconds)
    cached, alone = by.get("cached", []), [r.seconds for r in m["alone"].records]
    fresh = by.get("release", []) + by.get("price", [])
    p95 = np.percentile(cached, 95) if cached else float("inf")
    verdict = "PASS" if p95 <= TARGET_P95 else "FAIL"
    peaks = list(m["peak_rss"].values())
    rss = ", ".join(f"{v / 1e6:.0f}" for v in peaks) + f" (sum {sum(peaks) / 1e6:.0f})"
    lines = [
        f"| {setting.named(database)} | {len(alone)}: {_pct(alone, 50)} / {_pct(alone, 95)} | "
        f"{len(cached)}: {_pct(cached, 50)} / {_pct(cached, 95)} / {_pct(cached, 99)} / "
        f"{max(cached) * 1000 if cached else 0:.0f} | **{verdict}** | "
        f"{len(by.get('release', []))}: {_pct(by.get('release', []), 50)} / "
        f"{_pct(by.get('release', []), 95)} | {len(by.get('price', []))}: "
        f"{_pct(by.get('price', []), 50)} / {_pct(by.get('price', []), 95)} | "
        f"{len(fresh) / m['wall']:.1f} | {len(cached) / m['wall']:.1f} | {m['wall']:.0f} | "
        f"{m['server_cpu']:.0f} / {m['client_cpu']:.1f} | {rss} | "
        f"{m['load_before']} → {m['load_after']} |"]
    other = {k: len(v) for k, v in by.items() if k not in ("cached", "release", "price")}
    notes = []
    if other:
        notes.append(f"{setting.named(database)}: other outcomes {other}; first messages: "
                     + " · ".join(run.messages[:3]))
    return lines, notes


HEAD = ("| server | cached alone, n: p50 / p95 ms | cached under load, n: p50 / p95 / p99 / max ms "
        "| target p95 ≤ 50 ms | uncached releases, n: p50 / p95 ms | pricing presses, n: "
        "p50 / p95 ms | uncached req/s | cached req/s | load s | CPU s server / client "
        "| worker (+ its child) peak RSS MB | load average (1, 5, 15 min) before → after |")


def heading(size: str, pace: float = 0.0) -> str:
    """The section's heading: the 1e7 run is the issue's target, others are named."""
    paced = f", one press per session every {pace:g} s" if pace else ""
    return (SECTION if size == "1e7" else f"{SECTION}, {size} rows") + paced


def section(command: str, glob: str, rows: list[str], sessions: int, duration: float,
            size: str = "1e7", pace: float = 0.0) -> str:
    parts = [heading(size, pace), "", f"Command: `{command}`", "",
             f"`bench/bench_serving.py`: the real app under gunicorn with "
             f"`{DEPLOY_CONF.relative_to(ROOT)}` (users mode; ledger and sessions in SQLite or "
             "PostgreSQL as the row says), "
             f"its dataset a {size}-row Parquet warehouse entry (`{Path(glob).parent.name}`, "
             "DuckDB). "
             f"{sessions} sessions ({sessions // 2} owners, {sessions - sessions // 2} "
             "collaborators, each its own login) press Release on distinct views for up to "
             f"{duration:.0f} s (a never-priced grouping: one pricing press, then the "
             "release), "
             + (f"each starting a view at most every {pace:g} s (time to read an answer); "
                if pace else "back to back; ")
             + "one more collaborator presses Release on a view it already has "
             "(answered from the ledger's store, free) until they finish. Client wall clock, "
             "gzip accepted, a new connection per request.", "", HEAD,
             "|" + "---|" * HEAD.count(" | ") + "---|", *rows, "", header_markdown(), ""]
    return "\n".join(parts)


def write_section(path: Path, text: str) -> None:
    """Replace the section of ``path`` with ``text``'s heading (up to the next '## '
    heading), or append it."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    title = text.splitlines()[0]
    start = ("\n" + old).find("\n" + title + "\n")        # where the heading line starts
    if start < 0:
        new = old.rstrip() + "\n\n" + text
    else:
        end = old.find("\n## ", start + len(title))
        new = old[:start] + text + (old[end + 1:] if end >= 0 else "")
    path.write_text(new.rstrip() + "\n", encoding="utf-8")


def run(glob: str, configs: list[str], *, sessions: int = 8, duration: float = 90.0,
        database: str | None = None, command: str = "python -m bench.bench_serving",
        size: str = "1e7", both: bool = False, pace: float = 0.0) -> str:
    """Measure every configuration in turn (on SQLite, then on ``database`` too when
    ``both``, else on ``database`` or SQLite); the markdown section of the results."""
    schema = read_schema_file(SAMPLE_SCHEMA)
    rows: list[str] = []
    notes: list[str] = []
    ledgers = [None, database] if both and database else [database]
    for text in configs:
        setting = Setting.parse(text)
        for db in ledgers:
            row, note = report(setting, measure(glob, schema, setting, sessions=sessions,
                                                duration=duration, database=db, pace=pace),
                               db)
            rows += row
            notes += note
            print(*row, *note, sep="\n", flush=True)
    return section(command, glob, rows + ([""] + notes if notes else []), sessions, duration,
                   size, pace)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1e7", choices=("1e6", "1e7", "1e8"))
    parser.add_argument("--config", action="append", default=None,
                        help="W:T[:C[:P]] (see Setting), repeatable; default 4:16 "
                             "(docs/deploy/gunicorn.conf.py)")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--duration", type=float, default=90.0)
    parser.add_argument("--pace", type=float, default=0.0,
                        help="least seconds between two views of one session (0: back to "
                             "back, the default)")
    parser.add_argument("--database-url", default=None,
                        help="a PostgreSQL server URL for the ledger and sessions (a fresh "
                             "database per run, dropped after); default SQLite")
    parser.add_argument("--both-ledgers", action="store_true",
                        help="with --database-url: each configuration on SQLite and on "
                             "PostgreSQL")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"write the section into this file (e.g. {BENCH_DIR.name}/"
                             "RESULTS_warehouse.md)")
    args = parser.parse_args(argv)
    command = "python -m bench.bench_serving " + " ".join(sys.argv[1:] if argv is None
                                                           else argv)
    try:   # the data is checked against the generator's counts before anything is timed
        glob = prepare([args.rows])[args.rows]
    except DataCheckFailed as exc:
        print(exc)
        return 2
    text = run(glob, args.config or ["4:16"],
               sessions=args.sessions, duration=args.duration, database=args.database_url,
               command=command.strip(), size=args.rows, both=args.both_ledgers,
               pace=args.pace)
    print(text)
    if args.out:
        write_section(args.out, text)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
