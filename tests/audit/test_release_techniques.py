"""Privacy audits of the studio's per-record techniques at their stated per-cell ε.

Neighbours replace one cell (a patient's value) by another: the two ends of the public
bounds for numeric columns (sensitivity = the public range), two categories, or a missing
cell against a present one (missing cells are imputed before noising). Each column of n
identical cells gives n independent outputs of the cell's mechanism. α = 1e-5 per test.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dp_engine.audit import audit_scalar
from dp_engine.release.techniques import ColumnChoice, perturb
from dp_engine.schema import ColumnSpec

ALPHA = 1e-5
RUNS = 200_000

AGE = ColumnSpec("age", "numeric", lower=20, upper=100, bin_width=5)
FLAG = ColumnSpec("flag", "boolean", categories=(False, True))
DEPT = ColumnSpec("dept", "categorical", categories=("UROL", "RADI", "ONKO", "AMBU"))


def _sampler(spec: ColumnSpec, choice: ColumnChoice, value, as_float):
    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        out = perturb(pd.Series([value] * n, dtype=object), spec, choice, rng)
        return as_float(np.asarray(out))
    return draw


def _audit(spec, choice, a, b, as_float=lambda y: y.astype(float), seed=7):
    res = audit_scalar(_sampler(spec, choice, a, as_float), _sampler(spec, choice, b, as_float),
                       choice.epsilon, n_runs=RUNS, alpha=ALPHA,
                       rng=np.random.default_rng(seed))
    assert not res.violated, res.summary()
    return res


@pytest.mark.parametrize("technique", ["laplace", "bounded_laplace"])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_numeric_techniques_at_stated_epsilon(technique, eps):
    res = _audit(AGE, ColumnChoice("age", technique, eps, "range"), 20.0, 100.0)
    # the audit sees most of the claim (bounded Laplace's corrected scale is conservative)
    assert res.epsilon_lower_bound > (0.5 if technique == "bounded_laplace" else 0.7) * eps


def test_bounded_laplace_missing_cell_is_covered():
    _audit(AGE, ColumnChoice("age", "bounded_laplace", 1.0, "range"), None, 20.0)


def test_randomized_response_boolean():
    res = _audit(FLAG, ColumnChoice("flag", "randomized_response", 1.5), True, False)
    assert res.epsilon_lower_bound > 0.8 * 1.5
    _audit(FLAG, ColumnChoice("flag", "randomized_response", 1.5), None, True, seed=8)


def test_exponential_categorical():
    codes = {c: i for i, c in enumerate(DEPT.categories)}

    def as_float(y):
        return np.asarray([codes[v] for v in y], dtype=float)

    choice = ColumnChoice("dept", "exponential", 1.0)
    res = _audit(DEPT, choice, "UROL", "RADI", as_float)
    assert res.epsilon_lower_bound > 0.8
    _audit(DEPT, choice, None, "ONKO", as_float, seed=9)
