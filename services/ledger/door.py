"""The one door every release goes through: cache, budgets, tier store, one charge.

``release`` runs at most two transactions, and the engine never runs inside one:

1. a short write transaction: if the paying role already has this answer, log the delivery
   (user, time) and return it — done, one transaction. Otherwise read what the ledger holds
   for the plan (internal releases it is built from, stored tiers, spend, dataset loss);
2. outside any transaction: release the missing internal inputs (e.g. the DP size n̂), build
   the plan, refuse early if a limit cannot fit, draw the least noisy missing tier from the
   data and refine the noisier ones from it (nested tiers), publish the answer;
3. one write transaction, serialized per dataset (its row is locked first, then the role's
   budget row): a twin stored meanwhile is served instead (nothing charged); otherwise every
   limit is checked again by the accountant (dp_engine) and the new internal releases and
   tiers (tier store: dataset-level loss only), the served release, the role's charge and the
   dataset's loss are written together. A tier or internal release stored concurrently by
   another request means this answer was built on a discarded draw: nothing is written and
   the request starts again from 1, so only stored draws ever reach a user.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from dp_engine import accountant
from dp_engine.errors import BudgetExceededError, DPError
from services.identity.roles import Role
from services.ledger import db as ledger_db
from services.ledger.db import aware
from services.ledger.plan import InternalSpec, PlanSource, ReleaseKey, ReleasePlan, RngFactory
from services.ledger.records import (
    AccountStatus,
    BudgetStatus,
    DatasetStatus,
    Quote,
    Served,
    StoredRelease,
    UserStatus,
)
from services.ledger.sql import Statements, statements

if TYPE_CHECKING:
    from dp_engine.sound.release import Release
    from services.ledger.plan import Compute, Publish
    from services.ledger.store import Ledger

RACE_RETRIES = 4


class _Raced(Exception):
    """A tier or internal release this answer was built on was stored concurrently."""


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    raise TypeError(f"cannot store a {type(obj).__name__} in a release answer")


def dumps(answer: Mapping[str, Any]) -> str:
    """The one serialization of a stored answer or tier."""
    return json.dumps(dict(answer), default=_json_default, sort_keys=True, allow_nan=True)


def decode(payload: str) -> Release:
    from dp_engine.sound.release import Release

    return Release.from_dict(json.loads(payload))


def to_release(row: Mapping[str, Any]) -> StoredRelease:
    return StoredRelease(
        id=int(row["id"]), created_at=aware(row["created_at"]), user=row["user_name"],
        role=row["role"], dataset_id=row["dataset_id"], dataset_version=row["dataset_version"],
        query_key=row["query_key"], tier=int(row["tier"]), mechanism=row["mechanism"],
        epsilon=float(row["epsilon"]), answer=json.loads(row["answer_json"]),
        dataset_loss=float(row["dataset_loss"]), dp=bool(row["dp"]),
    )


def find_served(conn: Connection, key: ReleaseKey) -> Mapping[str, Any] | None:
    """The paying role's stored copy of this answer, or None."""
    return conn.execute(_sql(conn).served, {
        "p_version": key.dataset_version, "p_query_key": key.served_key,
        "p_tier": int(key.tier)}).mappings().first()


def _sql(conn: Connection) -> Statements:
    return statements(conn.dialect.name)


# -- spend and status --------------------------------------------------------------------------

@dataclass
class _Spend:
    """What a charge is checked against, read (or locked) in one transaction."""

    role: Role
    dataset_id: str
    user: str
    spent: float = 0.0
    period_start: datetime | None = None
    renews_at: datetime | None = None
    user_spent: float = 0.0
    loss: float = 0.0
    unsound_loss: float = 0.0
    at: datetime | None = None      # when the figures were read (after the locks)


def _period(ledger: Ledger, row: Mapping[str, Any] | None,
            at: datetime) -> tuple[float, datetime | None, datetime | None]:
    """(spent this period, period start, renewal) of a budget row (None: never charged)."""
    if row is None:
        return 0.0, None, None
    first = aware(row["first_charge_at"])
    start = ledger.policy.period_start(first, at)
    spent = float(row["spent"]) if aware(row["period_start"]) >= start else 0.0
    return spent, start, ledger.policy.next_renewal(first, at)


