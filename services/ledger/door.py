"""The one door every release goes through: cache, budgets, tier chains, one charge.

``release`` answers one or several requests (an Explore screen, a published page) all or
nothing, in at most two transactions, and the engine never runs inside one:

1. a write transaction: if the paying role already holds every answer, log the deliveries
   and return them — done. Otherwise read what the ledger holds for the requests (their
   stored tiers, the calibration they are planned from, spends, the owner's budget settings);
2. outside any transaction: plan each request, draw each missing tier as a link of its
   query's chain (refined, sharpened, bridged or fresh: ``chain.py``; the data is read only
   for a fresh draw or a sharpening), publish each answer;
3. one write transaction, serialized per dataset (its row locked first, then the budgets'):
   every limit is checked again by the accountant (dp_engine) for the requests together, and
   the new tiers, the disclosures, the served answers, the charges and the dataset's loss are
   written together. A twin answer or tier stored meanwhile means this call was built on a
   stale read: nothing is written and it starts again from 1.

Who pays: the paying role of each request is charged its tier's ε (the largest group's);
disclosing a tier (serving it to a role other than the owner) grows the dataset's loss by at
most that (``chain.py``); the owner's own answers are charged to the owner and are not a
disclosure. A grouping's DP sizes, the first time a request needs them, are charged to that
request's role too (``InternalSpec.priced``) — only when the caller asks for it
(``price=True``; otherwise ``PricingNeeded`` says what it would cost); the dataset's
reserved calibration (``calibrate``) is charged to no role.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import OperationalError

from dp_engine import accountant
from dp_engine.errors import BudgetExceededError, DPError
from services.identity.roles import Role
from services.ledger import chain, policy_store
from services.ledger import db as ledger_db
from services.ledger.db import aware
from services.ledger.models import tiers as _TIERS
from services.ledger.plan import (
    InternalSpec,
    PlanSource,
    ReleaseKey,
    ReleasePlan,
    RngFactory,
    epsilon_max,
)
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
    from services.ledger.policy import BudgetPolicy
    from services.ledger.store import Ledger

RACE_RETRIES = 4


class _Raced(Exception):
    """A tier, calibration release or answer this call was built on changed meanwhile."""


class PricingNeeded(DPError):
    """A request needs calibration releases charged to its role (a grouping's DP sizes)."""

    def __init__(self, specs: Sequence[InternalSpec]) -> None:
        self.specs = tuple(specs)
        self.epsilon = math.fsum(s.epsilon for s in specs)
        names = ", ".join(s.title or s.key for s in specs)
        super().__init__(f"Pricing this view first releases {names} (ε {self.epsilon:.3g} "
                         "from your budget, public from then on); then its exact price shows.")


@dataclass(frozen=True)
class Ask:
    """One request at the door: what to answer (a plan source), how to read the data
    (``compute``: ε, rng → Release) and how to make the payer's public answer."""

    source: PlanSource
    compute: Compute
    publish: Publish
    channel: str = "explore"


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


# -- spend, policy and status ------------------------------------------------------------------

@dataclass
class _Spend:
    """What a charge is checked against, read (or locked) in one transaction."""

    role: Role
    dataset_id: str
    user: str
    policy: BudgetPolicy
    spent: float = 0.0
    period_start: datetime | None = None
    renews_at: datetime | None = None
    user_spent: float = 0.0
    loss: float = 0.0
    unsound_loss: float = 0.0
    at: datetime | None = None      # when the figures were read (after the locks)


def _period(policy: BudgetPolicy, row: Mapping[str, Any] | None,
            at: datetime) -> tuple[float, datetime | None, datetime | None]:
    """(spent this period, period start, renewal) of a budget row (None: never charged)."""
    if row is None:
        return 0.0, None, None
    first = aware(row["first_charge_at"])
    start = policy.period_start(first, at)
    spent = float(row["spent"]) if aware(row["period_start"]) >= start else 0.0
    return spent, start, policy.next_renewal(first, at)


def policy_of(ledger: Ledger, conn: Connection, dataset_id: str) -> BudgetPolicy:
    """The defaults with the owner's settings for ``dataset_id`` (read in ``conn``)."""
    return ledger.policy.with_overrides(policy_store.overrides(conn, dataset_id))


def read_spend(ledger: Ledger, conn: Connection, role: Role, dataset_id: str, user: str,
               at: datetime) -> _Spend:
    """Spend of (role, dataset), of the user inside it, the dataset's loss and the settings in
    force: two statements, no locks."""
    spend = _Spend(Role(role), str(dataset_id), str(user),
                   policy_of(ledger, conn, str(dataset_id)))
    row = conn.execute(_sql(conn).spend, {"p_role": spend.role.value,
                                          "p_dataset_id": spend.dataset_id,
                                          "p_user": spend.user}).mappings().one()
    charged = row["first_charge_at"] is not None
    spend.spent, spend.period_start, spend.renews_at = _period(
        spend.policy, row if charged else None, at)
    if charged and spend.period_start == aware(row["period_start"]):
        spend.user_spent = float(row["user_spent"])   # else: nothing charged this period
    spend.loss = float(row["loss"] or 0.0)
    spend.unsound_loss = float(row["unsound_loss"] or 0.0)
    return spend


def _user_spent(conn: Connection, spend: _Spend) -> float:
    assert spend.period_start is not None
    return float(conn.execute(_sql(conn).user_spent, {
        "p_dataset_id": spend.dataset_id, "p_role": spend.role.value, "p_user": spend.user,
        "p_since": spend.period_start}).scalar_one())


def _lock_dataset(conn: Connection, dataset_id: str, at: datetime) -> Mapping[str, Any]:
    """Lock (creating it) the dataset's row: every release on the dataset takes it first."""
    return conn.execute(_sql(conn).lock_dataset, {
        "p_dataset_id": dataset_id, "p_first_release_at": at, "p_loss": 0.0,
        "p_unsound_loss": 0.0}).mappings().one()


def _lock_spend(ledger: Ledger, conn: Connection, role: Role, dataset_id: str, user: str,
                dataset_row: Mapping[str, Any]) -> _Spend:
    """The figures with the budget row locked (the dataset's row is locked before)."""
    spend = _Spend(Role(role), str(dataset_id), str(user),
                   policy_of(ledger, conn, str(dataset_id)))
    spend.loss, spend.unsound_loss = float(dataset_row["loss"]), float(dataset_row["unsound_loss"])
    first = ledger_db.now()
    b = conn.execute(_sql(conn).lock_budget, {
        "p_role": spend.role.value, "p_dataset_id": spend.dataset_id,
        "p_first_charge_at": first, "p_period_start": first, "p_spent": 0.0}).mappings().one()
    spend.at = at = max(ledger_db.now(), aware(b["first_charge_at"]))
    spend.spent, spend.period_start, spend.renews_at = _period(spend.policy, b, at)
    spend.user_spent = _user_spent(conn, spend)
    return spend


def status_of(spend: _Spend) -> AccountStatus:
    policy = spend.policy
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


def _limits(spend: _Spend) -> tuple[accountant.Limit, accountant.Limit,
                                    accountant.Limit | None]:
    """(role budget, user limit, dataset cap — None for the owner, whom it never refuses)."""
    policy, role, ds = spend.policy, spend.role, spend.dataset_id
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


def check(spend: _Spend, cost: float, growth: float) -> None:
    """Every limit a charge must fit, through the one accountant; raises BudgetExceededError."""
    role_limit, user_limit, cap = _limits(spend)
    accountant.require(cost, role_limit)
    accountant.require(cost, user_limit)
    if cap is not None:
        accountant.require(growth, cap)


# -- reading what the requests need -----------------------------------------------------------

def _stored_tiers(conn: Connection, version: str, query_key: str) -> dict[int, chain.StoredTier]:
    t = _TIERS.c
    rows = conn.execute(select(t.tier, t.epsilons_json, t.epsilon, t.disclosed_at, t.dp,
                               t.payload_json).where(
        t.dataset_version == version, t.query_key == query_key)).all()
    out = {}
    for r in rows:
        eps = tuple(json.loads(r.epsilons_json)) if r.epsilons_json else (float(r.epsilon),)
        out[int(r.tier)] = chain.StoredTier(int(r.tier), eps, r.disclosed_at is not None,
                                            bool(r.dp), r.payload_json)
    return out


def _internals(conn: Connection, version: str, specs: Sequence[InternalSpec]) -> dict[str, str]:
    if not specs:
        return {}
    t = _TIERS.c
    rows = conn.execute(select(t.query_key, t.payload_json).where(
        t.dataset_version == version, t.query_key.in_([s.store_key for s in specs]),
        t.tier == 0)).all()
    return {qk: payload for qk, payload in rows}


@dataclass
class _Read:
    """What transaction 1 read for one request."""

    served: Mapping[str, Any] | None
    tiers: dict[int, chain.StoredTier]
    internals: dict[str, str]


def _read(conn: Connection, source: PlanSource) -> _Read:
    key = source.key
    return _Read(find_served(conn, key), _stored_tiers(conn, key.dataset_version,
                                                       key.query_key),
                 _internals(conn, key.dataset_version, source.inputs))


def deliver(conn: Connection, release_id: int, user: str, role: Role, channel: str,
            at: datetime) -> None:
    """Log that a stored answer was handed to ``user`` (free)."""
    conn.execute(_sql(conn).deliver, {
        "p_release_id": int(release_id), "p_delivered_at": at, "p_user_name": str(user),
        "p_role": Role(role).value, "p_channel": str(channel)[:32]})


def _cached(row: Mapping[str, Any], spend: _Spend) -> Served:
    return Served(answer=json.loads(row["answer_json"]), release_id=int(row["id"]), cached=True,
                  charged=0.0, loss_added=0.0, status=status_of(spend), stored=to_release(row))


# -- the work done outside transactions --------------------------------------------------------

@dataclass
class _Draw:
    """What one request computed and must store."""

    ask: Ask
    plan: ReleasePlan | None = None
    priced: list[tuple[InternalSpec, Release]] = field(default_factory=list)
    reserved: list[tuple[InternalSpec, Release]] = field(default_factory=list)
    new_tier: Release | None = None        # drawn by this call (None: it was stored)
    how: str = ""
    parent: int | None = None
    epsilons: tuple[float, ...] = ()
    disclose: bool = False                  # this call discloses the tier
    growth: float = 0.0                     # dataset loss grown by the tier's disclosure
    answer: Mapping[str, Any] | None = None
    cached: Served | None = None
    seen: frozenset[int] = frozenset()      # tiers of its query stored when it was read

    @property
    def key(self) -> ReleaseKey:
        return self.ask.source.key

    @property
    def cost(self) -> float:
        charged = self.plan.cost if self.plan is not None else 0.0
        return charged + math.fsum(s.epsilon for s, _ in self.priced)

    @property
    def loss(self) -> float:
        return self.growth + math.fsum(s.epsilon for s, _ in self.priced + self.reserved)


def _inputs(draw: _Draw, read: _Read, rng: RngFactory, price: bool) -> dict[str, Release]:
    """Calibration the plan is built from: stored, or drawn now (reserved: charged to no
    role; priced: charged to the payer, only when ``price``)."""
    inputs: dict[str, Release] = {}
    missing_priced = [s for s in draw.ask.source.inputs
                      if s.priced and s.store_key not in read.internals]
    if missing_priced and not price:
        raise PricingNeeded(missing_priced)
    for spec in draw.ask.source.inputs:
        if spec.store_key in read.internals:
            inputs[spec.key] = decode(read.internals[spec.store_key])
            continue
        rel = spec.compute(spec.epsilon, rng())
        inputs[spec.key] = rel
        (draw.priced if spec.priced else draw.reserved).append((spec, rel))
    return inputs


def _prepare(draw: _Draw, read: _Read, working: dict[str, dict[int, chain.StoredTier]],
             rng: RngFactory, price: bool) -> None:
    """Plan, draw (or reuse) the tier, decide the disclosure and publish: no transaction."""
    source, key = draw.ask.source, draw.key
    draw.plan = plan = source.build(_inputs(draw, read, rng, price))
    if plan.key != key:
        raise ValueError("A plan must serve the key its source announced.")
    chained = plan.nestable and plan.dp
    tiers = working.setdefault(key.query_key, dict(read.tiers))
    draw.seen = frozenset(read.tiers)
    eps = chain.group_eps(plan.epsilons[key.tier])
    draw.epsilons = eps
    stored = tiers.get(key.tier)
    if stored is None:
        if chained:          # joined to the query's chain of tiers
            rel = chain.draw(tiers, key.tier, eps, draw.ask.compute, rng(), plan.join)
            draw.how, draw.parent = chain.how_drawn(tiers, key.tier)
        else:                # paper mode, studio runs: a draw of its own
            rel = draw.ask.compute(plan.epsilons[key.tier], rng())
            draw.how = chain.INDEPENDENT
        draw.new_tier = rel
        stored = chain.StoredTier(key.tier, eps, False, plan.dp, "", rel)
        tiers[key.tier] = stored
    else:
        rel = stored.release()
    if plan.discloses() and not stored.disclosed:
        others = {t: s for t, s in tiers.items() if t != key.tier}
        draw.growth = (chain.disclosure_growth(others, eps) if chained
                       else max(eps, default=0.0))
        draw.disclose = True
        stored.disclosed = True
    draw.answer = draw.ask.publish(plan, rel)


# -- the door ----------------------------------------------------------------------------------

def release(ledger: Ledger, asks: Sequence[Ask], *, user: str, rng: RngFactory,
            price: bool = False) -> list[Served]:
    """The answers to ``asks`` for ``user``, all or nothing (see the module docstring).

    Raises BudgetExceededError (nothing charged, no answer) when a limit cannot fit, and
    ``PricingNeeded`` when a grouping's sizes are not public yet and ``price`` is false."""
    if not asks:
        return []
    for _ in range(RACE_RETRIES):
        opened = _retry_busy(ledger, lambda: _open(ledger, asks, user))
        if isinstance(opened, list):
            return opened
        reads, spends = opened
        draws = [_Draw(a) for a in asks]
        working: dict[str, dict[int, chain.StoredTier]] = {}
        for draw, read in zip(draws, reads, strict=True):
            if read.served is not None:
                draw.cached = _cached(read.served, spends[(draw.key.payer, draw.key.dataset_id)])
                continue
            _check_early(draws, spends, draw, read, rng, price, working)
        try:
            return _retry_busy(ledger, lambda d=draws: _commit(ledger, d, user))
        except _Raced:
            continue
    raise DPError("The ledger was too busy to record this answer, so none was released and "
                  "nothing was charged. Please try again.")


def _check_early(draws: list[_Draw], spends, draw: _Draw, read: _Read, rng: RngFactory,
                 price: bool, working) -> None:
    """Refuse before computing what cannot fit (the figures of this call so far)."""
    _prepare(draw, read, working, rng, price)
    payer, ds = draw.key.payer, draw.key.dataset_id
    mine = [d for d in draws if d.plan is not None or d.priced]
    cost = math.fsum(d.cost for d in mine if (d.key.payer, d.key.dataset_id) == (payer, ds))
    growth = math.fsum(d.loss for d in mine if d.key.dataset_id == ds)
    check(spends[(payer, ds)], cost, growth)


def _open(ledger: Ledger, asks: Sequence[Ask], user: str):
    """Transaction 1: every answer cached (deliveries logged), or what fresh ones need."""
    at = ledger_db.now()
    with ledger.db.tx(write=True) as conn:
        reads = [_read(conn, a.source) for a in asks]
        spends = {(k.payer, k.dataset_id): read_spend(ledger, conn, k.payer, k.dataset_id,
                                                      user, at)
                  for k in (a.source.key for a in asks)}
        if all(r.served is not None for r in reads):
            out = []
            for ask, r in zip(asks, reads, strict=True):
                assert r.served is not None
                deliver(conn, int(r.served["id"]), user, ask.source.key.payer, ask.channel, at)
                out.append(_cached(r.served, spends[(ask.source.key.payer,
                                                     ask.source.key.dataset_id)]))
            return out
    return reads, spends


def _retry_busy(ledger: Ledger, fn):
    for attempt in range(10):
        try:
            return fn()
        except OperationalError as exc:  # SQLite busy beyond its timeout: try again
            if not ledger.db.retrying(attempt, exc):
                raise
    raise AssertionError("unreachable")


def _insert_tier(conn: Connection, key: ReleaseKey, query_key: str, tier: int, rel: Release, *,
                 epsilon: float, epsilons: tuple[float, ...], loss: float, parent: int | None,
                 how: str, dp: bool, disclosed: bool, at: datetime) -> int:
    stored = conn.execute(_sql(conn).insert_tier, {
        "p_created_at": at, "p_dataset_id": key.dataset_id,
        "p_dataset_version": key.dataset_version, "p_query_key": query_key, "p_tier": int(tier),
        "p_mechanism": str(rel.mechanism)[:100], "p_epsilon": float(epsilon),
        "p_dataset_loss": float(loss), "p_refined_from": parent, "p_dp": dp,
        "p_payload_json": dumps(rel.to_dict()), "p_epsilons_json": chain.eps_json(epsilons),
        "p_drawn": how, "p_disclosed_at": at if disclosed else None}).first()
    if stored is None:
        raise _Raced(query_key)
    return int(stored[0])


def _commit(ledger: Ledger, draws: list[_Draw], user: str) -> list[Served]:
    """Transaction 2: locks, stale-read checks, limits, then every row of this call."""
    at_first = ledger_db.now()
    with ledger.db.tx(write=True) as conn:
        rows = {ds: _lock_dataset(conn, ds, at_first)
                for ds in sorted({d.key.dataset_id for d in draws})}
        spends = {pd: _lock_spend(ledger, conn, pd[0], pd[1], user, rows[pd[1]])
                  for pd in sorted({(d.key.payer, d.key.dataset_id) for d in draws},
                                   key=lambda x: (x[1], x[0].value))}
        at = max(s.at for s in spends.values() if s.at is not None)
        fresh = [d for d in draws if d.cached is None]
        for d in fresh:
            if find_served(conn, d.key) is not None:
                raise _Raced(d.key.served_key)
        _check_tiers_unchanged(conn, fresh)
        for (payer, ds), spend in spends.items():
            mine = [d for d in fresh if (d.key.payer, d.key.dataset_id) == (payer, ds)]
            loss = math.fsum(d.loss for d in fresh if d.key.dataset_id == ds)
            check(spend, math.fsum(d.cost for d in mine), loss)
        out: list[Served] = []
        for d in draws:
            if d.cached is not None:
                deliver(conn, d.cached.release_id, user, d.key.payer, d.ask.channel, at)
                out.append(d.cached)
                continue
            out.append(_record(conn, d, spends[(d.key.payer, d.key.dataset_id)], user, at))
        for ds in rows:
            fresh_ds = [d for d in fresh if d.key.dataset_id == ds]
            sound = math.fsum(d.loss for d in fresh_ds if d.plan is None or d.plan.dp)
            unsound = math.fsum(d.new_tier.epsilon for d in fresh_ds if d.plan is not None
                                and not d.plan.dp and d.new_tier is not None)
            if sound or unsound:
                _add_loss(conn, ds, sound, unsound)
    return [_with_status(s, spends, d) for s, d in zip(out, draws, strict=True)]


def _check_tiers_unchanged(conn: Connection, draws: list[_Draw]) -> None:
    """The stored tiers of each query are still those the draws were made from."""
    seen: set[tuple[str, str]] = set()
    for d in draws:
        if d.plan is None:
            continue
        k = (d.key.dataset_version, d.key.query_key)
        if k in seen:
            continue
        seen.add(k)
        now_stored = _stored_tiers(conn, *k)
        if set(now_stored) != set(d.seen):      # a tier joined the chain meanwhile
            raise _Raced(k[1])
        disclosed_here = {x.key.tier for x in draws if x.disclose
                          and (x.key.dataset_version, x.key.query_key) == k}
        if any(now_stored[t].disclosed for t in disclosed_here if t in now_stored):
            raise _Raced(k[1])


def _record(conn: Connection, d: _Draw, spend: _Spend, user: str, at: datetime) -> Served:
    """Insert the calibration, the tier (or its disclosure), the served answer and charge."""
    key = d.key
    sql = _sql(conn)
    for spec, rel in d.reserved + d.priced:
        _insert_tier(conn, key, spec.store_key, 0, rel, epsilon=spec.epsilon,
                     epsilons=(spec.epsilon,), loss=spec.epsilon, parent=None,
                     how=chain.FRESH, dp=True, disclosed=True, at=at)
    for spec, rel in d.priced:       # the payer receives the sizes it paid for
        _insert_served(conn, ReleaseKey(key.dataset_id, key.dataset_version, spec.store_key, 0,
                                        key.payer), user, spec.mechanism, spec.epsilon,
                       spec.epsilon, True, internal_answer(spec, rel), at)
    assert d.plan is not None and d.answer is not None
    plan = d.plan
    if d.new_tier is not None:
        eps = plan.epsilon() if plan.dp else float(d.new_tier.epsilon)
        _insert_tier(conn, key, key.query_key, key.tier, d.new_tier, epsilon=eps,
                     epsilons=d.epsilons, loss=d.growth if plan.dp else float(d.new_tier.epsilon),
                     parent=d.parent, how=d.how, dp=plan.dp,
                     disclosed=d.disclose or not plan.dp, at=at)
    elif d.disclose:
        t = _TIERS.c
        conn.execute(update(_TIERS).where(
            t.dataset_version == key.dataset_version, t.query_key == key.query_key,
            t.tier == key.tier).values(disclosed_at=at, dataset_loss=t.dataset_loss + d.growth))
    recorded = plan.cost if plan.dp else float(d.new_tier.epsilon if d.new_tier else 0.0)
    served_id = _insert_served(conn, key, user, plan.mechanism, recorded,
                               d.growth if plan.dp else recorded, plan.dp, d.answer, at)
    cost = d.cost
    if cost:
        spend.spent += cost
        spend.user_spent += cost
        conn.execute(sql.charge, {"p_role": key.payer.value, "p_dataset_id": key.dataset_id,
                                  "p_spent": spend.spent, "p_period_start": spend.period_start})
    spend.loss += d.loss if plan.dp else 0.0
    if not plan.dp:
        spend.unsound_loss += recorded
    stored = StoredRelease(
        id=served_id, created_at=at, user=str(user), role=key.payer.value,
        dataset_id=key.dataset_id, dataset_version=key.dataset_version,
        query_key=key.served_key, tier=int(key.tier), mechanism=str(plan.mechanism)[:100],
        epsilon=float(recorded), answer=json.loads(dumps(d.answer)),
        dataset_loss=float(d.growth if plan.dp else recorded), dp=plan.dp)
    return Served(answer=d.answer, release_id=served_id, cached=False, charged=cost,
                  loss_added=d.loss if plan.dp else 0.0, status=status_of(spend), plan=plan,
                  stored=stored)


def _with_status(served: Served, spends: Mapping[tuple[Role, str], _Spend], d: _Draw) -> Served:
    """Every answer of the call carries the status after the whole call."""
    spend = spends[(d.key.payer, d.key.dataset_id)]
    return Served(answer=served.answer, release_id=served.release_id, cached=served.cached,
                  charged=served.charged, loss_added=served.loss_added,
                  status=status_of(spend), plan=served.plan, stored=served.stored)


def _insert_served(conn: Connection, key: ReleaseKey, user: str, mechanism: str, epsilon: float,
                   loss: float, dp: bool, answer: Mapping[str, Any], at: datetime) -> int:
    return int(conn.execute(_sql(conn).insert_served, {
        "p_created_at": at, "p_user_name": str(user), "p_role": key.payer.value,
        "p_dataset_id": key.dataset_id, "p_dataset_version": key.dataset_version,
        "p_query_key": key.served_key, "p_tier": int(key.tier),
        "p_mechanism": str(mechanism)[:100], "p_epsilon": float(epsilon),
        "p_dataset_loss": float(loss), "p_dp": dp,
        "p_answer_json": dumps(answer)}).scalar_one())


def internal_answer(spec: InternalSpec, rel: Release) -> dict[str, Any]:
    """The public answer of a calibration release (e.g. a grouping's DP sizes)."""
    return {"kind": "calibration", "key": spec.key, "title": spec.title or spec.key,
            "mechanism": spec.mechanism, "epsilon": spec.epsilon,
            "value": rel.value.tolist() if hasattr(rel.value, "tolist") else rel.value,
            "group_keys": list((getattr(rel, "params", None) or {}).get("group_keys") or [])}


def _add_loss(conn: Connection, dataset_id: str, loss: float, unsound: float) -> None:
    conn.execute(_sql(conn).add_loss, {"p_dataset_id": dataset_id, "p_loss": float(loss),
                                       "p_unsound": float(unsound)})


# -- quotes and the reserved calibration -------------------------------------------------------

def quotes(ledger: Ledger, sources: Sequence[PlanSource], user: str, *,
           return_exceptions: bool = True) -> list[Quote | Exception]:
    """What ``release`` would do now for each source, read in one transaction; computes and
    spends nothing. A source whose plan cannot be built is its exception in the list."""
    with ledger.db.tx(write=False) as conn:
        read = quotes_read(ledger, conn, sources, user)
    return quotes_of(sources, *read, return_exceptions=return_exceptions)


def quotes_read(ledger: Ledger, conn: Connection, sources: Sequence[PlanSource], user: str):
    """What quoting ``sources`` reads, inside the caller's transaction."""
    at = ledger_db.now()
    reads = [_read(conn, s) for s in sources]
    payers = dict.fromkeys((s.key.payer, s.key.dataset_id) for s in sources)
    spends = {k: read_spend(ledger, conn, *k, user, at) for k in payers}   # once per payer
    return reads, spends


def quotes_of(sources: Sequence[PlanSource], reads, spends, *,
              return_exceptions: bool = True) -> list[Quote | Exception]:
    """The quotes from what ``quotes_read`` read (no transaction)."""
    out: list[Quote | Exception] = []
    for source, read in zip(sources, reads, strict=True):
        try:
            out.append(_quote(source, read, spends[(source.key.payer, source.key.dataset_id)]))
        except Exception as exc:    # noqa: BLE001 - handed back, as the caller asked
            if not return_exceptions:
                raise
            out.append(exc)
    return out


def _quote(source: PlanSource, read: _Read, spend: _Spend) -> Quote:
    status = status_of(spend)
    if read.served is not None:
        return Quote(True, None, (), 0.0, 0.0, status, None)
    missing = [s for s in source.inputs if s.store_key not in read.internals]
    if missing:
        priced = [s for s in missing if s.priced]
        cost = math.fsum(s.epsilon for s in priced)
        loss = math.fsum(s.epsilon for s in missing)
        return Quote(False, None, tuple(s.key for s in missing), cost, loss, status,
                     _refusal(spend, cost, loss))
    plan = source.build({s.key: decode(read.internals[s.store_key]) for s in source.inputs})
    key = plan.key
    growth = 0.0
    stored = read.tiers.get(key.tier)
    if plan.discloses() and (stored is None or not stored.disclosed):
        eps = chain.group_eps(plan.epsilons[key.tier])
        others = {t: s for t, s in read.tiers.items() if t != key.tier}
        growth = (chain.disclosure_growth(others, eps) if plan.nestable
                  else max(eps, default=0.0))
    return Quote(False, plan, (), plan.cost, growth, status,
                 _refusal(spend, plan.cost, growth))


def _refusal(spend: _Spend, cost: float, growth: float) -> str | None:
    try:
        check(spend, cost, growth)
    except BudgetExceededError as exc:
        return str(exc)
    return None


def calibrate(ledger: Ledger, specs: Sequence[InternalSpec], *, dataset_id: str,
              dataset_version: str, rng: RngFactory) -> float:
    """Draw the missing releases of a dataset version's reserved calibration (one write
    transaction; charged to no role, added to the dataset's loss). Returns the ε added."""
    reserved = [s for s in specs if not s.priced]
    with ledger.db.tx(write=False) as conn:
        have = _internals(conn, dataset_version, reserved)
    missing = [s for s in reserved if s.store_key not in have]
    if not missing:
        return 0.0
    drawn = [(s, s.compute(s.epsilon, rng())) for s in missing]
    key = ReleaseKey(str(dataset_id), str(dataset_version), "", 0, Role.OWNER)
    added = 0.0
    with ledger.db.tx(write=True) as conn:
        at = ledger_db.now()
        _lock_dataset(conn, key.dataset_id, at)
        have = _internals(conn, dataset_version, missing)
        for spec, rel in drawn:
            if spec.store_key in have:
                continue                      # stored meanwhile: ours was never shown
            _insert_tier(conn, key, spec.store_key, 0, rel, epsilon=spec.epsilon,
                         epsilons=(spec.epsilon,), loss=spec.epsilon, parent=None,
                         how=chain.FRESH, dp=True, disclosed=True, at=at)
            added += spec.epsilon
        _add_loss(conn, key.dataset_id, added, 0.0)
    return added


def lookup_tier(conn: Connection, dataset_version: str, query_key: str,
                tier: int) -> str | None:
    return conn.execute(_sql(conn).tier_payload, {
        "p_version": str(dataset_version), "p_query_key": str(query_key),
        "p_tier": int(tier)}).scalar_one_or_none()


__all__ = ["Ask", "PricingNeeded", "calibrate", "check", "decode", "deliver", "dumps",
           "epsilon_max", "find_served", "lookup_tier", "price", "quotes", "read_spend",
           "release", "status_of", "to_release"]


def price(ledger: Ledger, specs: Sequence[InternalSpec], *, dataset_id: str,
          dataset_version: str, payer: Role, user: str, rng: RngFactory) -> list[Served]:
    """Release the missing priced calibration ``specs`` (a grouping's DP sizes), charged to
    ``payer`` and served to it (public from then on): the deliberate pricing step of a view
    whose grouping nobody has priced yet. Nothing is drawn for specs already stored."""
    priced = [s for s in specs if s.priced]
    with ledger.db.tx(write=False) as conn:
        have = _internals(conn, dataset_version, priced)
        spend = read_spend(ledger, conn, Role(payer), dataset_id, user, ledger_db.now())
    missing = [s for s in priced if s.store_key not in have]
    if not missing:
        return []
    cost = math.fsum(s.epsilon for s in missing)
    check(spend, cost, cost)
    drawn = [(s, s.compute(s.epsilon, rng())) for s in missing]
    key = ReleaseKey(str(dataset_id), str(dataset_version), "", 0, Role(payer))
    with ledger.db.tx(write=True) as conn:
        row = _lock_dataset(conn, key.dataset_id, ledger_db.now())
        spend = _lock_spend(ledger, conn, key.payer, key.dataset_id, user, row)
        at = spend.at
        assert at is not None
        if _internals(conn, dataset_version, missing):
            raise DPError("Someone priced this grouping a moment ago: its sizes are public "
                          "now, nothing was charged. Choose the view again to see its price.")
        check(spend, cost, cost)
        out = []
        for spec, rel in drawn:
            _insert_tier(conn, key, spec.store_key, 0, rel, epsilon=spec.epsilon,
                         epsilons=(spec.epsilon,), loss=spec.epsilon, parent=None,
                         how=chain.FRESH, dp=True, disclosed=True, at=at)
            rid = _insert_served(conn, ReleaseKey(key.dataset_id, key.dataset_version,
                                                  spec.store_key, 0, key.payer), user,
                                 spec.mechanism, spec.epsilon, spec.epsilon, True,
                                 internal_answer(spec, rel), at)
            out.append(rid)
        spend.spent += cost
        spend.user_spent += cost
        spend.loss += cost
        conn.execute(_sql(conn).charge, {"p_role": key.payer.value,
                                         "p_dataset_id": key.dataset_id,
                                         "p_spent": spend.spent,
                                         "p_period_start": spend.period_start})
        _add_loss(conn, key.dataset_id, cost, 0.0)
    return [Served(answer=internal_answer(s, r), release_id=rid, cached=False,
                   charged=s.epsilon, loss_added=s.epsilon, status=status_of(spend))
            for (s, r), rid in zip(drawn, out, strict=True)]
