"""Central-DP synthetic copy by MST (McKenna, Miklau, Sheldon 2021): the pure parts.

Pure ε-DP against adding or removing one patient (at most k rows, the schema's bound):
- a Laplace count gives the synthetic table's size n̂;
- Laplace measurements of every 1-way marginal;
- the edges of a maximum spanning tree over the columns, chosen one by one by report noisy
  max with exponential noise (an ε-DP selection, permute-and-flip's equivalent): an edge's
  score is the L1 distance between its true 2-way marginal and the one the 1-way
  measurements predict (columns independent), which one patient moves by at most k;
- Laplace measurements of the chosen 2-way marginals.
The total ε is split in fixed public fractions (``FRACTIONS``). Estimating a model from the
measurements and sampling from it is post-processing (done by ``mbi`` in the services).

The domain comes from the public schema only: categories from its lists, numeric columns
binned on the public bounds and bin width (adjacent bins merged to at most
``MAX_NUMERIC_LEVELS``), every column with a last "missing" level; a value outside the list
reads as the column's catch-all level, or as missing. Never a bound or level from the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from dp_engine.errors import DPError
from dp_engine.schema import ColumnKind, ColumnRole, ColumnSpec, Schema
from dp_engine.sound.aggregates import bound_contributions

FRACTIONS: Mapping[str, float] = {"count": 0.04, "one_way": 0.32, "select": 0.32,
                                  "two_way": 0.32}
"""Public split of the total ε (MST's thirds, after a small share for the count)."""
MAX_NUMERIC_LEVELS = 32
"""Most bins a numeric column keeps (adjacent public bins merged; keeps pairs' tables small)."""
MISSING = "missing"
SYNTH_KINDS = frozenset({ColumnKind.NUMERIC, ColumnKind.ORDINAL, ColumnKind.CATEGORICAL,
                         ColumnKind.BOOLEAN})


@dataclass(frozen=True)
class Attribute:
    """One synthesized column: its levels (the last is "missing") from public metadata."""

    name: str
    labels: tuple[str, ...]
    categories: tuple[Any, ...] | None = None     # categorical levels (schema values)
    edges: tuple[float, ...] | None = None        # numeric bin edges (public bounds)

    @property
    def size(self) -> int:
        return len(self.labels)


@dataclass(frozen=True)
class SynthDomain:
    """The columns a synthetic copy holds, and why the others are left out."""

    attributes: tuple[Attribute, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(a.size for a in self.attributes)


def _numeric_edges(spec: ColumnSpec) -> tuple[float, ...]:
    edges = spec.bin_edges()
    lo, hi = spec.bounds()
    step = math.ceil((len(edges) - 1) / MAX_NUMERIC_LEVELS)
    merged = list(edges[::step])
    if merged[-1] < hi:
        merged.append(edges[-1])
    merged[-1] = max(hi, merged[-1])
    return tuple(float(e) for e in merged)


def attribute_of(spec: ColumnSpec) -> Attribute | str:
    """The column's public levels, or why it cannot be synthesized."""
    if spec.kind not in SYNTH_KINDS:
        return f"a {spec.kind.value.replace('_', ' ')} column is not synthesized"
    if spec.role is ColumnRole.DIRECT_IDENTIFIER:
        return "a direct identifier is never released"
    cats = spec.categories
    if spec.kind is ColumnKind.BOOLEAN and not cats:
        cats = (False, True)
    if cats:
        return Attribute(spec.name, (*(str(c) for c in cats), MISSING), categories=tuple(cats))
    if not spec.has_bounds:
        return "it has no public bounds: set them in the schema to synthesize it"
    edges = _numeric_edges(spec)
    labels = tuple(f"[{a:g}, {b:g})" for a, b in zip(edges[:-1], edges[1:], strict=True))
    return Attribute(spec.name, (*labels, MISSING), edges=edges)


def synth_domain(schema: Schema, columns: Sequence[str] | None = None) -> SynthDomain:
    """The synthetic copy's domain from the public schema (``columns``: a subset, in order)."""
    names = (list(dict.fromkeys(columns)) if columns is not None
             else [c.name for c in schema.columns])
    attrs, skipped = [], {}
    for name in names:
        if name == schema.patient_column:
            skipped[name] = "the patient column is never released"
            continue
        got = attribute_of(schema.column(name))
        if isinstance(got, str):
            skipped[name] = got
        else:
            attrs.append(got)
    if not attrs:
        raise DPError("No column can be synthesized: a synthetic copy needs numeric columns "
                      "with public bounds, or columns with a public category list.")
    return SynthDomain(tuple(attrs), skipped)


def encode_column(values: pd.Series, attr: Attribute, spec: ColumnSpec) -> np.ndarray:
    """Level index of every cell (missing: the last level)."""
    missing = attr.size - 1
    if attr.edges is not None:
        x = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        edges = np.asarray(attr.edges)
        idx = np.searchsorted(edges, np.clip(x, edges[0], edges[-1]), side="right") - 1
        idx = np.clip(idx, 0, missing - 1)
        return np.where(np.isfinite(x), idx, missing).astype(np.intp)
    assert attr.categories is not None
    exact = {c: i for i, c in enumerate(attr.categories)}      # 6.0 finds 6, as == does
    by_text = {str(c): i for i, c in enumerate(attr.categories)}
    other = by_text.get(str(spec.other_level), missing) if spec.other_level else missing
    codes, uniques = pd.factorize(values.astype(object), use_na_sentinel=True)

    def level(u: Any) -> int:
        try:
            return exact[u]
        except (KeyError, TypeError):
            return by_text.get(str(u), other)

    table = np.array([level(u) for u in uniques] + [missing], dtype=np.intp)
    return table[np.where(codes < 0, len(uniques), codes)]


def encode(frame: pd.DataFrame, schema: Schema, domain: SynthDomain) -> np.ndarray:
    """(rows, columns) level indices of the table on the synthetic domain."""
    if not len(frame):
        return np.zeros((0, len(domain.attributes)), dtype=np.intp)
    return np.column_stack([encode_column(frame[a.name], a, schema.column(a.name))
                            for a in domain.attributes])


def bounded_rows(frame: pd.DataFrame, schema: Schema, seed: int = 0) -> tuple[pd.DataFrame, int]:
    """(rows kept, k): at most k rows per patient, so one patient moves every count by ≤ k."""
    if schema.patient_column is None:
        return frame, 1
    k = schema.max_rows_per_patient
    keep = bound_contributions(frame[schema.patient_column], k, seed=seed)
    return frame.loc[keep], k


def decode(codes: np.ndarray, schema: Schema, domain: SynthDomain,
           rng: np.random.Generator) -> pd.DataFrame:
    """The synthetic table: categories as the schema lists them, numbers uniform in their bin."""
    out = {}
    for j, attr in enumerate(domain.attributes):
        c = np.asarray(codes[:, j], dtype=np.intp)
        missing = c == attr.size - 1
        if attr.edges is not None:
            edges = np.asarray(attr.edges)
            k = np.minimum(c, len(edges) - 2)
            x = rng.uniform(edges[k], edges[k + 1])
            out[attr.name] = pd.Series(np.where(missing, np.nan, x), dtype=float)
        else:
            out[attr.name] = _category_series(attr.categories or (), c, missing)
    return pd.DataFrame(out)


def _category_series(cats: Sequence[Any], c: np.ndarray, missing: np.ndarray) -> pd.Series:
    values = np.asarray(list(cats) + [None], dtype=object)[np.where(missing, len(cats), c)]
    if all(isinstance(v, bool | np.bool_) for v in cats):
        return pd.Series(values, dtype="boolean")
    if all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in cats):
        return pd.Series(values, dtype="Int64")
    return pd.Series(values, dtype=object)


def marginal(codes: np.ndarray, sizes: Sequence[int], clique: Sequence[int]) -> np.ndarray:
    """Counts of a marginal (flattened in C order over the clique's columns)."""
    shape = tuple(sizes[i] for i in clique)
    if not len(codes):
        return np.zeros(math.prod(shape))
    flat = np.ravel_multi_index(tuple(codes[:, i] for i in clique), shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(float)


# -- the privacy plan ----------------------------------------------------------------------

@dataclass(frozen=True)
class MSTPlan:
    """ε of each step and the noise scale of each measurement (public: ε, d and k only).

    ``count_scale``, ``one_way_scale``, ``two_way_scale``: Laplace scales; ``select_scale``:
    the exponential noise of report noisy max, whose scores move by ≤ k (ε = 2k / scale per
    round, non-monotone scores).
    """

    epsilon: float
    n_attributes: int
    contribution: int
    epsilons: Mapping[str, float]
    count_scale: float
    one_way_scale: float
    select_scale: float
    two_way_scale: float

    @property
    def n_edges(self) -> int:
        return self.n_attributes - 1


def plan_mst(epsilon: float, n_attributes: int, contribution: int = 1) -> MSTPlan:
    """Split ε in the public fractions (renormalized when one column leaves no edge)."""
    eps, d, k = float(epsilon), int(n_attributes), int(contribution)
    if not (math.isfinite(eps) and eps > 0):
        raise DPError(f"ε must be a positive number, not {epsilon!r}.")
    if d < 1 or k < 1:
        raise DPError("A synthetic copy needs at least one column and k ≥ 1.")
    steps = dict(FRACTIONS) if d > 1 else {"count": FRACTIONS["count"],
                                           "one_way": FRACTIONS["one_way"]}
    share = math.fsum(steps.values())
    step_eps = {s: eps * f / share for s, f in steps.items()}
    edges = d - 1

    def scale(step: str, rounds: int, factor: float = 1.0) -> float:
        return factor * k * rounds / step_eps[step] if step in step_eps else math.inf

    return MSTPlan(eps, d, k, step_eps, scale("count", 1), scale("one_way", d),
                   scale("select", edges, 2.0), scale("two_way", edges))


# -- the measurements ------------------------------------------------------------------------

def laplace(values: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    return np.asarray(values, dtype=float) + rng.laplace(0.0, scale, np.shape(values))


def report_noisy_max(scores: np.ndarray, scale: float, rng: np.random.Generator) -> int:
    """Index of the largest score plus Exponential(scale) noise (ε = 2Δ / scale)."""
    scores = np.asarray(scores, dtype=float)
    return int(np.argmax(scores + rng.exponential(scale, scores.shape)))


def simplex_total(noisy: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of a noisy count vector onto {x ≥ 0, Σx = total}."""
    v = np.asarray(noisy, dtype=float)
    total = max(float(total), 0.0)
    if v.size == 0 or total == 0:
        return np.zeros_like(v)
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - total
    rho = np.nonzero(u - css / np.arange(1, v.size + 1) > 0)[0][-1]
    return np.maximum(v - css[rho] / (rho + 1), 0.0)


@dataclass
class Measurements:
    """Everything MST releases: n̂, noisy 1-way and chosen 2-way marginals, the tree."""

    plan: MSTPlan
    domain: SynthDomain
    count: float
    one_way: list[np.ndarray]
    edges: list[tuple[int, int]]
    two_way: list[np.ndarray]

    @property
    def rows(self) -> int:
        """n̂: the noisy count, rounded, at least 1."""
        return max(1, int(round(self.count)))


def _find(parent: list[int], i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def select_edges(codes: np.ndarray, sizes: Sequence[int], one_way: Sequence[np.ndarray],
                 total: float, plan: MSTPlan, rng: np.random.Generator) -> list[tuple[int, int]]:
    """MST's tree: d − 1 rounds of report noisy max over the edges joining two components."""
    d = len(sizes)
    fitted = [simplex_total(m, total) for m in one_way]
    score = {}
    for a, b in combinations(range(d), 2):
        predicted = np.outer(fitted[a], fitted[b]).ravel() / max(total, 1.0)
        score[a, b] = float(np.abs(marginal(codes, sizes, (a, b)) - predicted).sum())
    parent = list(range(d))
    chosen: list[tuple[int, int]] = []
    for _ in range(plan.n_edges):
        candidates = [e for e in score if _find(parent, e[0]) != _find(parent, e[1])]
        pick = candidates[report_noisy_max(np.array([score[e] for e in candidates]),
                                           plan.select_scale, rng)]
        parent[_find(parent, pick[0])] = _find(parent, pick[1])
        chosen.append(pick)
    return chosen


def measure_mst(codes: np.ndarray, domain: SynthDomain, plan: MSTPlan,
                rng: np.random.Generator) -> Measurements:
    """Run every measurement of MST on the encoded table (the only steps that read it)."""
    sizes = domain.sizes
    if plan.n_attributes != len(sizes):
        raise ValueError("The plan was made for another number of columns.")
    count = float(laplace(np.array([len(codes)]), plan.count_scale, rng)[0])
    one_way = [laplace(marginal(codes, sizes, (j,)), plan.one_way_scale, rng)
               for j in range(len(sizes))]
    edges = (select_edges(codes, sizes, one_way, max(count, 1.0), plan, rng)
             if plan.n_edges else [])
    two_way = [laplace(marginal(codes, sizes, e), plan.two_way_scale, rng) for e in edges]
    return Measurements(plan, domain, count, one_way, edges, two_way)