def _user_spent(conn: Connection, spend: _Spend) -> float:
    """The user's DP charges inside (role, dataset) since the period started."""
    assert spend.period_start is not None
    return float(conn.execute(_sql(conn).user_spent, {
        "p_dataset_id": spend.dataset_id, "p_role": spend.role.value, "p_user": spend.user,
        "p_since": spend.period_start}).scalar_one())


def read_spend(ledger: Ledger, conn: Connection, role: Role, dataset_id: str, user: str,
               at: datetime) -> _Spend:
    """Spend of (role, dataset), of the user inside it, and the dataset's loss: one statement,
    no locks."""
    spend = _Spend(Role(role), str(dataset_id), str(user))
    row = conn.execute(_sql(conn).spend, {"p_role": spend.role.value,
                                          "p_dataset_id": spend.dataset_id,
                                          "p_user": spend.user}).mappings().one()
    charged = row["first_charge_at"] is not None
    spend.spent, spend.period_start, spend.renews_at = _period(ledger, row if charged else None,
                                                               at)
    if charged and spend.period_start == aware(row["period_start"]):
        spend.user_spent = float(row["user_spent"])   # else: nothing charged this period
    spend.loss = float(row["loss"] or 0.0)
    spend.unsound_loss = float(row["unsound_loss"] or 0.0)
    return spend


def _lock_spend(ledger: Ledger, conn: Connection, role: Role, dataset_id: str,
                user: str) -> _Spend:
    """The same figures with the dataset row, then the budget row, locked (in that order).

    ``at`` is read once both locks are held, so every row this transaction writes is later
    than the budget's period start, whoever created the budget row while we waited.
    """
    sql = _sql(conn)
    spend = _Spend(Role(role), str(dataset_id), str(user))
    first = ledger_db.now()
    d = _lock_dataset(conn, spend.dataset_id, first)
    spend.loss, spend.unsound_loss = float(d["loss"]), float(d["unsound_loss"])
    b = conn.execute(sql.lock_budget, {
        "p_role": spend.role.value, "p_dataset_id": spend.dataset_id,
        "p_first_charge_at": first, "p_period_start": first, "p_spent": 0.0}).mappings().one()
    spend.at = at = max(ledger_db.now(), aware(b["first_charge_at"]))
    spend.spent, spend.period_start, spend.renews_at = _period(ledger, b, at)
    spend.user_spent = _user_spent(conn, spend)
    return spend


def _lock_dataset(conn: Connection, dataset_id: str, at: datetime) -> Mapping[str, Any]:
    """Lock (creating it) the dataset's row: every release on the dataset takes it first."""
    return conn.execute(_sql(conn).lock_dataset, {
        "p_dataset_id": dataset_id, "p_first_release_at": at, "p_loss": 0.0,
        "p_unsound_loss": 0.0}).mappings().one()


def status_of(ledger: Ledger, spend: _Spend) -> AccountStatus:
    policy = ledger.policy
    limit, user_limit, cap = (policy.limit(spend.role), policy.user_limit(spend.role),
                              policy.dataset_cap)
    return AccountStatus(
        role=BudgetStatus(spend.role.value, spend.dataset_id, limit, spend.spent,
                          accountant.remaining(spend.spent, limit), spend.renews_at),
        user=UserStatus(spend.user, spend.role.value, spend.dataset_id, user_limit,
                        spend.user_spent, accountant.remaining(spend.user_spent, user_limit)),
        dataset=DatasetStatus(spend.dataset_id, spend.loss, cap,
                              accountant.remaining(spend.loss, cap), spend.unsound_loss),
    )


