"""Warehouse scale: uncached view latency per backend at 1e6, 1e7, 1e8 rows; memory; page weight.

    python -m bench.bench_warehouse [--sizes 1e6,1e7,1e8] [--backends duckdb,postgres,spark]
                                    [--pg-sizes 1e6,1e7] [--spark-sizes 1e6,1e7,1e8] [--out F]
                                    [--serving 4:4,2:8] [--memory-only]

``--memory-only``: only the worker memory table and the gunicorn total (no latency, serving).

``--serving``: cached answers under uncached load at 1e7 (``bench/bench_serving.py``).

Data: ``sample_data/generate.py --rows N`` CSVs in bench/data (git-ignored), streamed into
Parquet by the app's own ingestion (``services.data.sources.ingest``), 1e8 included
(``--link-1e8``: the 1e7 Parquet parts linked ten times instead). Before anything is timed the
stored data is read back and checked against what the generator wrote (rows and values
present per column, ``bench.common.check_data``); a difference stops the run. PostgreSQL
gets the queried columns by COPY into its own schema (checked the same way, dropped at the end).

``duckdb_pre``: the compact tables are built as a load builds them
(``services.data.sources.large.precompute_views``, timed: the ingestion cost), then every
view is timed once on a fresh source (the first request after a load), then as the others.

A *view* is what an uncached Explore request computes where the data lives: the aggregates
of one view (one SQL statement) plus the noise added in Python. Nothing is cached between
calls (DuckDB and Spark keep no result cache; the OS file cache is warm, as on a server).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from bench.common import DATA_DIR, ROOT, DataCheckFailed, check_data, header_markdown
from dp_engine.sound.mechanisms import dlap_noise, gumbel_argmax
from services.data.registry import SAMPLE_SCHEMA, read_schema_file
from services.data.sources.query import AggregateQuery as Q

SIZES = {"1e6": 1_000_000, "1e7": 10_000_000, "1e8": 100_000_000}
PG_SCHEMA = "w1_sources_bench"
PG_COLUMNS = ("Age", "PIRADS score", "Therapy", "Gleason score", "BPH", "Prostatitis")
TARGETS = {"1e7": 0.300, "1e8": 3.0}   # DuckDB, seconds per uncached view


def views(schema) -> dict[str, list]:
    """The aggregates of one Explore view each (grouped views include their group sizes)."""
    return {
        "histogram Age × PI-RADS": [Q.histogram(schema, "Age", "PIRADS score")],
        "group sizes PI-RADS": [Q.count(schema, "PIRADS score", require=("Age",))],
        "categorical Prostatitis": [Q.histogram(schema, "Prostatitis")],
        "mean Age × Therapy": [Q.moments(schema, "Age", "Therapy")],
        "variance Gleason": [Q.moments(schema, "Gleason score", squares=True)],
        "box plot Age × BPH": [Q.candidates(schema, "Age", "BPH")],
        "DP count": [Q.count(schema)],
    }


def noise(aggs, rng) -> None:
    """The Python side of a release: discrete Laplace on counts and sums, or the exp. mech."""
    for agg in aggs:
        if hasattr(agg, "n_candidates"):
            below = np.cumsum(agg.counts, axis=1)[:, : agg.n_candidates].astype(float)
            gumbel_argmax(-np.abs(below - 0.5 * below[:, -1:]), rng)
        elif hasattr(agg, "s1"):
            for part in (agg.count, agg.s1, agg.s2):
                if part is not None:
                    part + dlap_noise(10.0, part.shape, rng)
        else:
            agg.counts + dlap_noise(10.0, agg.counts.shape, rng)


# ------------------------------------------------------------------------------ data


GENERATOR_SEED = 20171   # sample_data/generate.py's default seed
EXPECTED: dict[str, tuple[int, dict[str, int]]] = {}
"""Rows and values present per column the generator wrote, per prepared size (checked)."""
CHECKS: list[str] = []
"""The data check lines of this run (printed, and written into the results)."""


def _generator():
    sys.path.insert(0, str(ROOT / "sample_data"))
    import generate

    return generate


def prepare(sizes: list[str], link_1e8: bool = False) -> dict[str, str]:
    """Parquet glob per size, generated and ingested on first use, each checked against the
    generator's counts (DataCheckFailed: nothing may be timed)."""
    from services.data.sources.ingest import ingest_csv, stored, stored_counts
    from services.data.sources.large import cached_version

    gen = _generator()
    schema = read_schema_file(SAMPLE_SCHEMA)
    store, out = DATA_DIR / "parquet", {}
    linked = link_1e8 and "1e8" in sizes
    for key in sorted(set(sizes) | ({"1e7"} if linked else set())):
        if key == "1e8" and linked:
            continue
        csv = DATA_DIR / f"cohort_{key}.csv"
        if not csv.exists():
            subprocess.run([sys.executable, str(ROOT / "sample_data" / "generate.py"), str(csv),
                            "--rows", str(SIZES[key])], check=True)
        done = stored(store, cached_version(csv, store), schema) or ingest_csv(csv, store,
                                                                                 schema=schema)
        want = gen.expected_counts(csv, GENERATOR_SEED, SIZES[key])
        EXPECTED[key] = (int(want["rows"]), dict(want["present"]))
        out[key] = done.glob
    if linked:
        farm = DATA_DIR / "parquet_1e8"
        farm.mkdir(exist_ok=True)
        parts = sorted(Path(out["1e7"]).parent.glob("*.parquet"))
        for k in range(10):
            for part in parts:
                link = farm / f"copy{k}-{part.name}"
                if not link.exists():
                    os.link(part, link)
        rows, present = EXPECTED["1e7"]
        EXPECTED["1e8"] = (10 * rows, {n: 10 * v for n, v in present.items()})
        out["1e8"] = str(farm / "*.parquet")
    for key in sizes:
        rows, present = EXPECTED[key]
        got_rows, got = stored_counts(Path(out[key]).parent, list(present))
        CHECKS.append(check_data(f"{key} Parquet ({Path(out[key]).parent.name})", rows,
                                 present, got_rows, got))
    return out


