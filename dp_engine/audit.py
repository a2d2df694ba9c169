"""Empirical privacy auditor: a statistical lower bound on a mechanism's real ε.

A mechanism M is (ε, δ)-DP when, for every pair of neighbouring datasets D, D' and every
output event S, P[M(D) ∈ S] ≤ e^ε · P[M(D') ∈ S] + δ. The auditor runs M many times on a
worst-case pair chosen by the caller, then:

1. splits the runs into a *selection* half and an *estimation* half;
2. on the selection half, searches a family of output events (thresholds ``y > t`` and
   ``y ≤ t``, likelihood-ratio-ordered sets of values when the output takes few values,
   and power-of-two divisibility events that expose floating-point holes in the style of
   Mironov 2012) in both directions, keeping the event with the largest conservative
   ε estimate;
3. on the estimation half, which the choice never saw, computes a Clopper–Pearson lower
   bound on P[M(D) ∈ S] and upper bound on P[M(D') ∈ S] (each one-sided at α/2, so both
   hold together with probability ≥ 1 − α by Bonferroni) and reports
   ε_lb = ln((p_lower − δ) / p'_upper), floored at 0.

Since the event is fixed before the estimation half is looked at, ε_lb exceeds the true ε
with probability at most α: a mechanism that honours its claim is flagged
(``violated``) with probability ≤ α, whatever the event search does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

Sampler = Callable[[np.random.Generator, int], np.ndarray]
Mask = Callable[[np.ndarray], np.ndarray]

_MAX_CELLS = 64  # outputs with at most this many distinct values also get value-set events
_MAX_EXACT_THRESHOLDS = 2048  # more distinct values than this: thresholds at sample quantiles
_N_QUANTILE_THRESHOLDS = 400
_BIT_EXPONENTS = np.arange(-60, 31)  # "y is a multiple of 2^j" for these j


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit; ``violated`` means ε_lb > claimed ε at confidence 1 − α."""

    epsilon_lower_bound: float
    claimed_epsilon: float
    delta: float
    violated: bool
    event: str
    n_runs: int
    p_hat: tuple[float, float]  # estimation-half frequencies of S: (numerator, denominator)
    confidence: float

    def summary(self) -> str:
        """One line for logs and reports: bound, claim, verdict, event."""
        verdict = "VIOLATED" if self.violated else "ok"
        return (
            f"eps_lb={self.epsilon_lower_bound:.3f} claimed={self.claimed_epsilon:g} "
            f"delta={self.delta:g} runs={self.n_runs} {verdict} | {self.event} "
            f"| p_hat=({self.p_hat[0]:.4g}, {self.p_hat[1]:.4g}) conf={self.confidence:g}"
        )


@dataclass(frozen=True)
class _Choice:
    score: float
    event: str
    mask: Mask
    forward: bool  # True: ratio P[M(D) ∈ S] / P[M(D') ∈ S]; False: the reverse


def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """Exact two-sided (1 − α) binomial interval; each end is a one-sided (1 − α/2) bound."""
    if n <= 0 or not 0 <= k <= n:
        raise ValueError("need 0 <= k <= n and n > 0")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    lower, upper = _cp_bounds(np.asarray([k]), n, alpha)
    return float(lower[0]), float(upper[0])


