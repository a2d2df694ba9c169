"""Which column identifies a patient, and how many rows each patient has (owner-only facts).

A table with one row per test or visit repeats its patient ids; a guarantee "per row" is then
not one "per patient". These counts let the Data page say so, propose the patient column and a
bound k on rows per patient (a high percentile, flagged as read off the data).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dp_engine.schema import ColumnKind, Schema
from services.data.limits import PATIENT_ROWS_PERCENTILE

PATIENT_KEYS = frozenset({
    "id", "pid", "mrn", "patient", "patientid", "patientnr", "patientno", "patientnumber",
    "patno", "patnr", "subject", "subjectid", "participant", "participantid", "person",
    "personid", "caseid", "studyid", "anonymid", "pseudonym",
})


def is_patient_name(name: str) -> bool:
    """A column name that usually holds a patient id (``id``, ``Patient ID``, ``subject``)."""
    return re.sub(r"[^a-z0-9]", "", name.lower()) in PATIENT_KEYS


@dataclass(frozen=True)
class RowsPerPatient:
    """How the rows of one identifier column spread over its distinct values."""

    column: str
    rows: int        # rows with a value in the column
    patients: int    # distinct values
    missing: int     # rows without a value
    histogram: tuple[tuple[int, int], ...]  # (rows per patient, number of such patients)

    @property
    def repeated(self) -> int:
        """Patients (distinct ids) with more than one row."""
        return sum(n for r, n in self.histogram if r > 1)

    @property
    def max_rows(self) -> int:
        return max((r for r, _ in self.histogram), default=0)

    def percentile(self, q: float) -> int:
        """The smallest r such that at least q % of patients have at most r rows."""
        need = q / 100.0 * self.patients
        seen = itertools.accumulate(n for _, n in self.histogram)
        return next((r for (r, _), s in zip(self.histogram, seen, strict=True)
                     if s >= need - 1e-9), self.max_rows)

    def rows_beyond(self, k: int) -> int:
        """Rows left out when at most k rows of each patient are used."""
        return sum((r - k) * n for r, n in self.histogram if r > k)

    def patients_over(self, k: int) -> int:
        return sum(n for r, n in self.histogram if r > k)


def rows_per_patient(name: str, col: pd.Series) -> RowsPerPatient:
    """Counts from one hash pass over the column (``pandas.factorize``)."""
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    present = codes[codes >= 0]
    per_id = np.bincount(present, minlength=len(uniques))
    per_rows = np.bincount(per_id)  # per_rows[r]: patients with r rows
    histogram = tuple((int(r), int(per_rows[r])) for r in np.flatnonzero(per_rows) if r > 0)
    return RowsPerPatient(name, int(present.size), int(np.count_nonzero(per_id)),
                          int(codes.size - present.size), histogram)


def propose_bound(stats: RowsPerPatient, q: float = PATIENT_ROWS_PERCENTILE) -> int:
    """k: the q-th percentile of rows per patient, at least 1 (see limits.PATIENT_ROWS_...)."""
    return max(1, int(math.ceil(stats.percentile(q))))


def candidates(schema: Schema) -> list[str]:
    """Columns that may identify a patient: the schema's choice, then identifiers.

    Identifier columns named like a patient id (``id``, ``patient_id``, ``subject``) first.
    """
    ids = [c.name for c in schema.columns if c.kind is ColumnKind.IDENTIFIER]
    ordered = sorted(ids, key=lambda n: not is_patient_name(n))
    if schema.patient_column and schema.patient_column not in ordered:
        ordered.insert(0, schema.patient_column)
    return ordered


def patient_stats(frame: pd.DataFrame, names: Iterable[str]) -> dict[str, RowsPerPatient]:
    """Rows per patient for each named column of ``frame``."""
    return {n: rows_per_patient(n, frame[n]) for n in names if n in frame.columns}


def best_repeated(stats: Mapping[str, RowsPerPatient], order: Iterable[str],
                  min_patients: int = 1) -> RowsPerPatient | None:
    """The first candidate (in ``order``) whose ids repeat: rows there are not patients.

    A candidate with fewer than ``min_patients`` distinct values (a handful: a type or a
    group, not a person) is never proposed.
    """
    return next((s for name in order if (s := stats.get(name)) is not None and s.repeated
                 and s.patients >= min_patients), None)