def load_postgres(url: str, key: str, glob: str) -> str:
    """COPY the queried columns of the Parquet data into PostgreSQL; returns the table name."""
    import duckdb
    import psycopg
    from psycopg import sql

    table = f"cohort_{key}"
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(PG_SCHEMA)))
        target = sql.Identifier(PG_SCHEMA, table)
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(target))
        cols = sql.SQL(", ").join(
            sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in zip(
                PG_COLUMNS, ("double precision", "bigint", "text", "bigint", "boolean", "text"),
                strict=True))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(target, cols))
        names = sql.SQL(", ").join(sql.Identifier(c) for c in PG_COLUMNS)
        with tempfile.TemporaryDirectory() as tmp:  # DuckDB writes CSV, COPY streams it in
            csv = Path(tmp) / "rows.csv"
            duckdb.read_parquet(glob).select(
                *[duckdb.ColumnExpression(c) for c in PG_COLUMNS]).write_csv(str(csv),
                                                                             header=False)
            with conn.cursor() as cur, cur.copy(sql.SQL(
                    "COPY {} ({}) FROM STDIN WITH (FORMAT csv)").format(target, names)) as copy, \
                    csv.open("rb") as fh:
                while block := fh.read(1 << 20):
                    copy.write(block)
        conn.execute(sql.SQL("ANALYZE {}").format(target))
        got = conn.execute(sql.SQL("SELECT count(*), {} FROM {}").format(
            sql.SQL(", ").join(sql.SQL("count({})").format(sql.Identifier(c))
                               for c in PG_COLUMNS), target)).fetchone()
    assert got is not None
    rows, present = EXPECTED[key]
    CHECKS.append(check_data(f"{key} PostgreSQL table", rows,
                             {c: present[c] for c in PG_COLUMNS}, int(got[0]),
                             dict(zip(PG_COLUMNS, map(int, got[1:]), strict=True))))
    return table


def drop_postgres(url: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(PG_SCHEMA)))


# ------------------------------------------------------------------------------ timing


