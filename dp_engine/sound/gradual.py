"""Gradual release: a less noisy tier drawn after a noisier one, paying only for the better one.

Tiers of one query form a chain of discrete-Laplace releases: a noisier tier is a less noisy
one plus independent noise from the nesting kernel (``tiers.py``)

    K(z) = π·[z = 0] + (1 − π)·DL(z; t_noisier),

so a group's tiers together reveal what the least noisy of them reveals. Tiers are drawn
lazily, in whatever order roles ask, and every new tier is drawn from its conditional law
given the tiers already stored, so the stored chain always has exactly the law of the nested
chain (Koufogiannis, Han and Pappas 2016, "Gradual release of sensitive data under
differential privacy", for Laplace noise; here the discrete-Laplace analogue, sampled exactly):

* only a less noisy tier a is stored → refine: y = y_a + Z, Z ~ K_{a→t} (no data read);
* only a noisier tier b is stored → sharpen: y = x + N with N drawn from
  P(N | y_b) ∝ DL(N; t)·K_{t→b}(y_b − x − N) (reads the true aggregate x);
* both are stored → bridge: P(y | y_a, y_b) ∝ K_{a→t}(y − y_a)·K_{t→b}(y_b − y) (no data read:
  given y_a, the chain forgets x);
* none → a fresh draw x + DL(t).

Either way the pair (new tier, stored tiers) has the law of the nested chain, so the whole
chain costs the ε of its least noisy tier: asking for a collaborator's tier after a third
party's costs the collaborator's ε, not the sum (instead of basic composition of a fresh
draw). Each conditional is a mixture of two point masses and three geometric pieces, drawn
exactly by inverse transform, elementwise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from dp_engine.errors import NotNestableError
from dp_engine.rng import RngLike, as_generator
from dp_engine.sound.mechanisms import dlap_noise
from dp_engine.sound.release import Release
from dp_engine.sound.releases import finish
from dp_engine.sound.tiers import refine_tier, zero_probability


def _log_dlap_const(log_a: np.ndarray) -> np.ndarray:
    """log((1 − a)/(1 + a)) for a = e^(log_a) < 1."""
    return np.log(-np.expm1(log_a)) - np.log1p(np.exp(log_a))


def between(c1: Any, c2: Any, t1: Any, alpha: Any, t2: Any, beta: Any,
            rng: RngLike = None) -> np.ndarray:
    """Draw y ∝ f1(y − c1)·f2(c2 − y) elementwise, on the integers.

    f1 = α·δ0 + (1 − α)·DL(t1) and f2 = β·δ0 + (1 − β)·DL(t2), with t1 < t2 (scales in
    lattice units; c1, c2 integers as floats). Sharpen: c1 = the truth, α = 0, f2 the nesting
    kernel; bridge: c1 = the less noisy tier, f1 and f2 the two nesting kernels.
    """
    c1, c2 = np.asarray(c1, dtype=float), np.asarray(c2, dtype=float)
    shape = np.broadcast_shapes(c1.shape, c2.shape, np.shape(t1), np.shape(t2),
                                np.shape(alpha), np.shape(beta))
    c1, c2 = np.broadcast_to(c1, shape), np.broadcast_to(c2, shape)
    t1, t2 = (np.broadcast_to(np.asarray(v, dtype=float), shape) for v in (t1, t2))
    al, be = (np.broadcast_to(np.asarray(v, dtype=float), shape) for v in (alpha, beta))
    if np.any(t2 <= t1):
        raise NotNestableError("The noisier tier's scale must exceed the new tier's.")
    gen = as_generator(rng)
    d = c2 - c1
    sign = np.where(d < 0, -1.0, 1.0)
    big_d = np.abs(d)
    lp, lq = -1.0 / t1, -1.0 / t2                       # log p < log q < 0
    lpq = lp + lq
    lr = lp - lq                                        # log(p/q) < 0
    cp, cq = _log_dlap_const(lp), _log_dlap_const(lq)
    with np.errstate(divide="ignore"):
        l_al, l_1al = np.log(al), np.log1p(-al)
        l_be, l_1be = np.log(be), np.log1p(-be)
    tail = lpq - np.log(-np.expm1(lpq))                 # log(pq/(1 − pq))
    both = l_1al + l_1be + cp + cq
    w_left = both + big_d * lq + tail
    w_right = both + big_d * lp + tail
    w_mid = both + big_d * lq + np.log(-np.expm1((big_d + 1.0) * lr)) \
        - np.log(-np.expm1(lr))
    with np.errstate(divide="ignore"):
        at_c1 = l_al + np.logaddexp(l_1be + cq + big_d * lq,
                                    np.where(big_d == 0, l_be, -np.inf))
        at_c2 = l_1al + l_be + cp + big_d * lp
    logw = np.stack([at_c1, at_c2, w_left, w_mid, w_right])
    top = logw.max(axis=0)
    w = np.exp(logw - top)
    cum = np.cumsum(w, axis=0)
    pick = (gen.random(shape) * cum[-1] > cum).sum(axis=0)     # 0..4
    u1, u2 = gen.random(shape), gen.random(shape)
    geo = 1.0 + np.floor(np.log(u1) / lpq)                      # ≥ 1, P ∝ (pq)^j
    mid = np.clip(np.floor(np.log1p(-u2 * -np.expm1((big_d + 1.0) * lr)) / lr), 0.0, big_d)
    u = np.select([pick == 0, pick == 1, pick == 2, pick == 3],
                  [0.0, big_d, -geo, mid], big_d + geo)
    return c1 + sign * u


def _rows(values: Any, groups: int) -> np.ndarray:
    return np.asarray(values, dtype=float).reshape(groups, -1)


def _group_eps(rel: Release | None, groups: int) -> np.ndarray:
    if rel is None:
        return np.full(groups, np.nan)
    by_group = rel.params.get("epsilon_by_group")
    if by_group is not None:
        return np.asarray([np.nan if e is None else e for e in by_group], dtype=float)
    return np.full(groups, float(rel.epsilon))


def _group_scales(rel: Release, name: str, groups: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(rel.scales[name], dtype=float).reshape(-1), (groups,))


def insert(template: Release, *, less: Release | None = None, more: Release | None = None,
           truth: Mapping[str, Any] | None = None, rng: RngLike = None) -> Release:
    """The tier ``template`` describes (its ε per group, scales, grids and parameters: a
    release at the new ε, e.g. drawn with no noise), drawn as a link of the chain between the
    stored ``less`` noisy and ``more`` noisy tiers of the same query (either may be None).

    ``truth``: the true lattice values of every noisy component (the template's own noisy
    values when it was drawn without noise); needed only where a group is shown by neither
    ``less`` nor ``more`` or only by ``more``. Per group: bridge, refine, sharpen or a fresh
    draw (see the module docstring). Returns the release at the template's ε, post-processed.
    """
    gen = as_generator(rng)
    groups = _n_groups(template)
    eps = _group_eps(template, groups)
    e_less, e_more = _group_eps(less, groups), _group_eps(more, groups)
    live = np.isfinite(eps)
    has_less = live & np.isfinite(e_less)
    has_more = live & np.isfinite(e_more)
    if np.any(has_less & (e_less < eps * (1 - 1e-12))) or \
            np.any(has_more & (e_more > eps * (1 + 1e-12))):
        raise NotNestableError("A new tier goes between a less noisy and a noisier one.")
    need_truth = live & ~has_less
    if need_truth.any() and truth is None:
        raise NotNestableError("Sharpening a noisier tier or drawing afresh needs the truth.")
    grids = template.params["grid"]
    noisy: dict[str, np.ndarray] = {}
    for name, values in template.noisy.items():
        step = float(grids[name])
        shape = np.asarray(values).shape
        t_new = _group_scales(template, name, groups) / step
        out = np.full((groups, _rows(values, groups).shape[1]), np.nan)
        if live.any():
            y_less = _rows(less.noisy[name], groups) / step if less is not None else None
            y_more = _rows(more.noisy[name], groups) / step if more is not None else None
            x = _rows(truth[name], groups) / step if truth is not None else None
            t_less = t_new * np.where(has_less, eps / np.where(has_less, e_less, 1.0), 1.0)
            t_more = t_new * np.where(has_more, eps / np.where(has_more, e_more, 1.0), 1.0)
            out = _draw(out, live, has_less, has_more, x, y_less, y_more, t_less, t_new,
                        t_more, gen)
        noisy[name] = (out * step).reshape(shape)
    return finish_like(template, noisy)


def _n_groups(rel: Release) -> int:
    """Groups of a release: one ε each when given per group, else one per group key."""
    by_group = rel.params.get("epsilon_by_group")
    if by_group is not None:
        return len(by_group)
    keys = rel.params.get("group_keys")
    return len(keys) if keys is not None and np.ndim(rel.epsilon) else 1


def _draw(out: np.ndarray, live, has_less, has_more, x, y_less, y_more, t_less, t_new,
          t_more, gen: np.random.Generator) -> np.ndarray:
    """Fill ``out`` row by kind of group: bridge, refine, sharpen, fresh (lattice units)."""
    col = (slice(None), None)
    bridge = has_less & has_more
    refine = has_less & ~has_more
    sharpen = ~has_less & has_more
    fresh = live & ~has_less & ~has_more
    if bridge.any():
        a = zero_probability(t_less[bridge], t_new[bridge], True)
        b = zero_probability(t_new[bridge], t_more[bridge], True)
        out[bridge] = between(y_less[bridge], y_more[bridge], t_new[bridge][col],
                              np.asarray(a)[col], t_more[bridge][col], np.asarray(b)[col], gen)
    if refine.any():
        out[refine] = refine_tier(y_less[refine], t_less[refine][col], t_new[refine][col],
                                  discrete=True, rng=gen)
    if sharpen.any():
        b = zero_probability(t_new[sharpen], t_more[sharpen], True)
        out[sharpen] = between(x[sharpen], y_more[sharpen], t_new[sharpen][col], 0.0,
                               t_more[sharpen][col], np.asarray(b)[col], gen)
    if fresh.any():
        t = np.broadcast_to(t_new[fresh][col], x[fresh].shape)
        out[fresh] = x[fresh] + dlap_noise(t, x[fresh].shape, gen)
    return out


def finish_like(template: Release, noisy: Mapping[str, np.ndarray]) -> Release:
    """``template`` post-processed again from new noisy components of the same law."""
    by_group = template.params.get("epsilon_by_group")
    eps = (np.asarray([np.nan if e is None else e for e in by_group], dtype=float)
           if by_group is not None else float(template.epsilon))
    withheld = template.withheld
    return finish(template.statistic, dict(noisy), dict(template.scales), dict(template.params),
                  eps, template.sensitivity, withheld=withheld)


def no_noise() -> np.random.Generator:
    """A generator that draws no discrete-Laplace noise (every exponential draw is 0): run a
    release with it to get its true lattice values and its scales, e.g. the template and
    truth of ``insert``. Never hand such a release to anyone."""
    return _NoNoise(np.random.PCG64(0))


class _NoNoise(np.random.Generator):
    def standard_exponential(self, size=None, dtype=np.float64, method="zig", out=None):
        return np.zeros(size if size is not None else (), dtype=dtype)


def relabel(rel: Release, epsilon: Any) -> Release:
    """``rel`` described at a new ε per group: each component's scale grows by ε_old/ε_new
    and its ε share shrinks by the same ratio, as every sound mechanism's does (their noise
    is k·Δ/ε per group). The noisy values are kept as they are: a template for ``insert``,
    which draws new ones. Every group shown at the new ε must be shown in ``rel``."""
    groups = _n_groups(rel)
    old = _group_eps(rel, groups)
    new = np.broadcast_to(np.asarray(epsilon, dtype=float).reshape(-1), (groups,))
    new = np.where(new > 0, new, np.nan)
    if np.any(np.isfinite(new) & ~np.isfinite(old)):
        raise NotNestableError("A group the release withholds cannot be relabelled as shown.")
    ratio = np.where(np.isfinite(new), old / np.where(np.isfinite(new), new, 1.0), np.nan)
    scales = {n: np.broadcast_to(np.asarray(v, dtype=float).reshape(-1), (groups,)) * ratio
              for n, v in rel.scales.items()}
    params = dict(rel.params)
    params["epsilon_by_group"] = [None if not np.isfinite(e) else float(e) for e in new]
    params["epsilon_split"] = {
        n: [None if not np.isfinite(v) else float(v) for v in
            np.broadcast_to(np.asarray([np.nan if x is None else x for x in np.atleast_1d(s)],
                                       dtype=float), (groups,)) / ratio]
        for n, s in params.get("epsilon_split", {}).items()}
    return Release(statistic=rel.statistic, value=rel.value,
                   epsilon=float(np.nanmax(new)) if np.isfinite(new).any() else 0.0,
                   mechanism=rel.mechanism, sensitivity=rel.sensitivity, params=params,
                   noisy=rel.noisy, scales=scales, withheld=~np.isfinite(new))


def combine(by_group: list[Release | None]) -> Release | None:
    """One release whose group g is group g of ``by_group[g]`` (None: withheld there): the
    neighbours of a new tier may be different stored tiers for different groups."""
    present = [r for r in by_group if r is not None]
    if not present:
        return None
    if all(r is present[0] for r in by_group):
        return present[0]
    groups = len(by_group)
    first = present[0]
    eps = np.full(groups, np.nan)
    noisy = {n: np.full((groups, np.asarray(v, dtype=float).reshape(groups, -1).shape[1]),
                        np.nan) for n, v in first.noisy.items()}
    scales = {n: np.full(groups, np.nan) for n in first.scales}
    for g, rel in enumerate(by_group):
        if rel is None:
            continue
        eps[g] = _group_eps(rel, groups)[g]
        for n in noisy:
            noisy[n][g] = np.asarray(rel.noisy[n], dtype=float).reshape(groups, -1)[g]
            scales[n][g] = np.broadcast_to(
                np.asarray(rel.scales[n], dtype=float).reshape(-1), (groups,))[g]
    params = dict(first.params)
    params["epsilon_by_group"] = [None if not np.isfinite(e) else float(e) for e in eps]
    shaped = {n: v.reshape(np.asarray(first.noisy[n]).shape) for n, v in noisy.items()}
    return Release(statistic=first.statistic, value=first.value,
                   epsilon=float(np.nanmax(eps)), mechanism=first.mechanism,
                   sensitivity=first.sensitivity, params=params, noisy=shaped, scales=scales,
                   withheld=~np.isfinite(eps))


def neighbours(stored: Mapping[int, Release], tier: int, groups: int
               ) -> tuple[list[Release | None], list[Release | None]]:
    """Per group, the nearest stored less noisy and noisier tier that shows it (or None)."""
    less: list[Release | None] = [None] * groups
    more: list[Release | None] = [None] * groups
    for order, out in ((sorted((t for t in stored if t < tier), reverse=True), less),
                       (sorted(t for t in stored if t > tier), more)):
        for t in order:
            shown = np.isfinite(_group_eps(stored[t], groups))
            for g in np.flatnonzero(shown):
                if out[g] is None:
                    out[g] = stored[t]
    return less, more


def needs_truth(stored: Mapping[int, Release], tier: int, epsilon: Any) -> bool:
    """Whether drawing ``tier`` at ``epsilon`` reads the data: some group it shows has no
    less noisy stored tier showing it (a fresh draw, or sharpening a noisier one)."""
    eps = np.asarray(epsilon, dtype=float).reshape(-1)
    less, _ = neighbours(stored, tier, eps.size)
    return any(e > 0 and rel is None for e, rel in zip(eps, less, strict=True))


def withheld_like(rel: Release, groups: int) -> Release:
    """A release of ``rel``'s query that withholds every group: no value, no noise, ε 0 (a
    tier whose plan shows nothing, when the stored tiers show nothing either)."""
    out = relabel(rel, np.zeros(groups))

    def empty(v: Any) -> Any:
        return np.full(np.shape(v), np.nan) if np.ndim(v) else math.nan

    return dataclasses.replace(
        out, value=empty(rel.value), epsilon=0.0, expected_error=empty(rel.expected_error),
        ci_low=empty(rel.ci_low), ci_high=empty(rel.ci_high),
        expected_relative_error=empty(rel.expected_relative_error),
        noisy={n: np.full(np.shape(v), np.nan) for n, v in out.noisy.items()},
        withheld=np.ones(groups, dtype=bool))


def join(stored: Mapping[int, Release], tier: int, epsilon: Any, *,
         template: Release | None = None, rng: RngLike = None) -> Release:
    """The release of ``tier`` at ``epsilon`` (per group; 0/NaN: withheld) as a link of the
    chain of ``stored`` tiers of the same query, group by group (module docstring).

    ``template``: the release at ``epsilon`` drawn with ``no_noise()`` (its noisy values are
    the truth); required when ``needs_truth``, optional otherwise."""
    eps = np.asarray(epsilon, dtype=float).reshape(-1)
    groups = eps.size
    less, more = neighbours(stored, tier, groups)
    if template is None:
        base = combine([less[g] or more[g] for g in range(groups)])
        if base is None and stored and not np.any(np.nan_to_num(eps) > 0):
            return withheld_like(next(iter(stored.values())), groups)
        if base is None:
            raise NotNestableError("Nothing stored to draw this tier from: pass the truth.")
        template = relabel(base, eps)
    truth = template.noisy if needs_truth(stored, tier, eps) else None
    return insert(template, less=combine(less), more=combine(more), truth=truth,
                  rng=as_generator(rng))
