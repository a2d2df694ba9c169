"""Generate the synthetic PI-RADS cohort (920 prostate MRI reports, every attribute of Table 2).

No real patient is behind any row: every value is drawn from a seeded generator so the file
is rebuilt byte for byte (`python sample_data/generate.py [out.csv] [--rows N] [--seed S]`;
any n is written in blocks, so 1e8 rows need no more memory than 1e6). The distributions are
chosen so the PyDPLib figures look alike: ages mostly 50-80, high PI-RADS scores most frequent
in the 60s-70s, Gleason rising with PI-RADS, BPH rising with age, some missing values and a few
rare categories. Booleans and missing values are written in the mixed styles of a real export.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path

import numpy as np

SEED = 20171
N_ROWS = 920
OUT = Path(__file__).resolve().parent / "pirads_cohort.csv"

COLUMNS = (
    "Anonym_ID",
    "RequestRadiologyDepartmentCode",
    "ProcedureValidatingPhysicianName",
    "LastModified",
    "Age",
    "Year",
    "Gleason score",
    "PCA_no_PIRADS_defined",
    "Follow up",
    "PIRADS score",
    "Number_of_Lesions",
    "Prostatitis",
    "BPH",
    "Primary_TU_LocalRecurrence_or_Progress",
    "Therapy",
    "TURP surgery",
)

DEPARTMENTS = ("UROL", "RADI", "ONKO", "AMBU", "EXTN", "NUKL")
DEPARTMENT_P = (0.46, 0.24, 0.14, 0.12, 0.03, 0.01)
# Invented names; any resemblance to a real physician is accidental.
PHYSICIANS = (
    "Dr. Henrike Falkenrath", "Dr. Tobias Wendelin", "Dr. Mirela Castellanu",
    "Prof. Jorund Aaberg", "Dr. Oskar Pfeiffling", "Dr. Lena Brandvoll",
    "Dr. Kasimir Oderwald", "PD Dr. Sabine Turnhout",
)
PHYSICIAN_P = (0.2, 0.18, 0.16, 0.14, 0.12, 0.1, 0.07, 0.03)
PROSTATITIS = ("n", "chr", "y", "acute", "acute on chronic")
PROSTATITIS_P = (0.72, 0.13, 0.09, 0.04, 0.02)
FOLLOW_UP = ("none", "PSA control", "MRI in 12 months", "MRI in 6 months", "biopsy",
             "urology referral")
PRIMARY = ("primary", "local recurrence", "progress", "unclear")
PRIMARY_P = (0.88, 0.065, 0.045, 0.01)
TURP = ("no", "yes", "planned")


def _missing(rng: np.random.Generator, n: int, p: float) -> np.ndarray:
    return rng.random(n) < p


def _pick(rng: np.random.Generator, options: tuple[str, ...], p, n: int) -> np.ndarray:
    return np.asarray(options, dtype=object)[rng.choice(len(options), size=n, p=p)]


def _ages(rng: np.random.Generator, n: int) -> np.ndarray:
    """Mostly 50-80 (mean 66), a thin tail of younger and older men, one decimal."""
    core = rng.normal(66.0, 7.5, n)
    tail = rng.uniform(38.0, 92.0, n)
    age = np.where(rng.random(n) < 0.06, tail, core)
    return np.round(np.clip(age, 38.0, 94.0), 1)


def _pirads(rng: np.random.Generator, age: np.ndarray) -> np.ndarray:
    """Ordinal model: the latent suspicion peaks for men in their late 60s and early 70s."""
    bump = 0.9 * np.exp(-(((age - 69.0) / 9.0) ** 2))
    latent = bump + rng.logistic(0.0, 0.75, age.size)
    cuts = np.array([-1.3, -0.05, 0.55, 1.35])
    return 1 + np.searchsorted(cuts, latent)


def _gleason(rng: np.random.Generator, pirads: np.ndarray) -> np.ndarray:
    """Gleason sum (6-10) for biopsied men only; biopsy and grade both rise with PI-RADS."""
    p_biopsy = np.array([0.0, 0.04, 0.1, 0.35, 0.72, 0.88])[pirads]
    biopsied = rng.random(pirads.size) < p_biopsy
    grade = 6 + np.floor(np.clip(rng.normal(0.5 * (pirads - 2.0), 1.0), 0, 4.99)).astype(int)
    return np.where(biopsied, grade, 0)


def _lesions(rng: np.random.Generator, pirads: np.ndarray) -> np.ndarray:
    count = np.where(pirads <= 1, 0, 1 + rng.poisson(0.25 * (pirads - 1)))
    return np.minimum(count, 7)


def _therapy(rng: np.random.Generator, gleason: np.ndarray, age: np.ndarray) -> np.ndarray:
    n = gleason.size
    out = np.full(n, "none", dtype=object)
    low = gleason == 6
    out[low] = _pick(rng, ("active surveillance", "radical prostatectomy", "focal therapy"),
                     (0.7, 0.25, 0.05), int(low.sum()))
    high = gleason >= 7
    older = age[high] >= 72
    choices = ("radical prostatectomy", "radiotherapy", "androgen deprivation", "chemotherapy")
    young_pick = _pick(rng, choices, (0.55, 0.3, 0.14, 0.01), int(high.sum()))
    old_pick = _pick(rng, choices, (0.2, 0.45, 0.32, 0.03), int(high.sum()))
    out[high] = np.where(older, old_pick, young_pick)
    return out


def _follow_up(rng: np.random.Generator, pirads: np.ndarray, gleason: np.ndarray) -> np.ndarray:
    n = pirads.size
    p = np.select(
        [pirads <= 2, pirads == 3],
        [0, 1],
        2,
    )
    table = np.array([
        (0.52, 0.3, 0.14, 0.03, 0.005, 0.005),
        (0.1, 0.2, 0.25, 0.3, 0.14, 0.01),
        (0.04, 0.05, 0.06, 0.15, 0.68, 0.02),
    ])
    u = rng.random(n)[:, None]
    idx = (u > np.cumsum(table[p], axis=1)).sum(axis=1)
    idx = np.minimum(idx, len(FOLLOW_UP) - 1)
    out = np.asarray(FOLLOW_UP, dtype=object)[idx]
    out[(gleason > 0) & (out == "none")] = "PSA control"
    return out


CHUNK_ROWS = 1_000_000  # rows generated and written at a time (memory stays flat in n)
ID_POOL = 900_000  # six-digit pseudonyms: enough for one chunk drawn without replacement
START, END = np.datetime64("2017-01-02"), np.datetime64("2018-12-31")


def _chunk(rng: np.random.Generator, n: int, ids: np.ndarray | None) -> list[np.ndarray]:
    """The columns of ``n`` reports as arrays of CSV cells (str), sorted by examination date.

    ``ids`` None: six-digit pseudonyms drawn without replacement (the sample's scheme).
    Every draw happens in the same order as in the first, row-by-row version of this script,
    so the 920-row sample is unchanged byte for byte.
    """
    exam_day = np.sort(rng.integers(0, 728, n))
    age = _ages(rng, n)
    pirads = _pirads(rng, age)
    no_pirads = rng.random(n) < 0.035
    gleason = _gleason(rng, pirads)
    lesions = _lesions(rng, pirads)
    p_bph = 1.0 / (1.0 + np.exp(-(age - 66.0) / 6.0))
    bph = rng.random(n) < p_bph
    prior_turp = bph & (rng.random(n) < 0.22)
    planned_turp = bph & ~prior_turp & (rng.random(n) < 0.06)
    if ids is None:
        ids = rng.choice(np.arange(100_000, 100_000 + ID_POOL), size=n, replace=False)
    dept = _pick(rng, DEPARTMENTS, DEPARTMENT_P, n)
    physician = _pick(rng, PHYSICIANS, PHYSICIAN_P, n)
    prostatitis = _pick(rng, PROSTATITIS, PROSTATITIS_P, n)
    primary = _pick(rng, PRIMARY, PRIMARY_P, n)
    therapy = _therapy(rng, gleason, age)
    follow = _follow_up(rng, pirads, gleason)
    modified_lag = rng.integers(0, 45, n)
    lesion_as_text = rng.random(n) < 0.5
    # realistic gaps, drawn in a fixed order
    miss = {name: _missing(rng, n, p) for name, p in (
        ("Age", 0.012), ("PIRADS score", 0.015), ("Number_of_Lesions", 0.025),
        ("Prostatitis", 0.06), ("BPH", 0.03), ("Follow up", 0.05),
        ("Primary", 0.045), ("Therapy", 0.02), ("TURP", 0.08), ("Department", 0.01),
    )}
    follow_na_style = rng.random(n) < 0.4

    last = int((END - START).astype(int))
    exam_day_mod = np.minimum(exam_day + modified_lag, last)
    age_text = _TENTHS[np.rint(age * 10).astype(np.int64)]  # one decimal, as f"{age:.1f}"
    no_pi = no_pirads | miss["PIRADS score"]
    no_les = no_pirads | miss["Number_of_Lesions"]
    turp = np.where(prior_turp, "yes", np.where(planned_turp, "planned", "no")).astype(object)
    follow_cell = np.where(miss["Follow up"], np.where(follow_na_style, "n/a", ""), follow)
    return [
        np.asarray(list(map(str, ids.tolist())), dtype=object),
        _blank(dept, miss["Department"]),
        physician,
        _DAYS[exam_day_mod],
        _blank(age_text, miss["Age"]),
        _YEARS[exam_day],
        _blank(_text(gleason), gleason == 0),
        np.where(no_pirads, "True", "False").astype(object),
        follow_cell.astype(object),
        _blank(_text(pirads), no_pi),
        np.where(no_les, "", np.where((lesions > 3) & lesion_as_text, ">3",
                                      _text(lesions))).astype(object),
        _blank(prostatitis, miss["Prostatitis"]),
        _blank(np.where(bph, "yes", "no").astype(object), miss["BPH"]),
        np.where(miss["Primary"], "NA", primary).astype(object),
        _blank(therapy, miss["Therapy"]),
        _blank(turp, miss["TURP"]),
    ]


def _text(values: np.ndarray) -> np.ndarray:
    """Small whole numbers (0-99) as decimal text, by table look-up (object array of str)."""
    return _SMALL[np.asarray(values, dtype=np.int64)]


# Look-up tables: formatting millions of cells one by one would dominate the run time.
_SMALL = np.asarray([str(i) for i in range(100)], dtype=object)
_TENTHS = np.asarray([f"{i // 10}.{i % 10}" for i in range(1000)], dtype=object)
_DAYS = np.asarray([str(START + np.timedelta64(d, "D")) for d in range(int((END - START)
                    .astype(int)) + 1)], dtype=object)
_YEARS = np.asarray([d[:4] for d in _DAYS], dtype=object)


def _blank(cells: np.ndarray, missing: np.ndarray) -> np.ndarray:
    return np.where(missing, "", cells).astype(object)


def chunks(seed: int = SEED, n: int = N_ROWS):
    """The cohort in blocks of at most CHUNK_ROWS rows, each a list of column arrays.

    Up to CHUNK_ROWS rows: one block from ``default_rng(seed)`` (the sample's stream). Beyond:
    block i draws from ``default_rng([seed, i])`` and uses sequential pseudonyms shuffled
    within the block (10 000 000 + row number), so any n is unique, deterministic per seed and
    written without holding more than one block; rows are sorted by date within each block.
    """
    if n < 0:
        raise ValueError("The number of rows must be zero or more.")
    if n <= CHUNK_ROWS:
        if n > ID_POOL:
            rng = np.random.default_rng(seed)
            yield _chunk(rng, n, 10_000_000 + rng.permutation(n))
        else:
            yield _chunk(np.random.default_rng(seed), n, None)
        return
    for i, start in enumerate(range(0, n, CHUNK_ROWS)):
        size = min(CHUNK_ROWS, n - start)
        rng = np.random.default_rng([seed, i])
        yield _chunk(rng, size, 10_000_000 + start + rng.permutation(size))


def generate(seed: int = SEED, n: int = N_ROWS) -> list[list[str]]:
    """The cohort as rows of CSV cells (strings); for large n prefer ``write_csv``."""
    return [list(row) for block in chunks(seed, n) for row in zip(*block, strict=True)]


def to_csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


MISSING_CELLS = ("", "n/a", "NA")
"""The cells this generator writes for a missing value (every other cell holds one)."""


def present_counts(block: list[np.ndarray]) -> dict[str, int]:
    """Values present per column of one block: the cells that are not a missing marker."""
    return {name: int(col.size - sum(np.count_nonzero(col == m) for m in MISSING_CELLS))
            for name, col in zip(COLUMNS, block, strict=True)}


def counts_path(out: Path) -> Path:
    """Where ``write_csv`` records what it wrote: ``<file>.counts.json`` beside the CSV."""
    return Path(out).with_name(f"{Path(out).name}.counts.json")


def expected_counts(out: Path, seed: int = SEED, n: int = N_ROWS) -> dict:
    """What the generator wrote to ``out``: {"rows", "present" per column}; read from the
    record ``write_csv`` keeps, or counted again from the seeded blocks when it is absent."""
    try:
        got = json.loads(counts_path(out).read_text(encoding="utf-8"))
        if got.get("seed") == seed and got.get("rows") == n:
            return got
    except (OSError, ValueError):
        pass
    present = dict.fromkeys(COLUMNS, 0)
    for block in chunks(seed, n):
        for name, k in present_counts(block).items():
            present[name] += k
    got = {"seed": seed, "rows": n, "present": present}
    if Path(out).exists():   # counted once: kept beside the file as write_csv keeps it
        counts_path(out).write_text(json.dumps(got), encoding="utf-8")
    return got


def write_csv(out: Path, seed: int = SEED, n: int = N_ROWS) -> int:
    """Stream the cohort to ``out`` block by block (atomic: written beside it, then renamed),
    and record beside it the rows and values present per column it wrote (``counts_path``):
    what a benchmark checks its prepared data against before timing anything."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.partial")
    out.parent.mkdir(parents=True, exist_ok=True)      # e.g. bench/data on a fresh clone
    rows = 0
    present = dict.fromkeys(COLUMNS, 0)
    with tmp.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(COLUMNS)
        for block in chunks(seed, n):
            writer.writerows(zip(*block, strict=True))
            rows += len(block[0])
            for name, k in present_counts(block).items():
                present[name] += k
    counts_path(out).write_text(json.dumps({"seed": seed, "rows": rows, "present": present}),
                                encoding="utf-8")
    tmp.replace(out)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=OUT, help=f"default: {OUT.name}")
    parser.add_argument("--rows", type=int, default=N_ROWS, help=f"default: {N_ROWS}")
    parser.add_argument("--seed", type=int, default=SEED, help=f"default: {SEED}")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.rows < 0:
        parser.error("--rows must be zero or more")
    rows = write_csv(args.out, args.seed, args.rows)
    print(f"wrote {rows} rows to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
