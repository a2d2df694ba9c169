"""``dp_calculate``: the paper's entry point (Figure 1), built on the search and fit modules."""

from __future__ import annotations

import math

import numpy as np

from dp_engine.bands import band as noise_band
from dp_engine.errors import DataTypeError
from dp_engine.paper.data import Prepared, prepare, restore
from dp_engine.paper.fit import check_bounds, effective_epsilon, sensitivity_from
from dp_engine.paper.search import REPETITIONS, NoiseProbe, run_search, unit_laplace, validate_grid
from dp_engine.paper.types import QUERY_TYPES, PaperResult, query_code
from dp_engine.rng import as_generator


def dp_calculate(
    data: object,
    query_type: object,
    noise_factor: int,
    data_type: object = None,
    is_range: bool = False,
    *,
    epsilons: object = None,
    rng: np.random.Generator | None = None,
    categories: object = None,
    statistic: str | None = None,
    bounds: tuple[float, float] | None = None,
) -> PaperResult:
    """Noise every record for ``query_type`` with the ε Algorithm 1 finds (paper Figure 1).

    - ``data``: list, numpy array or pandas Series; missing values are dropped and counted.
    - ``data_type``: char, str, int, float, bool or a numpy type; None infers it. Text
      values are categories: encoded as codes 0..k-1 (sorted labels, or ``categories``'
      order), always fitted to the range, and returned as labels.
    - ``is_range``: fit the noised values into the data's own range (Eq. 4); ints are
      rounded, bools are ``> 0.5`` whatever ``is_range`` says.
    - ``epsilons``: the ε grid (default ``DEFAULT_EPSILONS``); ``statistic`` only refines
      ``effective_epsilon`` for query 1 ("count" data or raw values binned into a
      "histogram").
    - ``bounds``: public (a, b) for S_f instead of the data's own min and max (not in the
      paper, which derives them from the data; useful to audit the labelled ε). The Eq. 4
      fit still uses the data's range.

    The released data are the first of the five search repetitions at the chosen ε (no new
    draw); ``noise_percent`` is their realized noise against the true values, while the
    steps record the five-repetition mean the search used.
    """
    code = query_code(query_type)
    band = noise_band(noise_factor)
    grid = validate_grid(epsilons)
    prep = prepare(data, data_type, categories)
    if prep.kind == "category" and code in (2, 4):
        raise DataTypeError(
            f"A {QUERY_TYPES[code]} needs numbers, but this column holds categories; "
            "use a count (1) or a median (3) of the category codes."
        )
    x = prep.values
    if bounds is None:
        span = float(x.max() - x.min())
    elif prep.kind == "category":
        raise DataTypeError("Bounds do not apply to categories; their codes span k - 1.")
    else:
        lower, upper = check_bounds(bounds)
        span = upper - lower
    sens = sensitivity_from(code, span, prep.n)
    fit = bool(is_range) or prep.kind == "category"
    unit = unit_laplace(as_generator(rng), REPETITIONS, x.size)
    probe = NoiseProbe(x, prep.kind, fit, unit, max_scale=sens / float(grid[0]))
    idx, found, steps = run_search(probe, sens, band, grid)
    eps = float(grid[idx])
    row = probe.release(x, sens / eps)
    diff = np.subtract(row, x)
    np.abs(diff, out=diff)
    diff *= probe.invd
    realized = float(100.0 * diff.sum() / x.size)
    del diff
    if sens == 0.0:
        eff = math.inf  # nothing was noised: the values are released exactly
    else:
        eff = effective_epsilon(code, eps, prep.n, statistic=statistic, span=span)
    return PaperResult(
        dp_data=restore(prep, row),
        epsilon=eps,
        sensitivity=sens,
        noise_percent=realized,
        noise_factor=int(noise_factor),
        band=band,
        found=found,
        steps=steps,
        data_range=_range_used(prep, fit or bool(is_range)),
        effective_epsilon=eff,
        query_type=code,
        data_type=prep.kind,
        n_used=prep.n,
        n_dropped=prep.n_dropped,
        kept=prep.kept,
    )


def _range_used(prep: Prepared, fitted: bool) -> tuple | None:
    """The range values Eq. 4 used (labels for categories, (min, max) for numbers)."""
    if not fitted:
        return None
    if prep.kind == "category":
        assert prep.labels is not None
        return tuple(prep.labels.tolist())
    lo, hi = float(prep.values.min()), float(prep.values.max())
    if prep.kind == "bool":
        return (bool(lo), bool(hi))
    if prep.kind == "int":
        return (int(lo), int(hi))
    return (lo, hi)
