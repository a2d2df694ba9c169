"""The public inputs a view's per-group ε is planned from: DP group sizes and a DP pilot.

Both are internal releases (``InternalSpec``): released once per dataset version the first
time a plan needs them, from the data source's aggregates, stored in the ledger's tier store
and charged to the dataset-level loss only, never to a role (docs/accuracy.md section 2):

* ``sizes:<group>`` — the DP group sizes of one grouping column (``release_group_sizes`` at
  ``group_size_epsilon`` for the contribution bound k); ``sizes:`` is the ungrouped DP size n̂;
* ``pilot:<column>|<group>`` — a DP histogram of a numeric column per group on the public
  ``pilot_edges`` at ``PILOT_EPSILON``: each group's shape (mean, variance, quantiles).

``view_scales`` turns them into the ``GroupScales`` of one view (post-processing only), and
``planned_tiers`` plans the three tiers' per-group ε from them (cached per process, and a
box plot's in the ledger for every worker, ``plan_store.py``: the plan is a pure function of
public inputs, and a quantile plan takes seconds).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from dp_engine import sound
from dp_engine.schema import NUMERIC_KINDS, ColumnSpec, Schema
from dp_engine.sound.pilot import GroupScales, pilot_edges
from dp_engine.sound.plan import TierPlan
from dp_engine.sound.release import Release
from services.data.sources.query import AggregateQuery
from services.data.sources.resolve import aggregates
from services.ledger.plan import InternalSpec, epsilon_max
from services.views import plan_store
from services.views.niced import niced

SIZES = "sizes"
PILOT = "pilot"
_CACHE_SIZE = 256
_plans: dict[tuple, TierPlan] = {}
_plans_lock = threading.Lock()
_local = threading.local()
SHARED_PLANS = frozenset({"quantiles"})
"""Plans kept in the ledger for every worker: a box plot's takes seconds; the others take
milliseconds, less than the read and the write that sharing them would cost."""


def size_key(group: str | None) -> str:
    return f"{SIZES}:{group or ''}"


def pilot_key(column: str, group: str | None) -> str:
    return f"{PILOT}:{column}|{group or ''}"


def has_pilot(spec: ColumnSpec) -> bool:
    """A pilot describes a numeric column's shape; category columns are spread evenly."""
    return spec.kind in NUMERIC_KINDS and spec.lower is not None and spec.upper is not None


def pilot_grid(spec: ColumnSpec) -> np.ndarray:
    lower, upper = spec.bounds()
    return pilot_edges(lower, upper, spec.bin_width)


def size_spec(dataset: Any, group: str | None, group_keys: list[str]) -> InternalSpec:
    """DP records per group of ``group`` (all records when None), charged to the dataset."""
    schema: Schema = dataset.schema
    k = schema.contribution_bound

    def compute(eps, rng) -> Release:
        cells = aggregates(dataset, with_bound(AggregateQuery.count(schema, group), schema))
        return sound.release_group_sizes(cells, group_keys, epsilon=epsilon_max(eps), rng=rng)

    return InternalSpec(size_key(group), sound.group_size_epsilon(contribution=k),
                        "discrete Laplace count per group", compute=compute)


def pilot_spec(dataset: Any, column: str, group: str | None,
               group_keys: list[str]) -> InternalSpec:
    """The DP pilot histogram of ``column`` per group on its public pilot grid."""
    schema: Schema = dataset.schema
    edges = pilot_grid(schema.column(column))

    def compute(eps, rng) -> Release:
        query = replace(AggregateQuery.histogram(schema, column, group), categories=None,
                        edges=tuple(float(e) for e in edges))
        cells = aggregates(dataset, with_bound(query, schema))
        return sound.release_pilot(cells, edges, group_keys, epsilon=epsilon_max(eps), rng=rng)

    return InternalSpec(pilot_key(column, group), sound.PILOT_EPSILON,
                        "discrete Laplace histogram per group (pilot)", compute=compute)