def _limits(ledger: Ledger, spend: _Spend) -> tuple[accountant.Limit, accountant.Limit,
                                                    accountant.Limit | None]:
    """(role budget, user limit, dataset cap — None for the owner, whom it never refuses)."""
    policy, role, ds = ledger.policy, spend.role, spend.dataset_id
    renew = (f" The budget renews on {spend.renews_at:%Y-%m-%d %H:%M} UTC."
             if spend.renews_at else "")
    role_limit = accountant.Limit(f"the {role.label.lower()} role on dataset '{ds}'",
                                  policy.limit(role), spend.spent, renew)
    user_limit = accountant.Limit(f"user '{spend.user}' ({role.label.lower()}) on dataset "
                                  f"'{ds}'", policy.user_limit(role), spend.user_spent, renew)
    cap = None if role is Role.OWNER else accountant.Limit(
        f"dataset '{ds}' (its cap on the total privacy loss, whoever asks)",
        policy.dataset_cap, spend.loss, " Only the data owner can raise the cap.")
    return role_limit, user_limit, cap


def check(ledger: Ledger, spend: _Spend, cost: float, growth: float) -> None:
    """Every limit a release must fit, through the one accountant; raises BudgetExceededError."""
    role_limit, user_limit, cap = _limits(ledger, spend)
    accountant.require(cost, role_limit)
    accountant.require(cost, user_limit)
    if cap is not None:
        accountant.require(growth, cap)


# -- reading what a plan needs -----------------------------------------------------------------

@dataclass
class _Snapshot:
    spend: _Spend
    internals: dict[str, str] = field(default_factory=dict)   # store key -> payload
    tiers: dict[int, str] = field(default_factory=dict)        # tier -> payload


def _read_snapshot(ledger: Ledger, conn: Connection, key: ReleaseKey,
                   specs: Sequence[InternalSpec], user: str, at: datetime) -> _Snapshot:
    snap = _Snapshot(read_spend(ledger, conn, key.payer, key.dataset_id, user, at))
    for qk, tier, payload in conn.execute(_sql(conn).snapshot, {
            "p_version": key.dataset_version, "p_query_key": key.query_key,
            "p_internal": [s.store_key for s in specs]}):
        if qk == key.query_key:
            snap.tiers[int(tier)] = payload
        else:
            snap.internals[qk] = payload
    return snap


def deliver(conn: Connection, release_id: int, user: str, role: Role, channel: str,
             at: datetime) -> None:
    """Log that a stored answer was handed to ``user`` (free)."""
    conn.execute(_sql(conn).deliver, {
        "p_release_id": int(release_id), "p_delivered_at": at, "p_user_name": str(user),
        "p_role": Role(role).value, "p_channel": str(channel)[:32]})


def _cached(ledger: Ledger, row: Mapping[str, Any], spend: _Spend) -> Served:
    return Served(answer=json.loads(row["answer_json"]), release_id=int(row["id"]), cached=True,
                  charged=0.0, loss_added=0.0, status=status_of(ledger, spend))


def _open(ledger: Ledger, source: PlanSource, user: str, channel: str) -> Served | _Snapshot:
    """Transaction 1: a cached answer (delivery logged), or what a fresh one needs."""
    key, at = source.key, ledger_db.now()
    with ledger.db.tx(write=True) as conn:
        hit = find_served(conn, key)
        if hit is not None:
            deliver(conn, int(hit["id"]), user, key.payer, channel, at)
            spend = read_spend(ledger, conn, key.payer, key.dataset_id, user, at)
        else:
            return _read_snapshot(ledger, conn, key, source.inputs, user, at)
    return _cached(ledger, hit, spend)


# -- the door ----------------------------------------------------------------------------------

@dataclass
class _Draws:
    """What this request computed and must store: internal inputs, tiers, the answer."""

    plan: ReleasePlan
    internals: list[tuple[InternalSpec, Release]]
    tiers: dict[int, tuple[Release, int | None, float]]   # tier -> (release, refined_from, loss)
    answer: Mapping[str, Any] | None = None
    final: Release | None = None


