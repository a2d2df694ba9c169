"""Nested tiers: a noisier release made by adding noise to a less noisy one.

For Laplace scales b1 < b2, Y = 0 with probability (b1/b2)², otherwise
Y ~ Laplace(b2); then Laplace(b1) + Y ~ Laplace(b2) exactly (compare the
characteristic functions 1/(1 + b²θ²)). For discrete Laplace with
p = e^(−1/t1) < q = e^(−1/t2), Y = 0 with probability p(1−q)²/(q(1−p)²),
otherwise Y ~ DiscreteLaplace(q). The noisier tier is then post-processing of
the less noisy one, so colluding roles learn no more than the least noisy one.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dp_engine.errors import InvalidEpsilonError, NotNestableError
from dp_engine.rng import RngLike, as_generator
from dp_engine.sound.mechanisms import dlap_noise
from dp_engine.sound.release import Release
from dp_engine.sound.releases import finish, group_epsilons
from dp_engine.sound.validation import check_epsilon, check_sensitivity


def zero_probability(from_scale: Any, to_scale: Any, discrete: bool) -> Any:
    """Probability that the extra noise Y is exactly 0 (elementwise for arrays)."""
    b1, b2 = np.asarray(from_scale, dtype=float), np.asarray(to_scale, dtype=float)
    if not discrete:
        out = (b1 / b2) ** 2
    else:
        # p(1−q)²/(q(1−p)²) with p = e^(−1/t1), q = e^(−1/t2), in a cancellation-free form
        ratio = np.expm1(-1.0 / b2) / np.expm1(-1.0 / b1)
        out = np.exp(1.0 / b2 - 1.0 / b1) * ratio * ratio
    return float(out) if out.ndim == 0 else out


def refine_tier(
    answer: Any, from_scale: Any, to_scale: Any, *, discrete: bool = False, rng: RngLike = None
):
    """``answer`` (noise of scale from_scale) re-noised to scale to_scale, elementwise.

    Laplace scales b, or discrete-Laplace t (integer answers) with ``discrete``. The scales
    may be arrays that broadcast against ``answer`` (one per group). Returns the same
    shape; integer input stays integer for the discrete case.
    """
    b1 = np.asarray(from_scale, dtype=float)
    b2 = np.asarray(to_scale, dtype=float)
    if b1.ndim == 0:
        check_sensitivity(b1)
    if b2.ndim == 0:
        check_sensitivity(b2)
    if np.any(b2 < b1 * (1 - 1e-12)):
        raise NotNestableError(
            f"A refined tier must be noisier (scale {np.min(b2):g} is below the current "
            f"{np.max(b1):g})."
        )
    gen = as_generator(rng)
    x = np.asarray(answer)
    w0 = np.broadcast_to(zero_probability(b1, b2, discrete), x.shape)
    b2b = np.broadcast_to(b2, x.shape)
    extra = dlap_noise(b2b, x.shape, gen) if discrete else gen.laplace(0.0, 1.0, x.shape) * b2b
    extra = np.where(gen.random(x.shape) < w0, 0.0, extra)
    if discrete and x.dtype.kind in "iu":
        extra = extra.astype(x.dtype)
    out = x + extra
    return out if np.ndim(answer) else out.item()


def refine(release: Release, epsilon: Any, *, rng: RngLike = None) -> Release:
    """The same release at a smaller ε (one, or one per group), with exactly the law of a
    fresh release at that ε.

    Every noisy component is discrete Laplace on its lattice (counts, lattice sums, the
    nodes of a quantile CDF); its scale grows by ε_old/ε_new per group and the
    post-processing is redone. A group may become withheld (NaN) but not the reverse.
    Exponential-mechanism releases (JointExp, per-level quantiles) cannot be nested.
    """
    if not release.noisy:
        raise NotNestableError(
            f"A {release.statistic} release ({release.mechanism}) cannot be made noisier by "
            "adding noise; release it afresh at the lower ε instead."
        )
    per_group = np.ndim(epsilon) > 0
    old = _old_epsilons(release)
    if not per_group:
        eps = check_epsilon(epsilon)
        if eps >= release.epsilon:
            raise InvalidEpsilonError(
                f"A refined tier needs a smaller ε than the release's {release.epsilon:g} "
                f"(got {eps:g})."
            )
        new = np.where(np.isfinite(old), eps, np.nan)
    else:
        new, _ = group_epsilons(epsilon, old.size)
        if np.any(np.isfinite(new) & ~np.isfinite(old)):
            raise NotNestableError("A group withheld in the less noisy tier cannot be shown.")
        if np.any(new > old * (1 + 1e-12)):
            raise InvalidEpsilonError("A refined tier needs ε at most the release's, per group.")
    ratio = np.where(np.isfinite(new), old / np.where(np.isfinite(new), new, 1.0), np.nan)
    gen = as_generator(rng)
    grids = release.params["grid"]
    noisy, scales = {}, {}
    for name, values in release.noisy.items():
        step = float(grids[name])
        arr = np.asarray(values, dtype=float)
        rows = arr.reshape(old.size, -1)
        t_old = np.broadcast_to(np.asarray(release.scales[name], dtype=float), old.shape)
        t_new = t_old * ratio
        live = np.isfinite(t_new)
        refined = np.full(rows.shape, np.nan)
        if live.any():
            refined[live] = refine_tier(rows[live] / step, (t_old[live] / step)[:, None],
                                        (t_new[live] / step)[:, None], discrete=True,
                                        rng=gen) * step
        noisy[name] = refined.reshape(arr.shape)
        scales[name] = t_new if (per_group or np.ndim(release.scales[name])) else float(t_new[0])
    params = dict(release.params)
    params["epsilon_split"] = {k: _split(v, ratio) for k, v in params["epsilon_split"].items()}
    if per_group or "epsilon_by_group" in params:
        params["epsilon_by_group"] = [None if not math.isfinite(e) else float(e) for e in new]
    withheld = ~np.isfinite(new) if (per_group or np.ndim(release.withheld)) else False
    eps_out = new if (per_group or "epsilon_by_group" in params) else float(new[0])
    return finish(release.statistic, noisy, scales, params, eps_out, release.sensitivity,
                  withheld=withheld)


def _split(share: Any, ratio: np.ndarray) -> Any:
    """A component's ε share after refining by ``ratio`` (one float, or one per group)."""
    if np.ndim(share) == 0:
        return float(share) / float(ratio[0])
    old = np.asarray([np.nan if v is None else v for v in share], dtype=float)
    return [None if not math.isfinite(v) else float(v) for v in old / ratio]


def _old_epsilons(release: Release) -> np.ndarray:
    """ε per group of a release (one group when ungrouped)."""
    by_group = release.params.get("epsilon_by_group")
    if by_group is not None:
        return np.asarray([np.nan if e is None else e for e in by_group], dtype=float)
    first = next(iter(release.noisy.values()))
    arr = np.asarray(first)
    groups = arr.shape[0] if "group_keys" in release.params and arr.ndim >= 1 else 1
    return np.full(groups, float(release.epsilon))
