"""How fast the hardened web layer refuses: oversized bodies, revoked cookies, throttled logins,
10^5-bin schemas — through ``gunicorn -w 2 app:server`` on loopback (the real app, users mode).

Usage: ``.venv/bin/python -m bench.bench_security [--repeats 7]``; writes
``bench/RESULTS_security.md`` (included in ``bench/RESULTS.md`` by ``bench.run_all``). Times are
client-side wall clock, median and minimum over the repeats; the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psutil

from bench.common import BENCH_DIR, header_markdown, load_average
from dp_engine.errors import SchemaError
from dp_engine.schema import ColumnSpec
from layouts import ids
from layouts.data.page import schema_rows
from services.data.registry import SAMPLE_SCHEMA, read_schema_file
from services.identity.users import add_user
from tests.app.dash_http import callback_payload
from tests.app.gunicorn_app import Client, GunicornApp, post_huge

OUTPUT = BENCH_DIR / "RESULTS_security.md"
PASSWORD = "a long enough password"
MB = 1_000_000


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float, object]:
    """(median s, min s, last result) of ``repeats`` calls after one warm-up."""
    fn()
    samples, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples), result


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def run(repeats: int) -> str:
    tmp = Path(tempfile.mkdtemp(prefix="bench-security-"))
    users = tmp / "users.json"
    for name, role in [("tina", "third_party"), ("olga", "owner"), ("otto", "owner")]:
        add_user(users, name, role, PASSWORD)
    srv = GunicornApp({"COHORT_USERS_FILE": str(users), "SECRET_KEY": "bench-" + "b" * 40,
                       "COHORT_DATA_DIR": str(tmp / "var"),
                       "DATABASE_URL": f"sqlite:///{tmp / 'var' / 'ledger.sqlite'}",
                       "COHORT_LOGIN_MAX_FAILURES": "1",
                       "COHORT_LOGIN_CLIENT_MAX_FAILURES": "1000",
                       "COHORT_LOGIN_BACKOFF_SECONDS": "600"}, tmp)
    srv.start()
    rows: list[str] = []
    try:
        workers = [psutil.Process(pid) for pid in srv.workers()]
        rss_before = sum(w.memory_info().rss for w in workers)
        for who in (None, "tina", "olga"):
            client = Client(srv)
            if who:
                client.login(who, PASSWORD)
            cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
            med, low, (status, sent) = timed(
                lambda c=cookie: post_huge(srv.port, "/_dash-update-component", 200 * MB, c),
                repeats)
            rows.append(f"| 200 MB POST /_dash-update-component, {who or 'anonymous'} | "
                        f"{status} | {_ms(med)} | {_ms(low)} | {sent / MB:.1f} MB of 200 sent "
                        "before the answer |")
        rss_after = sum(w.memory_info().rss for w in workers)
        rows.append(f"| both workers' RSS across the 200 MB POSTs | – | – | – | "
                    f"{rss_before / MB:.0f} MB → {rss_after / MB:.0f} MB |")

        browser = Client(srv)
        browser.login("tina", PASSWORD)
        med, low, live = timed(lambda: browser.request("GET", "/_dash-layout"), repeats)
        rows.append(f"| live session, GET /_dash-layout | {live.status} | {_ms(med)} | "
                    f"{_ms(low)} | session checked in SQL |")
        stolen = Client(srv, dict(browser.cookies))
        browser.logout()
        med, low, dead = timed(lambda: stolen.request("GET", "/_dash-layout"), repeats)
        rows.append(f"| logged-out cookie, GET /_dash-layout | {dead.status} | {_ms(med)} | "
                    f"{_ms(low)} | refused by whichever worker answers |")

        guesser, names = Client(srv), iter(range(10**6))
        med, low, fail = timed(lambda: guesser.login(f"nobody{next(names)}", "wrong!!"), repeats)
        rows.append(f"| failed login (password hashed) | {fail.status} | {_ms(med)} | "
                    f"{_ms(low)} | GET form + POST; a fresh unknown name each time |")
        med, low, refused = timed(lambda: guesser.login("otto", "wrong password!!"), repeats)
        rows.append(f"| throttled login (no hashing) | {refused.status} | {_ms(med)} | "
                    f"{_ms(low)} | GET form + POST; after 1 failure, backoff 600 s |")

        owner = Client(srv)
        owner.login("olga", PASSWORD)
        table = schema_rows(read_schema_file(SAMPLE_SCHEMA))
        next(r for r in table if r["name"].lower() == "age").update(
            lower="0", upper="110", bin_width="0.0011")
        deps = json.loads(owner.request("GET", "/_dash-dependencies").body)
        body = callback_payload(deps, ids.DATA_MESSAGE, {(ids.DATA_LIST, "value"): "pirads",
                                                         (ids.DATA_SAVE, "n_clicks"): 1,
                                                         (ids.DATA_TABLE, "data"): table},
                                (ids.DATA_SAVE, "n_clicks"))
        med, low, bins = timed(lambda: owner.post_json(body), repeats)
        ok = "100,000 histogram bins" in bins.text
        rows.append(f"| owner saves a schema with 10^5 bins (Data page) | {bins.status} | "
                    f"{_ms(med)} | {_ms(low)} | refused with a message: {ok} |")
    finally:
        srv.stop()

    def refuse() -> None:
        try:
            ColumnSpec("age", "numeric", lower=0, upper=110, bin_width=0.0011)
        except SchemaError:
            return
        raise AssertionError("not refused")

    med, low, _ = timed(refuse, max(repeats, 100))
    rows.append(f"| ColumnSpec with 10^5 bins, in process | – | {med * 1000:.3f} | "
                f"{low * 1000:.3f} | refused before any bin is built |")
    return _markdown(rows, repeats)


def _markdown(rows: list[str], repeats: int) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join([
        "# Security refusals (issue 12)",
        "",
        f"`.venv/bin/python -m bench.bench_security --repeats {repeats}` on {stamp}: the real "
        "app under `gunicorn -w 2 app:server` on 127.0.0.1 (SQLite sessions and throttle), "
        "client-side wall clock per request (new connection each), median and minimum of "
        f"{repeats} after a warm-up. Load average (1, 5, 15 min) at the end: {load_average()}.",
        "",
        "| request | status | median ms | min ms | note |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "<details><summary>Machine and versions</summary>",
        "",
        header_markdown(),
        "",
        "</details>",
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    text = run(args.repeats)
    args.output.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
