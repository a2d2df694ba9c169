"""Loading benchmark (issue 3): ``services.data.registry.load_csv`` vs a bare ``pandas.read_csv``.

A large cohort CSV is generated into ``bench/data/`` (gitignored) by resampling the rows of the
committed 920-row sample cohort with a fixed seed (with fresh sequential ``Anonym_ID`` values), so
every column keeps its real formats, missing values and odd entries (e.g. ``>3`` lesions).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import (
    NA,
    ROOT,
    BenchConfig,
    DataCheckFailed,
    Table,
    check_data,
    fmt_n,
    fmt_ratios,
    fmt_timing,
    time_side_by_side,
    verdict,
)

SAMPLE_CSV = ROOT / "sample_data" / "pirads_cohort.csv"
SAMPLE_SCHEMA = ROOT / "sample_data" / "pirads_cohort.schema.json"
LOAD_RATIO_MAX = 1.5
SEED = 7


def cohort_csv(rows: int, directory: Path) -> Path:
    """Path of a ``rows``-row cohort CSV resampled from the sample; written if missing or stale,
    and checked (``check_cohort``) before any benchmark times it.

    The sample's schema is copied beside it (``<stem>.schema.json``), which is where the app
    looks for the public metadata of a configured CSV file.
    """
    path = _cohort_file(rows, directory)
    check_cohort(path, rows)
    return path


def expected_present(rows: int) -> dict[str, int]:
    """Values present per column the resampling wrote: the sample's values (parsed as the
    app parses them) counted at the seeded picks; every fresh ``Anonym_ID`` is present."""
    from services.data.registry import load_csv

    frame, _, _ = load_csv(SAMPLE_CSV.read_bytes(), filename=SAMPLE_CSV.name,
                           schema=load_schema(), max_bytes=1 << 30)
    picks = np.random.default_rng(SEED).integers(0, len(frame), rows)
    present = {str(c): int(frame[c].notna().to_numpy()[picks].sum()) for c in frame.columns}
    if "Anonym_ID" in present:
        present["Anonym_ID"] = rows
    return present


def check_cohort(path: Path, rows: int) -> str:
    """Rows and values present per column of ``path`` loaded as the app loads it, against
    the resampling's (DataCheckFailed: nothing may be timed on it)."""
    from services.data.registry import load_csv

    frame, _, _ = load_csv(path.read_bytes(), filename=path.name, schema=load_schema(),
                           max_bytes=1 << 40)
    got = {str(c): int(n) for c, n in frame.notna().sum().items()}
    return check_data(f"{path.name} (load_csv)", rows, expected_present(rows), len(frame), got)


def _cohort_file(rows: int, directory: Path) -> Path:
    path = directory / f"pirads_cohort_{rows}.csv"
    sidecar = path.with_name(f"{path.stem}.schema.json")
    directory.mkdir(parents=True, exist_ok=True)
    schema = json.loads(SAMPLE_SCHEMA.read_text())
    schema["title"] = f"PI-RADS cohort resampled to {rows:,} rows (benchmark)"
    sidecar.write_text(json.dumps(schema, indent=2))
    if path.exists() and path.stat().st_mtime >= SAMPLE_CSV.stat().st_mtime:
        return path
    sample = pd.read_csv(SAMPLE_CSV, dtype=str, keep_default_na=False)
    picks = np.random.default_rng(SEED).integers(0, len(sample), rows)
    cohort = sample.iloc[picks].reset_index(drop=True)
    if "Anonym_ID" in cohort.columns:
        cohort["Anonym_ID"] = [str(100_000 + i) for i in range(rows)]
    tmp = path.with_suffix(".tmp")
    cohort.to_csv(tmp, index=False)
    tmp.replace(path)
    return path


def load_schema():
    """The sample cohort's schema (public metadata), read as the app reads it."""
    from services.data.schema_files import read_schema_file

    return read_schema_file(SAMPLE_SCHEMA)


def _load_csv():
    try:
        datasets = importlib.import_module("services.data.registry")
    except ImportError:
        return None
    return getattr(datasets, "load_csv", None)


def run(config: BenchConfig) -> list[Table]:
    """Time ``load_csv`` (bytes read from disk included) against ``pandas.read_csv(path)``."""
    table = Table(
        "Loading a cohort CSV",
        ["rows", "file size", "pandas.read_csv(path)", "services.data.registry.load_csv",
         "load_csv / read_csv", f"target ≤ {LOAD_RATIO_MAX}× (large file)"],
    )
    table.notes.append(
        "load_csv is timed from the file's bytes (`path.read_bytes()` included) with the "
        "sample schema; read_csv is the bare pandas call with default options. The large "
        "file resamples the 920 sample rows with a fixed seed and fresh IDs."
    )
    load_csv = _load_csv()
    if not SAMPLE_CSV.exists():
        table.add(NA, NA, NA, "sample_data/pirads_cohort.csv missing", NA, NA)
        return [table]
    schema = load_schema() if load_csv is not None else None
    for rows in (None, config.big_n):
        try:
            path = SAMPLE_CSV if rows is None else cohort_csv(rows, config.data_dir)
        except DataCheckFailed as exc:   # never timed on data that lost values
            table.add(fmt_n(rows or 0), NA, NA, str(exc), NA, verdict(False))
            continue
        size = path.stat().st_size
        fns = {"pandas": lambda path=path: pd.read_csv(path)}
        if load_csv is not None:
            fns["load_csv"] = lambda path=path, size=size: load_csv(
                path.read_bytes(), filename=path.name, schema=schema, max_bytes=2 * size
            )
        timings = time_side_by_side(fns, repeats=config.repeats, budget_s=5 * config.budget_s)
        own = timings.get("load_csv")
        ratio = own.median / timings["pandas"].median if own else None
        is_target = rows is not None
        table.add(
            fmt_n(rows) if rows else "920 (sample)",
            f"{size / 2**20:.1f} MiB",
            fmt_timing(timings["pandas"]),
            fmt_timing(own) if own else "services.data.registry.load_csv not in the tree yet",
            fmt_ratios(own, timings["pandas"]),
            verdict(None if ratio is None or not is_target else ratio <= LOAD_RATIO_MAX),
        )
    return [table]
