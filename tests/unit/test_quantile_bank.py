"""Planning's quantile error model (the noise bank) is the simulation, faster (issue 20.3).

The bank reuses one set of consistent tree-noise processes per grid for every group and ε;
``expected_quantile_error`` draws fresh trees. Both estimate the same expectation, so on
any public shape, size and ε they must agree within Monte-Carlo error. Tolerance: each
mean of |error| over R runs has a relative standard error ≤ 1/√R (for |error| of a Laplace
or normal law sd/mean ≤ 1, and averaging three levels only lowers it), so two independent
estimates of 1000 runs differ by less than 3·√(2/1000) ≈ 13 % (3 σ) unless the models differ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_engine.sound import plan
from dp_engine.sound.pilot import GroupScales, pilot_edges, uniform_scales
from dp_engine.sound.releases import quantile_bank as qb
from dp_engine.sound.releases import quantile_error as qe
from dp_engine.sound.spread import band_levels

QS = (0.05, 0.25, 0.5, 0.75, 0.95)
RUNS = 1000
EDGES = pilot_edges(20, 100, 5)
MIDS = (EDGES[:-1] + EDGES[1:]) / 2


def _shape(values: np.ndarray) -> np.ndarray:
    return values / values.sum()


SHAPES = {
    "uniform": np.full(MIDS.size, 1.0 / MIDS.size),
    "normal": _shape(np.exp(-0.5 * ((MIDS - 66) / 8) ** 2)),
    "narrow": _shape(np.exp(-0.5 * ((MIDS - 50) / 3) ** 2) + 1e-4),
    "bimodal": _shape(np.exp(-0.5 * ((MIDS - 35) / 4) ** 2)
                      + np.exp(-0.5 * ((MIDS - 80) / 5) ** 2)),
    "skewed": _shape(np.exp(-(MIDS - 20) / 10)),
}
POINTS = [   # (shape, n̂, ε, grid): data-free, the bands' region, fine grids, large ε
    ("uniform", 120, 0.004, 11), ("normal", 40, 1.25, 126), ("narrow", 600, 0.08, 126),
    ("bimodal", 120, 0.4, 126), ("skewed", 20, 2.5, 126), ("normal", 1e6, 0.01, 1001),
    ("skewed", 5000, 8.0, 1001), ("bimodal", 300, 6.0, 41),
]


@pytest.mark.parametrize(("name", "n", "eps", "c"), POINTS)
def test_the_bank_agrees_with_the_simulation(name, n, eps, c):
    scales = GroupScales(np.array([float(n)]), 20.0, 100.0, EDGES, SHAPES[name][None, :])
    box = band_levels(QS)
    sim, _, _ = qe._simulate(scales, np.array([eps]), QS, 1, "cdf", c, RUNS, qe.FINE_CANDIDATES)
    bank, _, _ = qb.banked_quantile_error(scales, np.array([eps]), QS, 1, c, runs=RUNS)
    s, b = sim[0, box].mean(), bank[0, box].mean()
    tolerance = 3 * math.sqrt(2 / RUNS)
    assert abs(b / s - 1) <= tolerance, (name, n, eps, c, s, b)


def test_the_bank_is_drawn_once_per_grid_and_reproducible():
    first = qb.noise_bank(127)
    assert qb.noise_bank(127) is first
    with pytest.raises(ValueError, match="read-only"):
        first[0][0, 0] = 0.0
    qb._banks.clear()
    again = qb.noise_bank(127)
    assert again is not first
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_band_only_computes_the_band_levels_alone_and_the_same():
    scales = uniform_scales([300.0, 5000.0], 20.0, 100.0)
    eps = np.array([0.7, 0.2])
    full = qb.banked_quantile_error(scales, eps, QS, 1, 126)
    band = qb.banked_quantile_error(scales, eps, QS, 1, 126, band_only=True)
    held = band_levels(QS)
    assert np.array_equal(full[0][:, held], band[0][:, held])
    assert np.isnan(band[0][:, ~held]).all() and np.isfinite(full[0]).all()
    for a, b in zip(full[1:], band[1:], strict=True):
        assert np.array_equal(a, b)


def test_planning_a_box_plot_runs_no_simulation(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("planning simulated the mechanism")

    monkeypatch.setattr(plan, "expected_quantile_error", refuse)
    qb._memo.clear()
    tiers = plan.plan_tiers("quantiles", uniform_scales([80.0, 900.0], 20.0, 100.0))
    assert np.isfinite(tiers.tiers[0].epsilon).all()