def _inputs(ledger: Ledger, source: PlanSource, snap: _Snapshot,
            rng: RngFactory) -> tuple[dict[str, Release], list[tuple[InternalSpec, Release]]]:
    """Stored internal inputs, and the missing ones released now (checked against the cap)."""
    inputs: dict[str, Release] = {}
    fresh: list[tuple[InternalSpec, Release]] = []
    missing = [s for s in source.inputs if s.store_key not in snap.internals]
    if missing:
        _, _, cap = _limits(ledger, snap.spend)
        if cap is not None:
            accountant.require(math.fsum(s.epsilon for s in missing), cap)
    for spec in source.inputs:
        if spec.store_key in snap.internals:
            inputs[spec.key] = decode(snap.internals[spec.store_key])
        else:
            rel = spec.compute(spec.epsilon, rng())
            inputs[spec.key] = rel
            fresh.append((spec, rel))
    return inputs, fresh


def _draw_tiers(plan: ReleasePlan, snap: _Snapshot, compute: Compute,
                rng: RngFactory) -> tuple[dict[int, tuple[Release, int | None, float]], Release]:
    """Draw the least noisy missing tier from the data, refine the noisier ones from it."""
    drawn: dict[int, tuple[Release, int | None, float]] = {}
    parent: Release | None = None
    parent_tier: int | None = None
    for t in plan.chain:
        if t in snap.tiers:
            parent, parent_tier = None, t          # decoded only if a later tier needs it
            continue
        if parent is None and parent_tier is not None:
            parent = decode(snap.tiers[parent_tier])
        if parent is None:
            rel = compute(plan.epsilons[t], rng())
            loss = plan.epsilon(t) if plan.dp else float(rel.epsilon)
            drawn[t] = (rel, None, loss)
        else:
            assert plan.refine is not None
            rel = plan.refine(parent, plan.epsilons[t], rng())
            drawn[t] = (rel, parent_tier, 0.0)
        parent, parent_tier = rel, t
    served = plan.key.tier
    final = drawn[served][0] if served in drawn else decode(snap.tiers[served])
    return drawn, final


def release(ledger: Ledger, source: PlanSource, compute: Compute, publish: Publish, *,
            user: str, channel: str = "explore", rng: RngFactory) -> Served:
    """The answer to ``source`` for ``user`` (see the module docstring)."""
    for _ in range(RACE_RETRIES):
        opened = _retry_busy(ledger, lambda: _open(ledger, source, user, channel))
        if isinstance(opened, Served):
            return opened
        snap = opened
        inputs, fresh_inputs = _inputs(ledger, source, snap, rng)
        plan = source.build(inputs)
        if plan.key != source.key:
            raise ValueError("A plan must serve the key its source announced.")
        draws = _Draws(plan, fresh_inputs, {})
        growth = plan.loss_growth(snap.tiers.keys()) + _inputs_loss(draws)
        try:
            check(ledger, snap.spend, plan.cost, growth)
        except BudgetExceededError:
            if draws.internals:   # the refusal's figures depend on them: keep them on record
                try:
                    _retry_busy(ledger, lambda d=draws: _commit(ledger, source, d, user,
                                                                channel))
                except _Raced:
                    continue
            raise
        draws.tiers, draws.final = _draw_tiers(plan, snap, compute, rng)
        draws.answer = publish(plan, draws.final)
        try:
            served = _retry_busy(ledger, lambda d=draws: _commit(ledger, source, d, user,
                                                                 channel))
        except _Raced:
            continue
        assert served is not None
        return served
    raise DPError("The ledger was too busy to record this answer, so none was released and "
                  "nothing was charged. Please try again.")


def _inputs_loss(draws: _Draws) -> float:
    return math.fsum(spec.epsilon for spec, _ in draws.internals)


def _retry_busy(ledger: Ledger, fn):
    for attempt in range(10):
        try:
            return fn()
        except OperationalError as exc:  # SQLite busy beyond its timeout: try again
            if not ledger.db.retrying(attempt, exc):
                raise
    raise AssertionError("unreachable")


def _insert_tier(ledger: Ledger, conn: Connection, key: ReleaseKey, query_key: str, tier: int,
                 rel: Release, *, epsilon: float, loss: float, refined_from: int | None,
                 dp: bool, at: datetime) -> None:
    stored = conn.execute(_sql(conn).insert_tier, {
        "p_created_at": at, "p_dataset_id": key.dataset_id,
        "p_dataset_version": key.dataset_version, "p_query_key": query_key, "p_tier": int(tier),
        "p_mechanism": str(rel.mechanism)[:100], "p_epsilon": float(epsilon),
        "p_dataset_loss": float(loss), "p_refined_from": refined_from, "p_dp": dp,
        "p_payload_json": dumps(rel.to_dict())}).first()
    if stored is None:
        raise _Raced(query_key)


