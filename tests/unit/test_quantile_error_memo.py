"""The simulated quantile error model is memoized without changing a single number."""

from __future__ import annotations

import numpy as np
import pytest

from dp_engine.sound.pilot import uniform_scales
from dp_engine.sound.releases import quantile_error as qe

QS = (0.25, 0.5, 0.75)


def test_a_memoized_answer_is_the_simulation_bit_for_bit_and_read_only():
    scales = uniform_scales([300.0, 5000.0], 20.0, 100.0)
    eps = np.array([0.7, 0.2])
    first = qe.expected_quantile_error(scales, eps, QS, 1, "cdf", 101, runs=16)
    again = qe.expected_quantile_error(scales, eps.copy(), QS, 1, "cdf", 101, runs=16)
    assert again is first                                   # served from the memo
    fresh = qe._simulate(scales, eps, QS, 1, "cdf", 101, 16, qe.FINE_CANDIDATES)
    for a, b in zip(first, fresh, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    with pytest.raises(ValueError, match="read-only"):
        first[0][0] = 0.0
    other = qe.expected_quantile_error(scales, eps, QS, 1, "cdf", 51, runs=16)  # another grid
    assert other is not first and not np.array_equal(other[0], first[0])


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(qe._memo, "size", 3)
    scales = uniform_scales([400.0], 0.0, 10.0)
    for e in (0.1, 0.2, 0.3, 0.4, 0.5):
        qe.expected_quantile_error(scales, np.array([e]), QS, 1, "cdf", 11, runs=4)
    assert len(qe._memo) <= 3
