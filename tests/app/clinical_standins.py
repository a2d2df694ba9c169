"""Synthetic stand-ins for the shapes of public clinical research exports (issue 23, item 2).

Each table is generated here from a fixed seed (no real patient, no copied values); each has
the patterns that real exports brought to the Data page:

- ``trial_table``: a randomised-trial export of 30 columns, one row per patient, with values
  written as labelled codes (``0_no``/``1_yes``, ``1_female``/``2_male``, ``1_north``),
  plain yes/no columns, numbered sites, an enrolment year and a date;
- ``testing_table``: a laboratory-testing export, one row per test, with repeated patient ids,
  invented first and last names, a 2-value test-type column named ``test_id`` and
  about forty clinic names, some rare;
- ``survival_table``: a survival-study export with institution codes and sex and status coded
  1/2 without labels (1 = male, 2 = female; 1 = censored, 2 = event).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

YES_NO_CODED = ("outcome", "sod", "pep", "recpanc", "psphinc", "precut", "difcan", "paninj",
                "acinar", "brush", "asa81", "prophystent", "therastent", "pdstent", "sodsom",
                "bsphinc", "bstent", "chole", "pbmal", "bleed")
YES_NO_PLAIN = ("smoker",)
CLINICS = tuple(f"{area} {kind}" for area in ("north", "south", "east", "west", "central")
                for kind in ("emergency", "oncology", "cardiology", "paediatrics", "day unit",
                             "surgical ward", "outpatient", "intensive care"))


def _coded(rng: np.random.Generator, labels: tuple[str, ...], n: int, first: int = 0,
           p: tuple[float, ...] | None = None) -> np.ndarray:
    values = np.array([f"{first + i}_{label}" for i, label in enumerate(labels)], dtype=object)
    return rng.choice(values, n, p=p)


def trial_table(n: int = 600, seed: int = 23) -> pd.DataFrame:
    """A 30-column trial export: labelled codes, yes/no columns, sites, a year and a date."""
    rng = np.random.default_rng(seed)
    enrolled = pd.Timestamp("2009-01-05") + pd.to_timedelta(rng.integers(0, 4 * 365, n), "D")
    cols: dict[str, object] = {
        "id": np.arange(1001, 1001 + n),
        "site": _coded(rng, ("north", "east", "south", "west"), n, 1, (0.4, 0.3, 0.2, 0.1)),
        "age": np.round(rng.normal(45, 13, n).clip(18, 90), 1),
        "risk": np.round(rng.uniform(1, 5.5, n) * 2) / 2,
        "gender": _coded(rng, ("female", "male"), n, 1, (0.8, 0.2)),
        "type": _coded(rng, ("no SOD", "type 1", "type 2", "type 3"), n, 0),
        "rx": _coded(rng, ("placebo", "indomethacin"), n, 0),
        "enrol_year": enrolled.year.to_numpy(),
        "enrol_date": enrolled.strftime("%d.%m.%Y").to_numpy(),
    }
    for name in YES_NO_CODED:
        cols[name] = _coded(rng, ("no", "yes"), n, 0, (0.8, 0.2))
    for name in YES_NO_PLAIN:
        cols[name] = rng.choice(np.array(["yes", "no"], dtype=object), n, p=(0.3, 0.7))
    return pd.DataFrame(cols)


def testing_table(n: int = 3000, seed: int = 17) -> pd.DataFrame:
    """One row per test: repeated patient ids, names, a test type called ``test_id``, clinics."""
    rng = np.random.default_rng(seed)
    tests = rng.choice([1, 1, 1, 2, 2, 3, 4], n)
    patient = np.repeat(np.arange(50001, 50001 + n), tests)[:n]
    first = np.array(["Ada", "Bo", "Cleo", "Dag", "Eli", "Fen", "Gus", "Hana"], dtype=object)
    last = np.array([f"Sur{i:03d}" for i in range(300)], dtype=object)
    weights = np.r_[np.full(len(CLINICS) - 3, 1.0), [0.004, 0.003, 0.002]]
    return pd.DataFrame({
        "subject_id": patient,
        "fake_first_name": rng.choice(first, n),
        "fake_last_name": rng.choice(last, n),
        "gender": rng.choice(np.array(["female", "male"], dtype=object), n),
        "pan_day": rng.integers(4, 108, n),
        "test_id": rng.choice(np.array(["covid", "covid2"], dtype=object), n, p=(0.9, 0.1)),
        "clinic_name": rng.choice(np.array(CLINICS, dtype=object), n, p=weights / weights.sum()),
        "result": rng.choice(np.array(["negative", "positive", "invalid"], dtype=object), n,
                             p=(0.9, 0.08, 0.02)),
        "age": np.round(rng.gamma(4, 8, n).clip(0, 104), 1),
        "drive_thru_ind": rng.integers(0, 2, n),
        "ct_result": np.round(rng.uniform(14, 45, n), 1),
        "orderset": rng.integers(0, 2, n),
        "payor_group": rng.choice(np.array(["government", "commercial", "self pay", "NA"],
                                           dtype=object), n, p=(0.4, 0.4, 0.1, 0.1)),
        "patient_class": rng.choice(np.array(["inpatient", "outpatient", "emergency"],
                                             dtype=object), n),
        "col_rec_tat": np.round(rng.exponential(2.5, n), 2),
        "rec_ver_tat": np.round(rng.exponential(9.0, n), 2),
    })


def survival_table(n: int = 228, seed: int = 5) -> pd.DataFrame:
    """Survival study: institution codes, sex and status coded 1/2 without labels."""
    rng = np.random.default_rng(seed)
    inst = rng.choice([1, 3, 5, 6, 7, 11, 12, 13, 15, 16, 21, 22, 26], n).astype(float)
    inst[rng.choice(n, 1, replace=False)] = np.nan
    return pd.DataFrame({
        "inst": pd.array(inst, dtype="Int64"),
        "time": rng.integers(5, 1023, n),
        "status": rng.choice([1, 2], n, p=(0.28, 0.72)),
        "age": rng.integers(39, 83, n),
        "sex": rng.choice([1, 2], n, p=(0.6, 0.4)),
        "ph.ecog": rng.choice([0, 1, 2, 3], n, p=(0.28, 0.49, 0.22, 0.01)),
        "ph.karno": rng.choice([50, 60, 70, 80, 90, 100], n),
        "pat.karno": rng.choice([30, 40, 50, 60, 70, 80, 90, 100], n),
        "meal.cal": rng.integers(96, 2601, n),
        "wt.loss": rng.integers(-24, 69, n),
    })


def csv_bytes(frame: pd.DataFrame) -> bytes:
    """The table as an export would write it (missing as empty)."""
    return frame.to_csv(index=False).encode()