def _commit(ledger: Ledger, source: PlanSource, draws: _Draws, user: str,
            channel: str) -> Served | None:
    """Transaction 2: twin check, limits, then every row of this release (see module doc).

    With no answer in ``draws`` (a refusal whose figures depend on freshly released inputs)
    only the inputs are recorded, and None is returned.
    """
    key, plan = source.key, draws.plan
    refusal: BudgetExceededError | None = None
    with ledger.db.tx(write=True) as conn:
        spend = _lock_spend(ledger, conn, key.payer, key.dataset_id, user)
        at = spend.at
        assert at is not None
        twin = find_served(conn, key)
        if twin is not None:     # stored while we computed: serve it, charge nothing
            deliver(conn, int(twin["id"]), user, key.payer, channel, at)
            return _cached(ledger, twin, spend)
        for spec, rel in draws.internals:
            _insert_tier(ledger, conn, key, spec.store_key, 0, rel, epsilon=spec.epsilon,
                         loss=spec.epsilon, refined_from=None, dp=True, at=at)
        inputs_loss = _inputs_loss(draws)
        if draws.answer is None:
            _add_loss(conn, key.dataset_id, inputs_loss, 0.0)
            return None
        growth = inputs_loss + (math.fsum(loss for _, _, loss in draws.tiers.values())
                                if plan.dp else 0.0)
        try:
            check(ledger, spend, plan.cost, growth)
        except BudgetExceededError as exc:
            if not draws.internals:
                raise                # rolled back: nothing recorded
            refusal = exc            # keep the inputs the refusal's figures depend on
            _add_loss(conn, key.dataset_id, inputs_loss, 0.0)
        else:
            served_id = _record(ledger, conn, draws, spend, growth, user, at)
    if refusal is not None:
        raise refusal
    spend.spent += plan.cost
    spend.user_spent += plan.cost
    spend.loss += growth
    spend.unsound_loss += _unsound(draws)
    return Served(answer=draws.answer, release_id=served_id, cached=False, charged=plan.cost,
                  loss_added=growth, status=status_of(ledger, spend), plan=plan)


def _unsound(draws: _Draws) -> float:
    if draws.plan.dp:
        return 0.0
    return math.fsum(loss for _, _, loss in draws.tiers.values())


def _add_loss(conn: Connection, dataset_id: str, loss: float, unsound: float) -> None:
    conn.execute(_sql(conn).add_loss, {"p_dataset_id": dataset_id, "p_loss": float(loss),
                                       "p_unsound": float(unsound)})


def _record(ledger: Ledger, conn: Connection, draws: _Draws, spend: _Spend, growth: float,
            user: str, at: datetime) -> int:
    """Insert the tiers, the served release, the role's charge and the dataset's loss."""
    plan = draws.plan
    key = plan.key
    for t, (rel, refined_from, loss) in sorted(draws.tiers.items()):
        eps = plan.epsilon(t) if plan.dp else float(rel.epsilon)
        _insert_tier(ledger, conn, key, key.query_key, t, rel, epsilon=eps, loss=loss,
                     refined_from=refined_from, dp=plan.dp, at=at)
    assert draws.final is not None and draws.answer is not None
    recorded = plan.cost if plan.dp else float(draws.final.epsilon)
    sql = _sql(conn)
    served_id = conn.execute(sql.insert_served, {
        "p_created_at": at, "p_user_name": str(user), "p_role": key.payer.value,
        "p_dataset_id": key.dataset_id, "p_dataset_version": key.dataset_version,
        "p_query_key": key.served_key, "p_tier": int(key.tier),
        "p_mechanism": str(plan.mechanism)[:100], "p_epsilon": recorded,
        "p_dataset_loss": growth if plan.dp else _unsound(draws), "p_dp": plan.dp,
        "p_answer_json": dumps(draws.answer)}).scalar_one()
    conn.execute(sql.charge, {"p_role": key.payer.value, "p_dataset_id": key.dataset_id,
                              "p_spent": spend.spent + plan.cost,
                              "p_period_start": spend.period_start})
    _add_loss(conn, key.dataset_id, growth, _unsound(draws))
    return int(served_id)