def with_bound(query: AggregateQuery, schema: Schema) -> AggregateQuery:
    """The query with the schema's contribution bound (at most k rows per patient)."""
    return query.bounded(schema.patient_column, schema.contribution_bound)


def view_scales(inputs: Mapping[str, Release], x_spec: ColumnSpec, group: str | None
                ) -> GroupScales:
    """Public scales of one view: n̂ per group and, for numeric columns, the pilot's shape.

    n̂ of the view's records: the group sizes times the share of records whose measured value
    is present, estimated from the pilot's total over the sizes' total (both DP; missing
    values are not counted by a view).
    """
    n_hat = sound.public_group_sizes(inputs[size_key(group)])
    pilot = inputs.get(pilot_key(x_spec.name, group))
    if pilot is None:
        lower, upper = ((float(x_spec.lower), float(x_spec.upper)) if has_pilot(x_spec)
                        else (0.0, 1.0))
        return sound.uniform_scales(n_hat, lower, upper)
    edges = pilot_grid(x_spec)
    counts = np.maximum(np.nan_to_num(np.asarray(pilot.value, dtype=float)), 0.0)
    total = float(n_hat.sum())
    coverage = min(1.0, float(counts.sum()) / total) if total > 0 else 1.0
    return sound.scales_from_pilot(pilot, edges, n_hat * coverage)


class PlanPending(RuntimeError):
    """A costly plan (quantiles) is not in this process's memo, and may not be computed now."""


@contextlib.contextmanager
def known_plans_only() -> Iterator[None]:
    """Within: a quantile plan this process has not computed raises ``PlanPending`` instead
    of being computed (about a second of CPU), e.g. for the cost labels of a cached screen."""
    before = getattr(_local, "known_only", False)
    _local.known_only = True
    try:
        yield
    finally:
        _local.known_only = before


def planned_tiers(cache_key: tuple, statistic: str, scales: GroupScales, *,
                  store: Any = None, **kwargs: Any) -> TierPlan:
    """``plan_tiers`` for these public scales, computed once per process and key; a costly
    one (``SHARED_PLANS``) once for every worker when a ``store`` (the ledger:
    ``stored_plan``/``store_plan``) is given: a plan another worker stored is read instead
    of computed again."""
    key = (*cache_key, statistic, scales.n_hat.tobytes(), scales.shape.tobytes(),
           repr(sorted(kwargs.items(), key=lambda kv: kv[0])))
    with _plans_lock:
        hit = _plans.get(key)
    if hit is not None:
        return hit
    shared = (plan_store.digest(key) if store is not None and statistic in SHARED_PLANS
              else None)
    stored = store.stored_plan(shared) if shared is not None else None
    if stored is not None:
        tiers = plan_store.decode(stored)
    elif statistic == "quantiles" and getattr(_local, "known_only", False):
        raise PlanPending(f"plan of {cache_key[1]} not computed in this process yet")
    else:
        tiers = niced(sound.plan_tiers, statistic, scales, **kwargs)   # the costly step
        if shared is not None:
            store.store_plan(shared, str(cache_key[0]), plan_store.encode(tiers))
    with _plans_lock:
        if len(_plans) >= _CACHE_SIZE:
            _plans.clear()
        _plans[key] = tiers
    return tiers


def nested_epsilons(tiers: TierPlan) -> dict[int, np.ndarray]:
    """ε per group of each tier (NaN: withheld), nested: a group a less noisy tier withholds
    is withheld at the noisier tiers too, since they refine its release. So the least noisy
    tier is the release every other one is made from, and what each role is charged is the
    largest ε of a group it is shown."""
    out: dict[int, np.ndarray] = {}
    shown = np.ones(tiers.tiers[0].epsilon.size, dtype=bool)
    for t in sorted(tiers.tiers):
        eps = tiers.tiers[t].epsilon
        shown = shown & np.isfinite(eps)
        out[t] = np.where(shown, eps, np.nan)
    return out
