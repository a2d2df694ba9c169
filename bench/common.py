"""Shared benchmark plumbing: machine header, interleaved timing, peak memory, markdown tables.

Timings are wall-clock medians (and minimums) of several calls. Implementations compared in one
table are timed round-robin (A, B, C, A, B, C, ...) so that load from other processes on a
shared machine hits all of them alike. Peak extra memory is measured separately with
``tracemalloc`` (numpy reports its array buffers to it), never inside a timed call.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
DATA_DIR = BENCH_DIR / "data"

PACKAGES = ("numpy", "pandas", "scipy", "opendp", "diffprivlib", "dash", "scikit-learn")
BLAS_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")

PASS, FAIL, NA = "PASS", "FAIL", "n/a"


@dataclass(frozen=True)
class BenchConfig:
    """Sizes and effort of one run; ``quick`` and the smoke test shrink them."""

    sizes: tuple[int, ...] = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
    stat_n: int = 1_000_000  # n for the sound statistics and their peers
    big_n: int = 1_000_000  # rows of the generated cohort (loading, callbacks)
    repeats: int = 7
    budget_s: float = 3.0  # time budget per implementation and size (at least one call)
    peer_limit_s: float = 60.0  # skip a peer whose estimated single call exceeds this
    peer_max_n: int = 10_000_000  # peers are never run above this n
    browser: bool = True  # first page load in headless Chromium
    data_dir: Path = DATA_DIR  # generated cohorts (gitignored)


QUICK = BenchConfig(
    sizes=(1_000, 10_000, 100_000),
    stat_n=100_000,
    big_n=100_000,
    repeats=3,
    budget_s=1.0,
    peer_limit_s=10.0,
    peer_max_n=100_000,
)


# ----------------------------------------------------------------------------- data checks


class DataCheckFailed(RuntimeError):
    """Prepared data differs from what its generator wrote: nothing may be timed on it."""


def check_data(label: str, want_rows: int, want_present: Mapping[str, int], got_rows: int,
               got_present: Mapping[str, int]) -> str:
    """The line a benchmark prints before timing: rows and values present per column of the
    prepared data equal the generator's, or DataCheckFailed naming every difference (a
    benchmark on data that lost values measures less work than it claims: issue 20)."""
    wrong = [f"'{name}' {int(got_present.get(name, -1)):,} of {int(n):,} values"
             for name, n in want_present.items() if int(got_present.get(name, -1)) != int(n)]
    if got_rows != want_rows:
        wrong.insert(0, f"{got_rows:,} of {want_rows:,} rows")
    if wrong:
        raise DataCheckFailed(f"data check {label}: FAILED, not timed: " + "; ".join(wrong))
    line = (f"data check {label}: {got_rows:,} rows and the values present in each of "
            f"{len(want_present)} columns equal the generator's: OK")
    print(line, flush=True)
    return line


# ----------------------------------------------------------------------------- machine header


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> str:
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        return f"{pages * size / 2**30:.1f} GiB"
    except (ValueError, OSError, AttributeError):
        return "unknown"


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return f"{line.split('=', 1)[1].strip(chr(34))} ({platform.platform()})"
    except OSError:
        pass
    return platform.platform()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info() -> dict[str, str]:
    """CPU, cores, RAM, OS, Python, library versions and BLAS environment of this run."""
    info = {
        "CPU": _cpu_model(),
        "cores (os.cpu_count)": str(os.cpu_count()),
        "RAM": _ram_gib(),
        "OS": _os_name(),
        "Python": sys.version.split()[0],
    }
    info.update({package: _version(package) for package in PACKAGES})
    for name in BLAS_ENV:
        info[name] = os.environ.get(name, "not set")
    info["load average (1, 5, 15 min) when written"] = load_average()
    return info


def load_average() -> str:
    """The OS load average: other processes on a shared machine slow every figure."""
    try:
        return ", ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def header_markdown() -> str:
    """The machine and versions as a two-column markdown table."""
    lines = ["| item | value |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in machine_info().items()]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class Timing:
    """Median and minimum wall-clock seconds over ``repeats`` calls."""

    median: float
    min: float
    repeats: int


def _summarize(samples: list[float]) -> Timing:
    return Timing(median=statistics.median(samples), min=min(samples), repeats=len(samples))


def _once(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_side_by_side(
    fns: Mapping[str, Callable[[], object]], *, repeats: int, budget_s: float
) -> dict[str, Timing]:
    """Time several implementations round-robin; a first (warm-up) call of each is discarded.

    Every implementation gets at least one measured call and at most ``repeats``; rounds stop
    once the slowest implementation has used ``budget_s``. A warm-up call longer than half the
    budget is kept as the only sample rather than paying for it twice.
    """
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    keep_warmup = {}
    for name, fn in fns.items():
        first = _once(fn)
        keep_warmup[name] = first > budget_s / 2
        if keep_warmup[name]:
            samples[name].append(first)
    spent = dict.fromkeys(fns, 0.0)
    for _ in range(repeats):
        active = [name for name in fns if not keep_warmup[name]]
        if not active:
            break
        for name in active:
            elapsed = _once(fns[name])
            samples[name].append(elapsed)
            spent[name] += elapsed
        if max(spent[name] for name in active) >= budget_s:
            break
    return {name: _summarize(values) for name, values in samples.items()}


def time_call(fn: Callable[[], object], *, repeats: int, budget_s: float) -> Timing:
    """Time one implementation (see :func:`time_side_by_side`)."""
    return time_side_by_side({"fn": fn}, repeats=repeats, budget_s=budget_s)["fn"]


def peak_extra_bytes(fn: Callable[[], object]) -> int:
    """Peak memory allocated during ``fn()`` above what was live before it (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = fn()
        _, peak = tracemalloc.get_traced_memory()
        del result
    finally:
        tracemalloc.stop()
    return max(0, peak - before)


# ----------------------------------------------------------------------------- formatting


def fmt_seconds(seconds: float | None) -> str:
    """Human-readable duration: µs / ms / s with three significant figures."""
    if seconds is None:
        return NA
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def fmt_timing(timing: Timing | None) -> str:
    """Median with the minimum and repeat count, e.g. ``1.2 ms (min 1.1 ms, ×7)``."""
    if timing is None:
        return NA
    return f"{fmt_seconds(timing.median)} (min {fmt_seconds(timing.min)}, ×{timing.repeats})"


def fmt_ratio(ratio: float | None) -> str:
    """A ratio with three significant figures and a times sign."""
    if ratio is None:
        return NA
    return f"{ratio:.3g}×"


def timing_ratio(numerator: Timing | None, denominator: Timing | None) -> float | None:
    """Ratio of the medians (the figure judged against a target), or None if unmeasured."""
    if numerator is None or denominator is None or denominator.median <= 0:
        return None
    return numerator.median / denominator.median


def fmt_ratios(numerator: Timing | None, denominator: Timing | None) -> str:
    """Median ratio, with the min-to-min ratio beside it (less sensitive to machine load)."""
    ratio = timing_ratio(numerator, denominator)
    if ratio is None or numerator is None or denominator is None or denominator.min <= 0:
        return fmt_ratio(ratio)
    return f"{fmt_ratio(ratio)} (min/min {fmt_ratio(numerator.min / denominator.min)})"


def verdict(ok: bool | None) -> str:
    """PASS / FAIL, or n/a when the figure could not be measured."""
    if ok is None:
        return NA
    return PASS if ok else FAIL


def fmt_n(n: int) -> str:
    """1e3 style for powers of ten, otherwise the plain integer."""
    exponent = len(str(n)) - 1
    return f"1e{exponent}" if n == 10**exponent else f"{n:,}"


@dataclass
class Table:
    """A titled markdown table; rows are lists of cells, one per column."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    key_columns: int = 1  # leading cells that name a row (e.g. cohort and view)

    def add(self, *cells: object) -> None:
        """Append one row; the number of cells must match the columns."""
        if len(cells) != len(self.columns):
            raise ValueError(f"{self.title}: {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([str(cell) for cell in cells])

    def failures(self) -> list[str]:
        """One line per FAIL cell: the row's name, the measured figure beside it, the target.

        A verdict column follows the column holding the figure it judges.
        """
        found = []
        for row in self.rows:
            name = " / ".join(row[: self.key_columns])
            for j, cell in enumerate(row):
                if cell == FAIL and j > 0:
                    found.append(f"{self.title} — {name}: {self.columns[j - 1]} = {row[j - 1]} "
                                 f"({self.columns[j].strip()})")
        return found

    def markdown(self) -> str:
        """The table as GitHub markdown, notes as a bullet list under it."""
        lines = [f"### {self.title}", ""]
        lines.append("| " + " | ".join(self.columns) + " |")
        lines.append("|" + "---|" * len(self.columns))
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.notes:
            lines.append("")
            lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- peers


def import_opendp():
    """``opendp.prelude`` with the contrib features enabled, or None if not installed."""
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    return dp


def import_diffprivlib():
    """``diffprivlib``, or None if not installed.

    diffprivlib 0.6.6 imports ``DOUBLE`` and ``DTYPE`` from ``sklearn.tree._tree`` at package
    import time (for its random forest); scikit-learn ≥ 1.7 no longer exports them. The
    mechanisms and tools used here never touch them, so the two names are restored with
    their historical values (float64, float32) before importing.
    """
    try:
        import numpy as np
        import sklearn.tree._tree as sk_tree

        if not hasattr(sk_tree, "DOUBLE"):
            sk_tree.DOUBLE = np.float64
        if not hasattr(sk_tree, "DTYPE"):
            sk_tree.DTYPE = np.float32
    except ImportError:
        pass
    try:
        import diffprivlib
    except ImportError:
        return None
    return diffprivlib


def estimated_too_slow(
    per_item_s: float | None, n: int, config: BenchConfig
) -> str | None:
    """Why a peer is skipped at ``n`` (from its per-item time at a smaller n), or None."""
    if n > config.peer_max_n:
        return f"skipped (n > {fmt_n(config.peer_max_n)})"
    if per_item_s is not None and per_item_s * n > config.peer_limit_s:
        estimate = per_item_s * n
        return f"skipped (est. {estimate:.0f} s > {config.peer_limit_s:.0f} s)"
    return None