def _cp_bounds(k: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized Clopper–Pearson ends (lower, upper) for success counts ``k`` out of ``n``."""
    k = np.asarray(k, dtype=float)
    with np.errstate(invalid="ignore"):
        lower = np.where(k > 0, stats.beta.ppf(alpha / 2, k, n - k + 1), 0.0)
        upper = np.where(k < n, stats.beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    return lower, upper


def _epsilon_bound(
    k_num: np.ndarray, k_den: np.ndarray, n: int, alpha: float, delta: float
) -> np.ndarray:
    """ln((p_num_lower − δ) / p_den_upper), 0 where the numerator bound does not exceed δ."""
    p_low, _ = _cp_bounds(k_num, n, alpha)
    _, p_up = _cp_bounds(k_den, n, alpha)
    excess = p_low - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(excess > 0, np.log(np.maximum(excess, 1e-300) / p_up), 0.0)
    return np.maximum(eps, 0.0)


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _threshold_candidates(pooled: np.ndarray) -> np.ndarray:
    """Every distinct value when there are few; otherwise quantiles dense in both tails."""
    distinct = np.unique(pooled)
    if distinct.size <= _MAX_EXACT_THRESHOLDS:
        return distinct
    m = pooled.size
    tail = np.geomspace(1.0, m / 2, _N_QUANTILE_THRESHOLDS // 2)
    idx = np.concatenate([tail, m - 1 - tail, np.linspace(0, m - 1, _N_QUANTILE_THRESHOLDS)])
    idx = np.unique(np.clip(np.round(idx).astype(np.int64), 0, m - 1))
    return np.unique(np.sort(pooled)[idx])


def _threshold_events(a: np.ndarray, b: np.ndarray):
    """Counts on each half for ``y > t`` and ``y ≤ t`` over candidate thresholds t."""
    ts = _threshold_candidates(np.concatenate([a, b]))
    sa, sb = np.sort(a), np.sort(b)
    le_a = np.searchsorted(sa, ts, side="right")
    le_b = np.searchsorted(sb, ts, side="right")
    m = a.size
    counts_a = np.concatenate([m - le_a, le_a])
    counts_b = np.concatenate([m - le_b, le_b])

    def build(i: int) -> tuple[str, Mask]:
        t = float(ts[i % ts.size])
        if i < ts.size:
            return f"y > {_fmt(t)}", lambda y: y > t
        return f"y <= {_fmt(t)}", lambda y: y <= t

    return counts_a, counts_b, build


def _lowest_bit(y: np.ndarray) -> np.ndarray:
    """Exponent of the lowest set bit: y is a multiple of 2^j exactly when j ≤ this.

    +big for 0 (a multiple of everything), −big for non-finite values.
    """
    y = np.asarray(y, dtype=float)
    finite = np.isfinite(y)
    mant, exp = np.frexp(np.where(finite, y, 0.0))
    ints = np.abs(np.ldexp(mant, 53)).astype(np.int64)  # exact 53-bit integer mantissa
    low = ints & -ints
    zero = low == 0
    trailing = np.log2(np.where(zero, 1, low)).astype(np.int64)  # exact for powers of two
    out = exp.astype(np.int64) - 53 + trailing
    out[zero] = 1 << 40
    out[~finite] = -(1 << 40)
    return out


def _bit_events(a: np.ndarray, b: np.ndarray):
    """Counts for "y is (not) a multiple of 2^j": floating-point holes show up here."""
    exps = _BIT_EXPONENTS
    m = a.size
    ka = m - np.searchsorted(np.sort(_lowest_bit(a)), exps, side="left")
    kb = m - np.searchsorted(np.sort(_lowest_bit(b)), exps, side="left")
    counts_a = np.concatenate([ka, m - ka])
    counts_b = np.concatenate([kb, m - kb])

    def build(i: int) -> tuple[str, Mask]:
        j = int(exps[i % exps.size])
        inside = i < exps.size

        def mask(y: np.ndarray) -> np.ndarray:
            hit = _lowest_bit(y) >= j
            return hit if inside else ~hit

        word = "is" if inside else "is not"
        return f"y {word} a multiple of 2^{j}", mask

    return counts_a, counts_b, build


def _cell_events(a: np.ndarray, b: np.ndarray):
    """Value sets ordered by estimated likelihood ratio (prefixes, both orders)."""
    values = np.unique(np.concatenate([a, b]))
    if values.size > _MAX_CELLS:
        return None
    ca = np.bincount(np.searchsorted(values, a), minlength=values.size)
    cb = np.bincount(np.searchsorted(values, b), minlength=values.size)
    ratio = (ca + 0.5) / (cb + 0.5)
    orders = [np.argsort(-ratio, kind="stable"), np.argsort(ratio, kind="stable")]
    counts_a = np.concatenate([np.cumsum(ca[o]) for o in orders])
    counts_b = np.concatenate([np.cumsum(cb[o]) for o in orders])

    def build(i: int) -> tuple[str, Mask]:
        order = orders[i // values.size]
        chosen = np.sort(values[order[: i % values.size + 1]])
        text = ", ".join(_fmt(float(v)) for v in chosen)
        return f"y in {{{text}}}", lambda y: np.isin(y, chosen)

    return counts_a, counts_b, build


def _best_event(
    a: np.ndarray, b: np.ndarray, alpha: float, delta: float, bit_events: bool
) -> _Choice:
    """The event and direction with the largest conservative ε on the selection half."""
    families = [_threshold_events(a, b), _cell_events(a, b)]
    if bit_events and np.issubdtype(np.result_type(a, b), np.floating):
        families.append(_bit_events(a, b))
    best = _Choice(-1.0, "none", lambda y: np.zeros(np.shape(y), dtype=bool), True)
    m = a.size
    for family in families:
        if family is None:
            continue
        counts_a, counts_b, build = family
        for forward, (num, den) in ((True, (counts_a, counts_b)), (False, (counts_b, counts_a))):
            scores = _epsilon_bound(num, den, m, alpha, delta)
            i = int(np.argmax(scores))
            if scores[i] > best.score:
                event, mask = build(i)
                best = _Choice(float(scores[i]), event, mask, forward)
    return best


def looped(release: Callable[[np.random.Generator], Any]) -> Sampler:
    """A sampler calling ``release(rng)`` once per run, for mechanisms that are not vectorized.

    Each call's result is converted with ``np.asarray``; the runs are stacked on axis 0.
    """

    def sample(rng: np.random.Generator, n_runs: int) -> np.ndarray:
        return np.stack([np.asarray(release(rng), dtype=float) for _ in range(n_runs)])

    return sample


def _check_inputs(claimed_epsilon: float, delta: float, n_runs: int, alpha: float) -> None:
    if not (np.isfinite(claimed_epsilon) and claimed_epsilon >= 0):
        raise ValueError("claimed_epsilon must be finite and non-negative")
    if not 0.0 <= delta < 1.0:
        raise ValueError("delta must lie in [0, 1)")
    if n_runs < 4:
        raise ValueError("n_runs must be at least 4")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")


def _draw(sampler: Sampler, rng: np.random.Generator, n_runs: int) -> np.ndarray:
    out = np.asarray(sampler(rng, n_runs))
    if out.shape[0] != n_runs:
        raise ValueError(f"sampler returned {out.shape[0]} outputs, expected {n_runs}")
    return out


def _audit(
    outputs_d: np.ndarray,
    outputs_d_prime: np.ndarray,
    projections: Mapping[str, Callable[[np.ndarray], np.ndarray]],
    claimed_epsilon: float,
    delta: float,
    alpha: float,
    bit_events: bool,
) -> AuditResult:
    """Select (projection, event, direction) on one half, bound ε on the other."""
    n_runs = outputs_d.shape[0]
    half = n_runs // 2
    sel_d, est_d = outputs_d[:half], outputs_d[half : 2 * half]
    sel_p, est_p = outputs_d_prime[:half], outputs_d_prime[half : 2 * half]
    best: _Choice | None = None
    best_proj: Callable[[np.ndarray], np.ndarray] | None = None
    best_name = ""
    for name, proj in projections.items():
        a, b = np.ravel(proj(sel_d)), np.ravel(proj(sel_p))
        choice = _best_event(a, b, alpha, delta, bit_events)
        if best is None or choice.score > best.score:
            best, best_proj, best_name = choice, proj, name
    assert best is not None and best_proj is not None
    in_d = best.mask(np.ravel(best_proj(est_d)))
    in_p = best.mask(np.ravel(best_proj(est_p)))
    k_d, k_p = int(in_d.sum()), int(in_p.sum())
    k_num, k_den = (k_d, k_p) if best.forward else (k_p, k_d)
    eps_lb = float(_epsilon_bound(np.array([k_num]), np.array([k_den]), half, alpha, delta)[0])
    ratio = "P[M(D) in S] / P[M(D') in S]" if best.forward else "P[M(D') in S] / P[M(D) in S]"
    where = f" on {best_name}" if best_name else ""
    return AuditResult(
        epsilon_lower_bound=eps_lb,
        claimed_epsilon=float(claimed_epsilon),
        delta=float(delta),
        violated=eps_lb > claimed_epsilon,
        event=f"S = {{{best.event}}}{where}; ratio {ratio}",
        n_runs=n_runs,
        p_hat=(k_num / half, k_den / half),
        confidence=1.0 - alpha,
    )


def audit_scalar(
    sample_d: Sampler,
    sample_d_prime: Sampler,
    claimed_epsilon: float,
    *,
    delta: float = 0.0,
    n_runs: int = 200_000,
    alpha: float = 1e-3,
    rng: np.random.Generator,
    bit_events: bool = True,
) -> AuditResult:
    """Audit a mechanism with scalar output on the neighbouring pair (D, D').

    ``sample_d(rng, n)`` returns n independent outputs of M(D) as a 1-D array (likewise
    for D'). A mechanism meeting its claim is flagged with probability ≤ ``alpha``.
    ``bit_events=False`` drops the floating-point divisibility events, to audit the
    real-valued law of a textbook sampler whose float outputs are known to leak.
    """
    _check_inputs(claimed_epsilon, delta, n_runs, alpha)
    out_d = _draw(sample_d, rng, n_runs).reshape(n_runs)
    out_p = _draw(sample_d_prime, rng, n_runs).reshape(n_runs)
    return _audit(out_d, out_p, {"": lambda y: y}, claimed_epsilon, delta, alpha, bit_events)


def audit_vector(
    sample_d: Sampler,
    sample_d_prime: Sampler,
    claimed_epsilon: float,
    *,
    delta: float = 0.0,
    n_runs: int = 100_000,
    alpha: float = 1e-3,
    rng: np.random.Generator,
    statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]] | None = None,
    bit_events: bool = True,
) -> AuditResult:
    """Audit a mechanism whose output is a vector (a histogram, a set of quantiles).

    ``sample_d(rng, n)`` returns an (n, k) array. Events are searched over each coordinate
    and over the projection on the mean difference between D' and D estimated on the
    selection half (plus any caller ``statistics``: name -> function of the (m, k) array
    returning m scalars). The flagging probability for a correct mechanism is ≤ ``alpha``.
    """
    _check_inputs(claimed_epsilon, delta, n_runs, alpha)
    out_d = _draw(sample_d, rng, n_runs).reshape(n_runs, -1).astype(float, copy=False)
    out_p = _draw(sample_d_prime, rng, n_runs).reshape(n_runs, -1).astype(float, copy=False)
    half = n_runs // 2
    projections: dict[str, Callable[[np.ndarray], np.ndarray]] = {}
    for j in range(out_d.shape[1]):
        projections[f"coordinate {j}"] = lambda y, j=j: y[:, j]
    if out_d.shape[1] > 1:
        # Chosen from the selection half only, so it stays fixed for the estimation half.
        w = out_p[:half].mean(axis=0) - out_d[:half].mean(axis=0)
        if np.any(w != 0):
            projections["mean-difference projection"] = lambda y: y @ w
    projections.update(statistics or {})
    return _audit(out_d, out_p, projections, claimed_epsilon, delta, alpha, bit_events)
