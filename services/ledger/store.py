"""Privacy ledger and release cache in SQL (SQLite by default, PostgreSQL for several workers).

``Ledger.release`` is the one door every DP answer goes through (door.py): a role that already
has an answer gets it again free (and the delivery is logged with the user); otherwise the
limits are checked by the one accountant (dp_engine), the tiers are reused or drawn in the tier
store (internal releases: dataset-level loss only, never a role's spending) and the served
release, the role's charge and the dataset's loss are recorded together. Everything else here
reads: statuses for the pages, the release list, totals and the CSV export.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select

from dp_engine.errors import DPError
from services.identity.roles import Role
from services.ledger import db as ledger_db
from services.ledger import door, policy_store, reports
from services.ledger.db import Database, aware
from services.ledger.migrate import create_or_migrate
from services.ledger.models import ID_MAX
from services.ledger.models import budgets as _BUDGETS
from services.ledger.models import datasets as _DATASETS
from services.ledger.models import deliveries as _DELIVERIES
from services.ledger.models import plans as _PLANS
from services.ledger.models import releases as _RELEASES
from services.ledger.models import tiers as _TIERS
from services.ledger.plan import INTERNAL_PREFIX, InternalSpec, PlanSource, ReleaseKey
from services.ledger.policy import BudgetPolicy
from services.ledger.records import (
    AccountStatus,
    BudgetStatus,
    DatasetStatus,
    Look,
    Quote,
    Served,
    StoredRelease,
    TierRecord,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from dp_engine.sound.release import Release
    from services.ledger.plan import Compute, Publish, RngFactory

__all__ = ["BudgetStatus", "Ledger", "StoredRelease"]


def _default_rng() -> np.random.Generator:
    from dp_engine.rng import as_generator

    return as_generator(None)


class Ledger:
    """The privacy ledger and release cache shared by every worker of the app."""

    def __init__(self, url: str, policy: BudgetPolicy | None = None, *,
                 schema: str | None = None) -> None:
        """Connect and create (or migrate) the tables.

        ``schema`` (PostgreSQL only) keeps the tables in their own schema, created if needed;
        tests use it to isolate runs.
        """
        self.policy = policy or BudgetPolicy()
        self.db = Database(url, schema=schema)
        self.dialect, self.schema = self.db.dialect, schema
        create_or_migrate(self.db)

    def close(self) -> None:
        """Release pooled connections."""
        self.db.close()

    # -- the door ------------------------------------------------------------------------------

    def release(self, source: PlanSource, compute: Compute, publish: Publish, *, user: str,
                channel: str = "explore", rng: RngFactory | None = None,
                price: bool = False) -> Served:
        """The paying role's answer to ``source``: cached (delivery logged, 1 transaction) or
        planned, checked, drawn and recorded (2 transactions). See door.py.

        Raises BudgetExceededError (nothing charged, no answer) when a limit cannot fit."""
        (served,) = self.release_all([door.Ask(source, compute, publish, str(channel))],
                                     user=user, rng=rng, price=price)
        return served

    def release_all(self, asks: Sequence[door.Ask], *, user: str,
                    rng: RngFactory | None = None, price: bool = False) -> list[Served]:
        """Several answers at once, all or nothing (a compare screen, a published page)."""
        return door.release(self, list(asks), user=str(user), rng=rng or _default_rng,
                            price=price)

    def quote(self, source: PlanSource, *, user: str) -> Quote:
        """What ``release`` would cost now (one read transaction; computes nothing)."""
        (out,) = door.quotes(self, [source], str(user), return_exceptions=False)
        assert isinstance(out, Quote)
        return out

    def quotes(self, sources: Sequence[PlanSource], *, user: str) -> list[Quote | Exception]:
        """``quote`` of each source from one read transaction; a source whose plan cannot be
        built is its exception in the list."""
        return door.quotes(self, sources, str(user))

    def look(self, sources: Sequence[PlanSource], *, user: str, role: Role, dataset_id: str,
             dataset_version: str, internals: Sequence[str] = (), history: int = 0,
             quoting: Any = None) -> Look:
        """Everything one screen reads, in ONE read transaction: the quote of each source
        (served, or what it would cost), the role's status on the dataset, the calibration
        releases named by ``internals`` (keys such as ``"sizes:"``) and, with ``history``,
        the role's newest view releases on the dataset (at most that many). ``quoting(i)``:
        a context the i-th source is quoted in (after the transaction)."""
        with self.db.tx(write=False) as conn:
            read = door.quotes_read(self, conn, sources, str(user))
            spend = read[1].get((Role(role), str(dataset_id))) or door.read_spend(
                self, conn, Role(role), dataset_id, str(user), ledger_db.now())
            found = {}
            for key in internals:
                payload = door.lookup_tier(conn, dataset_version,
                                           InternalSpec(key, 0.0, "", _never).store_key, 0)
                if payload is not None:
                    found[key] = payload
            mine = []
            if history:
                r = _RELEASES.c
                rows = conn.execute(select(_RELEASES).where(
                    r.dataset_id == str(dataset_id), r.role == Role(role).value,
                    ~r.query_key.startswith(INTERNAL_PREFIX)).order_by(r.id.desc())
                    .limit(int(history))).mappings().all()
                mine = [door.to_release(row) for row in rows]
        reads, spends = read
        quotes: list = []
        for i, source in enumerate(sources):
            with quoting(i) if quoting is not None else contextlib.nullcontext():
                quotes += door.quotes_of([source], [reads[i]], spends)
        return Look(quotes, door.status_of(spend),
                    {k: door.decode(v) for k, v in found.items()}, mine)

    def stored_plan(self, key: str) -> str | None:
        """A view plan stored under ``key`` by any worker (``services/views/plan_store.py``)."""
        with self.db.tx(write=False) as conn:
            return conn.execute(select(_PLANS.c.payload_json).where(
                _PLANS.c.key == str(key))).scalar_one_or_none()

    def store_plan(self, key: str, dataset_version: str, payload: str) -> None:
        """Keep a view plan for every worker (the first one stored wins; all are equal)."""
        with self.db.tx(write=True) as conn:
            conn.execute(self.db.insert_ignore(
                _PLANS, key=str(key), dataset_version=str(dataset_version)[:200],
                created_at=ledger_db.now(), payload_json=payload))

    def calibrate(self, specs: Sequence[InternalSpec], *, dataset_id: str, dataset_version: str,
                  rng: RngFactory | None = None) -> float:
        """Draw a dataset version's missing reserved calibration (charged to no role, added to
        the dataset's loss); returns the ε added (0 when it was complete)."""
        return door.calibrate(self, specs, dataset_id=dataset_id,
                              dataset_version=dataset_version, rng=rng or _default_rng)

    def price(self, specs: Sequence[InternalSpec], *, dataset_id: str, dataset_version: str,
              payer: Role, user: str, rng: RngFactory | None = None) -> list[Served]:
        """Release a grouping's missing DP sizes, charged to ``payer`` (see door.price)."""
        return door.price(self, specs, dataset_id=dataset_id, dataset_version=dataset_version,
                          payer=payer, user=str(user), rng=rng or _default_rng)

    def lookup(self, key: ReleaseKey) -> StoredRelease | None:
        """The paying role's stored answer for ``key`` (read only: no delivery is logged;
        serve it through ``release`` or log it with ``log_delivery``)."""
        with self.db.tx(write=False) as conn:
            row = door.find_served(conn, key)
        return None if row is None else door.to_release(row)

    def internal(self, dataset_version: str, key: str) -> Release | None:
        """A stored calibration release (public once released), or None; never computes."""
        return self.tier(dataset_version, InternalSpec(key, 0.0, "", _never).store_key, 0)

    def tier(self, dataset_version: str, query_key: str, tier: int) -> Release | None:
        """A stored tier of the tier store (server side only: it holds raw noisy sums)."""
        with self.db.tx(write=False) as conn:
            payload = door.lookup_tier(conn, dataset_version, query_key, tier)
        return None if payload is None else door.decode(payload)

    def log_delivery(self, release_id: int, *, user: str, role: Role | str,
                     channel: str) -> None:
        """Record that a stored release was handed to ``user``."""
        if not self.deliver([int(release_id)], user=user, role=Role(str(role)), channel=channel):
            raise DPError(f"There is no release #{int(release_id)} in the ledger.")

    def deliver_own(self, release_id: int, *, user: str, role: Role, channel: str,
                    dataset_id: str | None = None) -> StoredRelease | None:
        """The served release ``release_id`` if ``role`` paid for it (on ``dataset_id`` when
        given), its delivery to ``user`` logged in the same transaction; None otherwise
        (nothing logged)."""
        got = self.deliver([int(release_id)], user=user, role=role, channel=channel,
                           paid_by=role, dataset_id=dataset_id)
        return got[0] if got else None

    def deliver(self, release_ids: Sequence[int], *, user: str, role: Role, channel: str,
                paid_by: Role | None = None, dataset_id: str | None = None,
                only_dp: bool = False) -> list[StoredRelease]:
        """The served releases among ``release_ids`` (paid by ``paid_by`` and on
        ``dataset_id`` when given; differentially private ones only with ``only_dp``), in the
        order asked, each delivery to ``user`` logged in the same transaction (one for all);
        the others are left out and nothing is logged for them."""
        ids = [int(i) for i in release_ids if 0 < int(i) <= ID_MAX]
        if not ids:
            return []
        at = ledger_db.now()
        with self.db.tx(write=True) as conn:
            rows = {int(r["id"]): r for r in conn.execute(select(_RELEASES).where(
                _RELEASES.c.id.in_(ids))).mappings().all()}
            found = [rows[i] for i in ids if i in rows and (
                (paid_by is None or rows[i]["role"] == Role(paid_by).value)
                and (dataset_id is None or rows[i]["dataset_id"] == dataset_id)
                and (not only_dp or bool(rows[i]["dp"])))]
            for row in found:
                door.deliver(conn, int(row["id"]), str(user), Role(role), channel, at)
        return [door.to_release(row) for row in found]

    # -- budgets the owner sets ----------------------------------------------------------------

    def policy_for(self, dataset_id: str) -> BudgetPolicy:
        """The settings in force for ``dataset_id``: the defaults with the owner's changes."""
        with self.db.tx(write=False) as conn:
            return door.policy_of(self, conn, dataset_id)

    def set_policy(self, *, dataset_id: str, key: str, value: float | None, user: str) -> None:
        """Record the owner's new setting (``policy_store.KEYS``); in force at once."""
        with self.db.tx(write=True) as conn:
            policy_store.record(conn, dataset_id=dataset_id, key=key, value=value, user=user,
                                at=ledger_db.now())

    def policy_history(self, limit: int = 200) -> list[policy_store.PolicyChange]:
        """The owner's changes to budgets and caps, newest first."""
        with self.db.tx(write=False) as conn:
            return policy_store.history(conn, limit)

    # -- statuses ------------------------------------------------------------------------------

    def status(self, *, role: Role | str, dataset_id: str, user: str) -> AccountStatus:
        """Role spent / limit, this user's spend / limit, dataset loss / cap (one read)."""
        with self.db.tx(write=False) as conn:
            spend = door.read_spend(self, conn, Role(str(role)), dataset_id, user,
                                    ledger_db.now())
        return door.status_of(spend)

    def budget(self, *, role: Role | str, dataset_id: str) -> BudgetStatus:
        """Limit, spend and what is left for (role, dataset) in the current period."""
        return self.status(role=role, dataset_id=dataset_id, user="").role

    def budgets(self) -> list[BudgetStatus]:
        """Every (role, dataset) budget that has been charged at least once."""
        with self.db.tx(write=False) as conn:
            rows = conn.execute(select(_BUDGETS.c.role, _BUDGETS.c.dataset_id)
                                .order_by(_BUDGETS.c.dataset_id, _BUDGETS.c.role)).all()
        return [self.budget(role=Role(r.role), dataset_id=r.dataset_id) for r in rows]

    def dataset_status(self, dataset_id: str) -> DatasetStatus:
        return self.status(role=Role.OWNER, dataset_id=dataset_id, user="").dataset

    def dataset_loss(self, dataset_id: str) -> float:
        """Total loss of ``dataset_id`` (calibration and disclosed tiers)."""
        return self.dataset_status(dataset_id).loss

    def dataset_statuses(self) -> list[DatasetStatus]:
        """Loss and cap of every dataset with at least one release."""
        with self.db.tx(write=False) as conn:
            rows = conn.execute(select(_DATASETS).order_by(_DATASETS.c.dataset_id)).mappings()
            out = []
            for r in rows.all():
                cap = door.policy_of(self, conn, r["dataset_id"]).dataset_cap
                out.append(DatasetStatus(r["dataset_id"], float(r["loss"]), cap,
                                         None if cap is None else max(cap - float(r["loss"]),
                                                                      0.0),
                                         float(r["unsound_loss"])))
            return out

    # -- reading -------------------------------------------------------------------------------

    def deliveries(self, *, user: str | None = None,
                   dataset_id: str | None = None) -> list[tuple[datetime, str, str, int]]:
        """Stored answers handed out again, oldest first: (when, user, role, release id)."""
        d, r = _DELIVERIES.c, _RELEASES.c
        stmt = (select(d.delivered_at, d.user_name, d.role, d.release_id)
                .join_from(_DELIVERIES, _RELEASES, d.release_id == r.id).order_by(d.id))
        if user:
            stmt = stmt.where(d.user_name == user)
        if dataset_id:
            stmt = stmt.where(r.dataset_id == dataset_id)
        with self.db.tx(write=False) as conn:
            return [(aware(w), u, ro, int(i)) for w, u, ro, i in conn.execute(stmt)]

    def releases(self, *, user: str | None = None, dataset_id: str | None = None,
                 role: Role | None = None, limit: int | None = 1000) -> list[StoredRelease]:
        """Served releases, newest first, optionally filtered by user, dataset and paying
        role."""
        stmt = reports.filtered(select(_RELEASES).order_by(_RELEASES.c.id.desc()), user,
                                dataset_id)
        if role is not None:
            stmt = stmt.where(_RELEASES.c.role == Role(role).value)
        if limit is not None:
            stmt = stmt.limit(int(limit))
        with self.db.tx(write=False) as conn:
            rows = conn.execute(stmt).mappings().all()
        return [door.to_release(r) for r in rows]

    def served(self, release_id: int) -> StoredRelease | None:
        """One served release by its id, or None (read only: no delivery is logged)."""
        if not 0 < int(release_id) <= ID_MAX:
            return None
        with self.db.tx(write=False) as conn:
            row = conn.execute(select(_RELEASES).where(
                _RELEASES.c.id == int(release_id))).mappings().first()
        return None if row is None else door.to_release(row)

    def internal_releases(self, *, dataset_id: str | None = None,
                          limit: int | None = 1000) -> list[TierRecord]:
        """The tier store (internal releases), newest first, without their payloads."""
        t = _TIERS.c
        stmt = select(*(c for c in _TIERS.c if c.name != "payload_json")).order_by(t.id.desc())
        if dataset_id:
            stmt = stmt.where(t.dataset_id == dataset_id)
        if limit is not None:
            stmt = stmt.limit(int(limit))
        with self.db.tx(write=False) as conn:
            rows = conn.execute(stmt).mappings().all()
        return [TierRecord(int(r["id"]), aware(r["created_at"]), r["dataset_id"],
                           r["dataset_version"], r["query_key"], int(r["tier"]), r["mechanism"],
                           float(r["epsilon"]), float(r["dataset_loss"]), r["refined_from"],
                           bool(r["dp"]), r["drawn"] or "",
                           None if r["disclosed_at"] is None else aware(r["disclosed_at"]))
                for r in rows]

    def count_releases(self, *, user: str | None = None, dataset_id: str | None = None) -> int:
        """How many served releases match the filters."""
        stmt = reports.filtered(select(func.count()).select_from(_RELEASES), user, dataset_id)
        with self.db.tx(write=False) as conn:
            return int(conn.execute(stmt).scalar_one())

    def users(self) -> list[str]:
        """Every user with at least one release (for the ledger page's filter)."""
        return self._distinct(_RELEASES.c.user_name)

    def dataset_ids(self) -> list[str]:
        """Every dataset with at least one release."""
        return self._distinct(_RELEASES.c.dataset_id)

    def _distinct(self, column) -> list[str]:
        with self.db.tx(write=False) as conn:
            return list(conn.execute(select(column).distinct().order_by(column)).scalars())

    def totals(self) -> pd.DataFrame:
        """Per user and dataset: releases paid for, ε charged, dataset-level ε, paper-mode
        lower bounds, answers served again from the cache, first and last activity."""
        with self.db.tx(write=False) as conn:
            return reports.totals(conn)

    def export_csv(self, **filters: Any) -> str:
        """Every served release matching ``filters`` (user, dataset_id) as CSV, oldest first."""
        rows = list(reversed(self.releases(user=filters.get("user"),
                                           dataset_id=filters.get("dataset_id"), limit=None)))
        return reports.csv_text(rows)


def _never(_eps: Any, _rng: Any) -> Release:
    raise AssertionError("a look-up never computes")
