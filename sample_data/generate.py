"""Generate the synthetic PI-RADS cohort (920 prostate MRI reports, every attribute of Table 2).

No real patient is behind any row: every value is drawn from a seeded generator so the file
is rebuilt byte for byte (`python sample_data/generate.py [out.csv]`). The distributions are
chosen so the PyDPLib figures look alike: ages mostly 50-80, high PI-RADS scores most frequent
in the 60s-70s, Gleason rising with PI-RADS, BPH rising with age, some missing values and a few
rare categories. Booleans and missing values are written in the mixed styles of a real export.
"""

from __future__ import annotations

import csv
import io
import sys
from datetime import date, timedelta
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


def generate(seed: int = SEED, n: int = N_ROWS) -> list[list[str]]:
    """The cohort as rows of CSV cells (strings), sorted by examination date."""
    rng = np.random.default_rng(seed)
    start = date(2017, 1, 2)
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
    ids = rng.choice(np.arange(100_000, 1_000_000), size=n, replace=False)
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

    rows = []
    for i in range(n):
        exam = start + timedelta(days=int(exam_day[i]))
        modified = min(exam + timedelta(days=int(modified_lag[i])), date(2018, 12, 31))
        pi = "" if (no_pirads[i] or miss["PIRADS score"][i]) else str(int(pirads[i]))
        if no_pirads[i] or miss["Number_of_Lesions"][i]:
            les = ""
        elif lesions[i] > 3 and lesion_as_text[i]:
            les = ">3"
        else:
            les = str(int(lesions[i]))
        turp = "yes" if prior_turp[i] else ("planned" if planned_turp[i] else "no")
        follow_cell = ("n/a" if follow_na_style[i] else "") if miss["Follow up"][i] else follow[i]
        rows.append([
            str(int(ids[i])),
            "" if miss["Department"][i] else dept[i],
            physician[i],
            modified.isoformat(),
            "" if miss["Age"][i] else f"{age[i]:.1f}",
            str(exam.year),
            str(int(gleason[i])) if gleason[i] else "",
            "True" if no_pirads[i] else "False",
            follow_cell,
            pi,
            les,
            "" if miss["Prostatitis"][i] else prostatitis[i],
            "" if miss["BPH"][i] else ("yes" if bph[i] else "no"),
            "NA" if miss["Primary"][i] else primary[i],
            "" if miss["Therapy"][i] else therapy[i],
            "" if miss["TURP"][i] else turp,
        ])
    return rows


def to_csv_bytes(rows: list[list[str]]) -> bytes:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    return buf.getvalue().encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else OUT
    out.write_bytes(to_csv_bytes(generate()))
    print(f"wrote {N_ROWS} rows to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
