"""The public inputs a view's per-group ε is planned from: the dataset version's calibration.

Calibration releases (``InternalSpec``) are drawn once per dataset version and public from
then on. The reserved slice — the DP number of records and a pooled pilot of every numeric
column — is drawn when the owner confirms the schema (or on the version's first use), stated
on the Data and Ledger pages, added to the dataset's loss and charged to no role; a
grouping's sizes are priced by the first view that needs them (docs/accounting.md):

* ``sizes:<group>`` — the DP group sizes of a grouping column (``release_group_sizes`` at
  ``CALIBRATION_SIZE_EPSILON``), priced: drawn when a view first groups by it and charged to
  that view's role, public from then on; ``sizes:`` is the DP number of all records, part of
  the reserved slice;
* ``pilot:<column>|`` — a pooled DP histogram of every numeric column on its public
  ``pilot_edges`` at ``CALIBRATION_PILOT_EPSILON``: the column's shape (spread, quantiles),
  which every group of a view takes.

``view_scales`` turns them into the ``GroupScales`` of one view (post-processing only), and
``planned_tiers`` plans the three tiers' per-group ε from them (cached per process, and a
box plot's in the ledger for every worker, ``plan_store.py``: the plan is a pure function of
public inputs).
"""

from __future__ import annotations

import contextlib
import math
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
from dp_engine.sound.statistic import Statistic
from services.data.sources.query import AggregateQuery
from services.data.sources.resolve import aggregates
from services.ledger.plan import InternalSpec, epsilon_max
from services.views import plan_store
from services.views.statistics import group_keys as keys_of

SIZES = "sizes"
PILOT = "pilot"
_CACHE_SIZE = 256
_plans: dict[tuple, TierPlan] = {}
_plans_lock = threading.Lock()
_local = threading.local()
SHARED_PLANS = frozenset({Statistic.QUANTILES})
"""Plans kept in the ledger for every worker: a box plot's takes seconds; the others take
milliseconds, less than the read and the write that sharing them would cost."""


def size_key(group: str | None) -> str:
    return f"{SIZES}:{group or ''}"


def pilot_key(column: str, group: str | None = None) -> str:
    return f"{PILOT}:{column}|{group or ''}"


def has_pilot(spec: ColumnSpec) -> bool:
    """A pilot describes a numeric column's shape; category columns are spread evenly."""
    return spec.kind in NUMERIC_KINDS and spec.lower is not None and spec.upper is not None


def pilot_grid(spec: ColumnSpec) -> np.ndarray:
    lower, upper = spec.bounds()
    return pilot_edges(lower, upper, spec.bin_width)


def size_spec(dataset: Any, group: str | None) -> InternalSpec:
    """DP records per group of ``group`` (all records when None), charged to the dataset."""
    schema: Schema = dataset.schema
    group_keys = keys_of(schema.column(group) if group else None)

    def compute(eps, rng) -> Release:
        cells = aggregates(dataset, with_bound(AggregateQuery.count(schema, group), schema))
        return sound.release_group_sizes(cells, group_keys, epsilon=epsilon_max(eps), rng=rng)

    title = (f"the DP group sizes of {schema.column(group).display}" if group
             else "the DP number of records")
    return InternalSpec(size_key(group), sound.CALIBRATION_SIZE_EPSILON,
                        "discrete Laplace count per group", compute=compute,
                        priced=group is not None, title=title)


def pilot_spec(dataset: Any, column: str) -> InternalSpec:
    """The pooled DP pilot histogram of ``column`` on its public pilot grid."""
    schema: Schema = dataset.schema
    edges = pilot_grid(schema.column(column))

    def compute(eps, rng) -> Release:
        query = replace(AggregateQuery.histogram(schema, column, None), categories=None,
                        edges=tuple(float(e) for e in edges))
        cells = aggregates(dataset, with_bound(query, schema))
        return sound.release_pilot(cells, edges, None, epsilon=epsilon_max(eps), rng=rng)

    return InternalSpec(pilot_key(column), sound.CALIBRATION_PILOT_EPSILON,
                        "discrete Laplace histogram (pooled pilot)", compute=compute,
                        title=f"a DP pilot histogram of {schema.column(column).display}")


def calibration_specs(dataset: Any) -> list[InternalSpec]:
    """The reserved calibration of a dataset version, drawn once when it is confirmed or first
    used and charged to no role: the DP number of records and a pooled pilot of every numeric
    column with public bounds. (A grouping's sizes are priced by the first view that needs
    them: ``size_spec``.)"""
    schema: Schema = dataset.schema
    specs = [size_spec(dataset, None)]
    specs += [pilot_spec(dataset, c.name) for c in schema.columns
              if has_pilot(c) and c.queryable]
    return specs


def calibration_epsilon(dataset: Any) -> float:
    """The reserved slice of the dataset's cap its calibration takes (basic composition)."""
    return math.fsum(s.epsilon for s in calibration_specs(dataset))


def with_bound(query: AggregateQuery, schema: Schema) -> AggregateQuery:
    """The query with the schema's contribution bound (at most k rows per patient)."""
    return query.bounded(schema.patient_column, schema.contribution_bound)


def view_inputs(dataset: Any, x: str, group: str | None) -> tuple[InternalSpec, ...]:
    """The calibration releases one view is planned from."""
    specs = [size_spec(dataset, group)]
    if group:
        specs.append(size_spec(dataset, None))
    x_spec = dataset.schema.column(x)
    if has_pilot(x_spec):
        specs.append(pilot_spec(dataset, x))
    return tuple(specs)


def view_scales(inputs: Mapping[str, Release], x_spec: ColumnSpec, group: str | None
                ) -> GroupScales:
    """Public scales of one view: n̂ per group and, for numeric columns, the pooled shape.

    n̂ of the view's records: the group sizes times the share of records whose measured value
    is present, estimated from the pooled pilot's total over the DP size of all records (both
    DP; missing values are not counted by a view).
    """
    n_hat = sound.public_group_sizes(inputs[size_key(group)])
    pilot = inputs.get(pilot_key(x_spec.name))
    if pilot is None:
        lower, upper = ((float(x_spec.lower), float(x_spec.upper)) if has_pilot(x_spec)
                        else (0.0, 1.0))
        return sound.uniform_scales(n_hat, lower, upper)
    edges = pilot_grid(x_spec)
    counts = np.maximum(np.nan_to_num(np.asarray(pilot.value, dtype=float)), 0.0)
    everyone = inputs.get(size_key(None))
    total = float(np.sum(sound.public_group_sizes(everyone))) if everyone is not None \
        else float(n_hat.sum())
    coverage = min(1.0, float(counts.sum()) / total) if total > 0 else 1.0
    return sound.pooled_scales(pilot, edges, n_hat * coverage)


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
    elif statistic == Statistic.QUANTILES and getattr(_local, "known_only", False):
        raise PlanPending(f"plan of {cache_key[1]} not computed in this process yet")
    else:
        tiers = sound.plan_tiers(statistic, scales, **kwargs)   # the costly step
        if shared is not None:
            store.store_plan(shared, str(cache_key[0]), plan_store.encode(tiers))
    with _plans_lock:
        if len(_plans) >= _CACHE_SIZE:
            _plans.clear()
        _plans[key] = tiers
    return tiers
