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
from dp_engine.sound.statistics import finish
from dp_engine.sound.validation import check_epsilon, check_sensitivity


def zero_probability(from_scale: float, to_scale: float, discrete: bool) -> float:
    """Probability that the extra noise Y is exactly 0."""
    if not discrete:
        return (from_scale / to_scale) ** 2
    # p(1−q)²/(q(1−p)²) with p = e^(−1/t1), q = e^(−1/t2), in a cancellation-free form
    ratio = math.expm1(-1.0 / to_scale) / math.expm1(-1.0 / from_scale)
    return math.exp(1.0 / to_scale - 1.0 / from_scale) * ratio * ratio


def refine_tier(
    answer: Any, from_scale: float, to_scale: float, *, discrete: bool = False, rng: RngLike = None
):
    """``answer`` (noise of scale from_scale) re-noised to scale to_scale, elementwise.

    Laplace scales b, or discrete-Laplace t (integer answers) with ``discrete``.
    Returns the same shape; integer input stays integer for the discrete case.
    """
    b1, b2 = check_sensitivity(from_scale), check_sensitivity(to_scale)
    if b2 < b1:
        raise NotNestableError(
            f"A refined tier must be noisier (scale {b2:g} is below the current {b1:g})."
        )
    gen = as_generator(rng)
    x = np.asarray(answer)
    w0 = zero_probability(b1, b2, discrete)
    extra = dlap_noise(b2, x.shape, gen) if discrete else gen.laplace(0.0, b2, x.shape)
    extra[gen.random(x.shape) < w0] = 0.0
    if discrete and x.dtype.kind in "iu":
        extra = extra.astype(x.dtype)
    out = x + extra
    return out if np.ndim(answer) else out.item()


def refine(release: Release, epsilon: float, *, rng: RngLike = None) -> Release:
    """The same release at a smaller ε, with exactly the law of a fresh release at ε.

    Every noisy component is discrete Laplace on its lattice; its scale grows by
    release.epsilon / ε and the post-processing is redone. Exponential-mechanism
    releases (quantiles) cannot be nested: NotNestableError.
    """
    eps = check_epsilon(epsilon)
    if release.statistic == "quantiles" or not release.noisy:
        raise NotNestableError(
            f"A {release.statistic} release ({release.mechanism}) cannot be made noisier by "
            "adding noise; release it afresh at the lower ε instead."
        )
    if eps >= release.epsilon:
        raise InvalidEpsilonError(
            f"A refined tier needs a smaller ε than the release's {release.epsilon:g} "
            f"(got {eps:g})."
        )
    ratio = release.epsilon / eps
    gen = as_generator(rng)
    grids = release.params["grid"]
    noisy, scales = {}, {}
    for name, values in release.noisy.items():
        step = float(grids[name])
        scales[name] = release.scales[name] * ratio
        units = np.asarray(values, dtype=float) / step
        refined = refine_tier(
            units, release.scales[name] / step, scales[name] / step, discrete=True, rng=gen
        )
        noisy[name] = refined * step
    params = dict(release.params)
    params["epsilon_split"] = {k: v / ratio for k, v in params["epsilon_split"].items()}
    return finish(release.statistic, noisy, scales, params, eps, release.sensitivity)