def time_views(source, schema, repeats: int) -> dict[str, tuple[float, float]]:
    """(median, min) seconds per view; views interleaved round-robin."""
    rng = np.random.default_rng(0)
    todo = views(schema)
    samples: dict[str, list[float]] = {name: [] for name in todo}
    for _ in range(repeats):
        for name, queries in todo.items():
            t0 = time.perf_counter()
            noise(source.aggregate_many(queries), rng)
            samples[name].append(time.perf_counter() - t0)
    return {n: (statistics.median(s), min(s)) for n, s in samples.items()}


def open_source(backend: str, key: str, glob: str, pg_url: str | None):
    if backend in ("duckdb", "duckdb_pre"):
        from services.data.sources.duckdb_source import DuckDBSource
        pre = DATA_DIR / f"precomputed_{key}" if backend == "duckdb_pre" else None
        return DuckDBSource(glob, precompute_dir=pre)
    if backend == "postgres":
        from services.data.sources.postgres import PostgresSource
        return PostgresSource(pg_url, load_postgres(pg_url, key, glob), schema=PG_SCHEMA)
    from services.data.sources.spark import SparkSource
    return SparkSource(path=glob, master="local[2]",
                       conf={"spark.sql.shuffle.partitions": "2",
                             "spark.driver.memory": "2g"})


def engines(pg_url: str | None) -> str:
    """The versions of the engines timed (DuckDB, PostgreSQL server, pyspark)."""
    from importlib import metadata

    found = [f"DuckDB {metadata.version('duckdb')}"]
    if pg_url:
        import psycopg

        with psycopg.connect(pg_url.replace("postgresql+psycopg", "postgresql")) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        found.append(f"PostgreSQL {row[0] if row else '?'}")
    with contextlib.suppress(metadata.PackageNotFoundError):
        found.append(f"pyspark {metadata.version('pyspark')}")
    return "Engines: " + ", ".join(found) + "."


def load_precomputed(source, schema):
    """The compact tables built from scratch as a load builds them (their ingestion cost)."""
    import shutil

    from services.data.sources.large import precompute_views

    shutil.rmtree(source.precompute_dir, ignore_errors=True)
    source._compact.clear()
    done = precompute_views(source, schema)
    print(f"precomputed at load: {done}", flush=True)
    return done


def first_requests(glob: str, precompute_dir, schema) -> dict[str, float]:
    """Seconds of each view's first request on a fresh source (a worker after the load)."""
    from services.data.sources.duckdb_source import DuckDBSource
    from services.data.sources.large import precompute_views

    rng = np.random.default_rng(1)
    out = {}
    for name, queries in views(schema).items():
        source = DuckDBSource(glob, precompute_dir=precompute_dir)
        precompute_views(source, schema)     # what a worker's load does: finds them built
        t0 = time.perf_counter()
        noise(source.aggregate_many(queries), rng)
        out[name] = time.perf_counter() - t0
        source.close()
    return out


# ------------------------------------------------------------------------------ memory


WORKER_SCRIPT = r"""
import json, resource, sys, psutil
from app import create_app
from services.data.sources.resolve import aggregates_many
from bench.bench_warehouse import views
app = create_app()
reg = app.server.extensions["cohort"].registry
ds = reg.get("cohort")
for queries in views(ds.schema).values():
    aggregates_many(ds, queries)
rss = psutil.Process().memory_info().rss
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
held = len(ds.frame) if getattr(ds.table, "loaded", True) else 0  # never read it here
print(json.dumps({"rss": rss, "peak": peak, "sample_rows": held}))
"""


def warehouse_env(glob: str, tmp: Path) -> dict[str, str]:
    """Environment of an app whose dataset 'cohort' is the Parquet data at ``glob``."""
    wh = tmp / "warehouse.json"
    wh.write_text(json.dumps([{"id": "cohort", "backend": "duckdb", "path": glob,
                               "schema_file": str(SAMPLE_SCHEMA)}]), encoding="utf-8")
    return {**os.environ, "COHORT_WAREHOUSE": str(wh), "COHORT_DATA_DIR": str(tmp / "var"),
            "PYTHONPATH": str(ROOT)}


