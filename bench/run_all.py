"""Run every benchmark in one process and rewrite ``bench/RESULTS.md``.

Usage: ``python -m bench.run_all [--quick] [--only engine,loading,callbacks] [--output PATH]``.
``--quick`` shrinks the sizes (for a fast look; the header says so). The anonymization page's
own results (``bench/RESULTS_anonymize.md``, written by ``bench/bench_anonymize.py``) and the
accuracy results of issue 10 (``bench/RESULTS_accuracy.md``, ``bench/bench_accuracy.py``) are
included verbatim when present.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench import bench_callbacks, bench_engine, bench_loading
from bench.common import BENCH_DIR, QUICK, BenchConfig, Table, header_markdown, load_average

SUITES: dict[str, tuple[str, Callable[[BenchConfig], list[Table]]]] = {
    "engine": ("Engine: dp_engine vs numpy, OpenDP and diffprivlib (issue 2)", bench_engine.run),
    "loading": ("Loading CSV files (issue 3)", bench_loading.run),
    "callbacks": ("Explore page latency (issue 4)", bench_callbacks.run),
}
ANONYMIZE_RESULTS = BENCH_DIR / "RESULTS_anonymize.md"
SECURITY_RESULTS = BENCH_DIR / "RESULTS_security.md"  # python -m bench.bench_security
WAREHOUSE_RESULTS = BENCH_DIR / "RESULTS_warehouse.md"  # bench/bench_warehouse.py (long run)
DOOR_RESULTS = bench_callbacks.DOOR_RESULTS  # `python -m bench.bench_callbacks --base REV`
ACCURACY_RESULTS = BENCH_DIR / "RESULTS_accuracy.md"   # python -m bench.bench_accuracy


def _run_suite(name: str, config: BenchConfig) -> tuple[list[Table], str | None]:
    """Tables of one suite, or the error that stopped it (reported, not hidden)."""
    title, run = SUITES[name]
    print(f"[bench] {title} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        tables = run(config)
    except Exception:  # noqa: BLE001 - a crashed suite is reported in RESULTS.md
        return [], traceback.format_exc(limit=5)
    print(f"[bench] {name} done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return tables, None


def render(
    results: dict[str, tuple[list[Table], str | None]],
    *,
    quick: bool,
    seconds: float,
    load_at_start: str = "unknown",
) -> str:
    """The whole RESULTS.md text."""
    command = "python -m bench.run_all" + (" --quick" if quick else "")
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "# Benchmark results",
        "",
        f"Produced by `{command}` (`make bench`) on {stamp}; the whole run took "
        f"{seconds / 60:.1f} min. Every figure below was measured in this one run, "
        "implementations side by side (round-robin). Times are the median over the repeats "
        "(×k), with the minimum; the first call of each implementation is a discarded warm-up "
        "unless it alone exceeded half the time budget. Verdicts use the ratio of medians; "
        "the min-to-min ratio is shown beside it. Targets are the issues' and are not "
        f"tuned. The machine is shared: OS load average (1, 5, 15 min) {load_at_start} at the "
        "start of the run (and at the end in the table below).",
        "",
    ]
    if quick:
        parts += ["**Quick run: reduced sizes; not the reference figures.**", ""]
    parts += ["## Machine and versions", "", header_markdown(), ""]
    failures = [line for tables, _ in results.values() for t in tables for line in t.failures()]
    errors = [name for name, (_, error) in results.items() if error]
    parts += ["## Summary", ""]
    if failures or errors:
        parts += [f"- FAIL — {line}" for line in failures]
        parts += [f"- ERROR — the {name} suite crashed (traceback below)" for name in errors]
    else:
        parts.append("- Every measured figure meets its target (n/a cells were not measured).")
    parts.append("")
    for name, (tables, error) in results.items():
        parts += [f"## {SUITES[name][0]}", ""]
        parts += [table.markdown() for table in tables]
        if error:
            parts += ["```", error.rstrip(), "```", ""]
    if DOOR_RESULTS.exists():
        parts += [DOOR_RESULTS.read_text().rstrip(), ""]
    if ANONYMIZE_RESULTS.exists():
        parts += ["## Anonymization page (bench/RESULTS_anonymize.md)", ""]
        parts += [_demote_headings(ANONYMIZE_RESULTS.read_text()), ""]
    if SECURITY_RESULTS.exists():
        parts += ["## Security refusals (bench/RESULTS_security.md)", ""]
        parts += [_demote_headings(SECURITY_RESULTS.read_text()), ""]
    if WAREHOUSE_RESULTS.exists():
        parts += ["## Warehouse scale (bench/RESULTS_warehouse.md)", ""]
        parts += [_demote_headings(WAREHOUSE_RESULTS.read_text()), ""]
    if ACCURACY_RESULTS.exists():
        parts += ["## Accuracy of the sound views (issue 10, bench/RESULTS_accuracy.md)", ""]
        parts += [_demote_headings(ACCURACY_RESULTS.read_text()), ""]
    return "\n".join(parts).rstrip() + "\n"


def _demote_headings(text: str) -> str:
    """Nest an included markdown file's headings under this file's section."""
    return "\n".join("##" + line if line.startswith("#") else line for line in text.splitlines())


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the suites, write the results; exit 1 if a suite crashed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--only", default=",".join(SUITES), help="comma-separated suites")
    parser.add_argument("--output", type=Path, default=BENCH_DIR / "RESULTS.md")
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SUITES))
    if unknown:
        parser.error(f"unknown suite(s) {unknown}; choose from {sorted(SUITES)}")
    config = QUICK if args.quick else BenchConfig()
    start, load_at_start = time.perf_counter(), load_average()
    results = {name: _run_suite(name, config) for name in names}
    text = render(results, quick=args.quick, seconds=time.perf_counter() - start,
                  load_at_start=load_at_start)
    args.output.write_text(text)
    print(f"[bench] wrote {args.output}", file=sys.stderr)
    return 1 if any(error for _, error in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