# -- a quote, and internal releases on their own -----------------------------------------------

def quote(ledger: Ledger, source: PlanSource, user: str) -> Quote:
    """What ``release`` would do now, from one read transaction; computes and spends nothing."""
    (out,) = quotes(ledger, [source], user, return_exceptions=False)
    return out


def quotes(ledger: Ledger, sources: Sequence[PlanSource], user: str, *,
           return_exceptions: bool = True) -> list[Quote | Exception]:
    """``quote`` of each source, all read in one transaction (e.g. a page's preset labels).

    A plan that cannot be built is its exception in the list (``return_exceptions``), so one
    bad source does not hide the others' quotes."""
    at = ledger_db.now()
    with ledger.db.tx(write=False) as conn:
        reads = [(find_served(conn, s.key) is not None,
                  _read_snapshot(ledger, conn, s.key, s.inputs, user, at)) for s in sources]
    out: list[Quote | Exception] = []
    for source, (cached, snap) in zip(sources, reads, strict=True):
        try:
            out.append(_quote(ledger, source, cached, snap))
        except Exception as exc:    # noqa: BLE001 - handed back, as the caller asked
            if not return_exceptions:
                raise
            out.append(exc)
    return out


def _quote(ledger: Ledger, source: PlanSource, cached: bool, snap: _Snapshot) -> Quote:
    status = status_of(ledger, snap.spend)
    missing = tuple(s.key for s in source.inputs if s.store_key not in snap.internals)
    if cached or missing:
        loss = math.fsum(s.epsilon for s in source.inputs if s.key in missing)
        return Quote(cached, None, missing, 0.0, 0.0 if cached else loss, status, None)
    plan = source.build({s.key: decode(snap.internals[s.store_key]) for s in source.inputs})
    growth = plan.loss_growth(snap.tiers.keys())
    try:
        check(ledger, snap.spend, plan.cost, growth)
        refusal = None
    except BudgetExceededError as exc:
        refusal = str(exc)
    return Quote(False, plan, (), plan.cost, growth, status, refusal)


def release_internal(ledger: Ledger, spec: InternalSpec, *, dataset_id: str,
                     dataset_version: str, payer: Role, rng: RngFactory) -> Release:
    """An internal release on its own (cached per version; dataset-level loss only)."""
    key = ReleaseKey(str(dataset_id), str(dataset_version), spec.store_key, 0, Role(payer))
    with ledger.db.tx(write=False) as conn:
        payload = lookup_tier(conn, key.dataset_version, spec.store_key, 0)
        spend = read_spend(ledger, conn, key.payer, key.dataset_id, "", ledger_db.now())
    if payload is not None:
        return decode(payload)
    _, _, cap = _limits(ledger, spend)
    if cap is not None:
        accountant.require(spec.epsilon, cap)
    rel = spec.compute(spec.epsilon, rng())
    try:
        with ledger.db.tx(write=True) as conn:
            at = ledger_db.now()
            _lock_dataset(conn, key.dataset_id, at)
            _insert_tier(ledger, conn, key, spec.store_key, 0, rel, epsilon=spec.epsilon,
                         loss=spec.epsilon, refined_from=None, dp=True, at=at)
            _add_loss(conn, key.dataset_id, spec.epsilon, 0.0)
    except _Raced:   # stored meanwhile: ours was never shown, use the stored one
        with ledger.db.tx(write=False) as conn:
            payload = lookup_tier(conn, key.dataset_version, spec.store_key, 0)
        assert payload is not None
        return decode(payload)
    return rel


def lookup_tier(conn: Connection, dataset_version: str, query_key: str,
                tier: int) -> str | None:
    return conn.execute(_sql(conn).tier_payload, {
        "p_version": str(dataset_version), "p_query_key": str(query_key),
        "p_tier": int(tier)}).scalar_one_or_none()