def worker_memory(glob: str) -> dict[str, float]:
    """RSS of a fresh process that builds the app and answers every view on ``glob``."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-c", WORKER_SCRIPT], capture_output=True,
                              text=True, env=warehouse_env(glob, Path(tmp)), cwd=ROOT,
                              check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def gunicorn_run(glob: str, workers: int = 4, threads: int = 4) -> dict[str, float]:
    """Total RSS of ``gunicorn -w N -k gthread`` after boot and a page load; wire weight."""
    import psutil

    port = 18000 + os.getpid() % 1000
    with tempfile.TemporaryDirectory() as tmp:
        env = warehouse_env(glob, Path(tmp))
        cmd = [sys.executable, "-m", "gunicorn", "-w", str(workers), "-k", "gthread",
               "--threads", str(threads), "-b", f"127.0.0.1:{port}", "--timeout", "600",
               "app:server"]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            t0 = time.time()
            wire = 0
            while time.time() - t0 < 900:
                try:
                    wire = page_weight(base)
                    break
                except OSError:
                    time.sleep(2)
            for _ in range(3 * workers):  # let every worker build its registry
                page_weight(base)
            tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
            total = sum(p.memory_info().rss for p in tree)
            return {"total_rss": total, "processes": len(tree), "wire": wire,
                    "boot_s": time.time() - t0}
        finally:
            proc.terminate()
            proc.wait(timeout=60)


def page_weight(base: str) -> int:
    """Bytes on the wire for the first page: HTML, scripts, styles, layout (gzip accepted)."""
    import re

    def get(path: str) -> bytes:
        req = urllib.request.Request(base + path, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.read()

    html = get("/")
    import gzip as gz

    text = gz.decompress(html).decode() if html[:2] == b"\x1f\x8b" else html.decode()
    urls = re.findall(r'src="(/[^"]+)"', text) + re.findall(r'href="(/[^"]+\.css[^"]*)"', text)
    return len(html) + sum(len(get(u)) for u in [*urls, "/_dash-layout", "/_dash-dependencies"])


# ------------------------------------------------------------------------------ report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e6,1e7,1e8")
    parser.add_argument("--backends", default="duckdb,duckdb_pre,postgres,spark")
    parser.add_argument("--pg-sizes", default="1e6,1e7")
    parser.add_argument("--spark-sizes", default="1e6,1e7,1e8")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-serving", action="store_true", help="skip memory and gunicorn")
    parser.add_argument("--serving", default="4:4,2:8",
                        help="bench_serving configurations at 1e7 ('' to skip)")
    parser.add_argument("--memory-only", action="store_true",
                        help="only worker memory and the gunicorn total")
    parser.add_argument("--link-1e8", action="store_true",
                        help="1e8 = the 1e7 Parquet parts linked ten times (no 1e8 CSV)")
    args = parser.parse_args(argv)
    sizes = args.sizes.split(",")
    allowed = {"duckdb": sizes, "duckdb_pre": sizes, "postgres": args.pg_sizes.split(","),
               "spark": args.spark_sizes.split(",")}
    pg_url = os.environ.get("TEST_DATABASE_URL")
    t_start = time.time()
    CHECKS.clear()
    try:
        globs = prepare(sizes, args.link_1e8)
    except DataCheckFailed as exc:
        print(exc, flush=True)
        return 2
    schema = read_schema_file(SAMPLE_SCHEMA)
    lines = ["# Warehouse scale (issue 14)", "", header_markdown(), "",
             "Command: `python -m bench.bench_warehouse " + " ".join(argv or sys.argv[1:]) + "`",
             "", engines(pg_url), "", "Uncached view latency, median (min) of "
             f"{args.repeats} calls, seconds:", ""]
    results: dict[tuple[str, str], dict] = {}
    build: dict[str, object] = {}
    first: dict[str, dict[str, float]] = {}
    try:
        for backend in [] if args.memory_only else args.backends.split(","):
            for key in sizes:
                if key not in allowed[backend] or (backend == "postgres" and not pg_url):
                    continue
                source = open_source(backend, key, globs[key], pg_url)
                if backend == "duckdb_pre":  # built as a load builds them, then first requests
                    build[key] = load_precomputed(source, schema)
                    source.close()
                    first[key] = first_requests(globs[key], source.precompute_dir, schema)
                    source = open_source(backend, key, globs[key], pg_url)
                reps = 1 if (not backend.startswith("duckdb") and key == "1e8") else args.repeats
                results[(backend, key)] = time_views(source, schema, reps)
                source.close()
                print(backend, key, results[(backend, key)], flush=True)
    except DataCheckFailed as exc:
        print(exc, flush=True)
        return 2
    finally:
        if pg_url and "postgres" in args.backends:
            drop_postgres(pg_url)
    if args.memory_only:
        lines = lines[:-2]  # no latency table
    names = list(views(schema))
    cols = [f"{b} {k}" for (b, k) in results]
    if cols:
        lines.append("| view | " + " | ".join(cols) + " |")
        lines.append("|---|" + "---|" * len(cols))
    for name in names if cols else []:
        cells = [f"{results[c][name][0]:.3f} ({results[c][name][1]:.3f})" for c in results]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if first:
        lines += ["", "duckdb_pre, the first request of each view after a load (a fresh "
                  "source on the tables the load built; one call), seconds:", "",
                  "| view | " + " | ".join(first) + " |", "|---|" + "---|" * len(first)]
        lines += [f"| {name} | " + " | ".join(f"{first[k][name]:.3f}" for k in first) + " |"
                  for name in names]
    for key, target in TARGETS.items():
        for backend in ("duckdb", "duckdb_pre"):
            if (backend, key) in results:
                worst = max(m for m, _ in results[(backend, key)].values())
                if backend == "duckdb_pre" and key in first:
                    worst = max(worst, *first[key].values())
                verdict = "PASS" if worst <= target else "FAIL"
                lines.append(f"\n{backend} {key}: slowest view (median) {worst:.3f} s, target "
                             f"≤ {target} s: **{verdict}**")
    for key, done in build.items():
        lines.append(f"\nduckdb_pre {key}: compact tables built at load in {done.seconds:.1f} s "
                     f"({done.built} column sets built, {done.too_large} too large; "
                     "every view column alone and with every grouping column).")
    lines += ["", *CHECKS]
    if args.no_serving and not args.memory_only:
        return _finish(lines, t_start, args.out)
    lines += ["", "Resident memory of one web worker (app built, every view answered):", "",
              "| rows | RSS (MB) | peak (MB) | sample rows held (anonymizer, studio, Data page) |",
              "|---|---|---|---|"]
    mem = {}
    for key in sizes:
        mem[key] = worker_memory(globs[key])
        lines.append(f"| {key} | {mem[key]['rss'] / 1e6:.0f} | {mem[key]['peak'] / 1e6:.0f} | "
                     f"{mem[key]['sample_rows']:,} |")
    big = sizes[-1]
    verdict = "PASS" if mem[big]["peak"] <= 500e6 else "FAIL"
    lines.append(f"\nWorker peak at {big}: {mem[big]['peak'] / 1e6:.0f} MB, target ≤ 500 MB: "
                 f"**{verdict}**")
    g = gunicorn_run(globs[big])
    verdict = "PASS" if g["total_rss"] <= 4e9 else "FAIL"
    lines += ["", f"`gunicorn -w 4 -k gthread --threads 4 app:server` at {big}: "
              f"{g['processes']} processes, {g['total_rss'] / 1e6:.0f} MB resident in all "
              f"(target ≤ 4000 MB): **{verdict}**; booted and served in {g['boot_s']:.0f} s.",
              f"First page on the wire (gzip): {g['wire'] / 1e3:.0f} kB (target ≤ 1000 kB): "
              f"**{'PASS' if g['wire'] <= 1e6 else 'FAIL'}**.",
              ]
    if "1e7" in globs and args.serving and not args.memory_only:
        from bench import bench_serving

        lines += ["", bench_serving.run(globs["1e7"], args.serving.split(","),
                                        command="python -m bench.bench_warehouse (serving part)")]
    return _finish(lines, t_start, args.out)


def _finish(lines: list[str], t_start: float, out: Path | None) -> int:
    lines += ["", f"Run time {time.time() - t_start:.0f} s."]
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
