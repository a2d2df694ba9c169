"""Privacy ledger and release cache in SQL (SQLite by default, PostgreSQL for several workers).

Every noisy answer that leaves the server is one row, unique per (dataset version, canonical
query, tier); asking again returns that row and charges nothing. Charging a (role, dataset)
budget and storing the release happen in one transaction that is serialized per budget:
``BEGIN IMMEDIATE`` on SQLite (one writer at a time), ``SELECT ... FOR UPDATE`` on the budget row
on PostgreSQL. Concurrent twins (two workers computing the same release) meet the unique
constraint; the loser rolls back and is handed the winner's row, uncharged.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, create_engine, event, func, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.pool import StaticPool

try:
    import fcntl
except ImportError:  # not on Windows: SQLite's own busy timeout still serializes writers
    fcntl = None  # type: ignore[assignment]

from dp_engine.errors import BudgetExceededError, InvalidEpsilonError
from services.identity.roles import Role
from services.ledger.models import SCHEMA_VERSION, metadata
from services.ledger.models import budgets as _BUDGETS
from services.ledger.models import deliveries as _DELIVERIES
from services.ledger.models import meta as _META
from services.ledger.models import releases as _RELEASES
from services.ledger.policy import BudgetPolicy

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BudgetStatus", "Ledger", "StoredRelease"]

# Relative slack when comparing float sums to a limit, so 50 charges of 0.1 fit a budget of 5.
_REL_TOL = 1e-9
_SQLITE_BUSY_MS = 30_000
_SQLITE_RETRIES = 3
_PG_DDL_LOCK = 0x1ED6E8  # advisory-lock key serializing CREATE on PostgreSQL
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class StoredRelease:
    """One release as stored. ``cached`` is True when served from the cache (nothing charged)."""

    id: int
    created_at: datetime
    user: str
    role: str
    dataset_id: str
    dataset_version: str
    query_key: str
    tier: int
    mechanism: str
    epsilon: float
    answer: dict
    cached: bool
    dataset_loss: float = 0.0


@dataclass(frozen=True)
class BudgetStatus:
    """Spend of one (role, dataset) budget in the current period; ``None`` limit = unlimited."""

    role: str
    dataset_id: str
    limit: float | None
    spent: float
    remaining: float | None
    renews_at: datetime | None = None


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; everything stored is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    raise TypeError(f"cannot store a {type(obj).__name__} in a release answer")


def _dumps(answer: Mapping[str, Any]) -> str:
    return json.dumps(dict(answer), default=_json_default, sort_keys=True, allow_nan=True)


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _finite_nonneg(name: str, value: float) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InvalidEpsilonError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(x) or x < 0:
        raise InvalidEpsilonError(f"{name} must be a finite number ≥ 0, got {value!r}.")
    return x


class Ledger:
    """The privacy ledger and release cache shared by every worker of the app."""

    def __init__(self, url: str, policy: BudgetPolicy | None = None, *,
                 schema: str | None = None) -> None:
        """Connect and create the tables if missing.

        ``schema`` (PostgreSQL only) keeps the tables in their own schema, created if needed;
        tests use it to isolate runs.
        """
        self.policy = policy or BudgetPolicy()
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"The ledger supports SQLite and PostgreSQL URLs, got '{url}'.")
        if schema is not None and (self.dialect != "postgresql" or not _SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema {schema!r}: a plain identifier, PostgreSQL only.")
        self.schema = schema
        self._lock_path: str | None = None
        self._thread_lock = threading.RLock()
        self._memory = False
        if self.dialect == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
                if fcntl is not None:
                    self._lock_path = parsed.database + ".writer-lock"
            self._memory = not parsed.database or parsed.database == ":memory:"
            if self._memory:  # one shared connection, or each thread would see its own database
                base = create_engine(parsed, poolclass=StaticPool,
                                     connect_args={"check_same_thread": False})
            else:
                base = create_engine(parsed, connect_args={"timeout": _SQLITE_BUSY_MS / 1000})
            _configure_sqlite(base)
        else:
            base = create_engine(parsed, pool_pre_ping=True)
        self._base_engine = base
        self._engine = (base.execution_options(schema_translate_map={None: schema})
                        if schema else base)
        _dispose_after_fork(base)
        self._create_tables()

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        """One transaction; ``write`` takes SQLite's write lock up front (BEGIN IMMEDIATE)."""
        # in-memory SQLite: one connection for all threads, so one transaction at a time
        guard = self._thread_lock if self._memory else nullcontext()
        with guard, self._engine.connect().execution_options(ledger_write=write) as conn, \
                conn.begin():
            yield conn

    def _insert_ignore(self, table, **values):
        ins = pg_insert if self.dialect == "postgresql" else sqlite_insert
        return ins(table).values(**values).on_conflict_do_nothing()

    def _create_tables(self) -> None:
        with self._write_lock(), self._tx(write=True) as conn:
            if self.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_DDL_LOCK})
                if self.schema:
                    conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'))
            metadata.create_all(conn)
            conn.execute(self._insert_ignore(_META, key="schema_version",
                                             value=str(SCHEMA_VERSION)))
            stored = int(conn.execute(
                select(_META.c.value).where(_META.c.key == "schema_version")).scalar_one())
            if stored < SCHEMA_VERSION:  # older ledger: create_all added the new tables
                conn.execute(update(_META).where(_META.c.key == "schema_version")
                             .values(value=str(SCHEMA_VERSION)))
        if stored > SCHEMA_VERSION:
            raise RuntimeError(
                f"The ledger database was written by a newer version (schema {stored}); "
                "upgrade the app before using it."
            )

    def close(self) -> None:
        """Release pooled connections."""
        self._base_engine.dispose()

    # -- cache ---------------------------------------------------------------------------------

    def cached(self, *, dataset_version: str, query_key: str, tier: int,
               user: str | None = None, role: Role | str | None = None) -> StoredRelease | None:
        """The stored release for this cache key, or None. Charges nothing.

        With ``user`` (and ``role``), a hit is logged as a delivery to that user, so the owner
        can see who received each answer, not only who first paid for it.
        """
        with self._tx(write=False) as conn:
            hit = self._find(conn, dataset_version, query_key, tier)
        if hit is not None and user is not None:
            self._deliver(hit, user, role)
        return hit

    def _deliver(self, rel: StoredRelease, user: str, role: Role | str | None) -> None:
        with self._write_lock(), self._tx(write=True) as conn:
            conn.execute(insert(_DELIVERIES).values(
                release_id=rel.id, delivered_at=_now(), user_name=str(user),
                role=Role(str(role)).value if role is not None else rel.role))

    def deliveries(self, *, user: str | None = None,
                   dataset_id: str | None = None) -> list[tuple[datetime, str, str, int]]:
        """Cache hits served, oldest first: (when, user, role, release id)."""
        d, r = _DELIVERIES.c, _RELEASES.c
        stmt = (select(d.delivered_at, d.user_name, d.role, d.release_id)
                .join_from(_DELIVERIES, _RELEASES, d.release_id == r.id).order_by(d.id))
        if user:
            stmt = stmt.where(d.user_name == user)
        if dataset_id:
            stmt = stmt.where(r.dataset_id == dataset_id)
        with self._tx(write=False) as conn:
            return [(_aware(w), u, ro, int(i)) for w, u, ro, i in conn.execute(stmt)]

    def _find(self, conn: Connection, dataset_version: str, query_key: str,
              tier: int) -> StoredRelease | None:
        row = conn.execute(select(_RELEASES).where(
            _RELEASES.c.dataset_version == dataset_version,
            _RELEASES.c.query_key == query_key,
            _RELEASES.c.tier == int(tier),
        )).mappings().first()
        return None if row is None else _to_release(row, cached=True)

    # -- charging ------------------------------------------------------------------------------

    def charge_and_record(self, *, user: str, role: Role, dataset_id: str, dataset_version: str,
                          query_key: str, tier: int, mechanism: str, epsilon: float,
                          answer: dict, dataset_loss: float = 0.0) -> StoredRelease:
        """Charge ``epsilon`` to the (role, dataset) budget and store the release, atomically.

        Returns the existing release (``cached=True``, nothing charged) when the same
        (dataset_version, query_key, tier) is already stored, even if stored concurrently.
        Raises BudgetExceededError, recording nothing, when the budget cannot cover ``epsilon``.
        """
        role = Role(str(role))
        epsilon = _finite_nonneg("ε", epsilon)
        dataset_loss = _finite_nonneg("The dataset-level ε", dataset_loss)
        values = {
            "user_name": str(user), "role": role.value, "dataset_id": str(dataset_id),
            "dataset_version": str(dataset_version), "query_key": str(query_key),
            "tier": int(tier), "mechanism": str(mechanism), "epsilon": epsilon,
            "dataset_loss": dataset_loss, "answer_json": _dumps(answer),
        }
        for attempt in range(_SQLITE_RETRIES):
            try:
                rel = self._charge_once(role, values)
            except IntegrityError:
                twin = self.cached(dataset_version=values["dataset_version"],
                                   query_key=values["query_key"], tier=values["tier"],
                                   user=values["user_name"], role=role)
                if twin is None:
                    raise
                return twin
            except OperationalError as exc:  # SQLite busy beyond its timeout: try again
                if self.dialect != "sqlite" or "locked" not in str(exc).lower() \
                        or attempt == _SQLITE_RETRIES - 1:
                    raise
                continue
            if rel.cached:
                self._deliver(rel, values["user_name"], role)
            return rel
        raise AssertionError("unreachable")

    def _charge_once(self, role: Role, values: dict[str, Any]) -> StoredRelease:
        now = _now()
        key = (values["dataset_version"], values["query_key"], values["tier"])
        # Read-only pass, no lock: a stored twin is served, and an exhausted budget refused
        # (spend only grows within a period), so neither waits for the writers.
        with self._tx(write=False) as conn:
            twin = self._find(conn, *key)
            if twin is not None:
                return twin
            row = conn.execute(self._budget_select(role, values["dataset_id"])).mappings().first()
            if row is not None:
                self._check_budget(role, values, *self._current_spend(row, now))
        with self._write_lock(), self._tx(write=True) as conn:
            spent, period_start, renews_at = self._lock_budget(conn, role, values["dataset_id"],
                                                               now)
            twin = self._find(conn, *key)  # committed while we waited for the lock?
            if twin is not None:
                return twin
            self._check_budget(role, values, spent, period_start, renews_at)
            eps = values["epsilon"]
            new_id = conn.execute(
                insert(_RELEASES).values(created_at=now, **values).returning(_RELEASES.c.id)
            ).scalar_one()
            conn.execute(update(_BUDGETS).where(
                _BUDGETS.c.role == role.value, _BUDGETS.c.dataset_id == values["dataset_id"],
            ).values(spent=spent + eps, period_start=period_start))
        row = {"id": new_id, "created_at": now, **values}
        return _to_release(row, cached=False)

    def _check_budget(self, role: Role, values: dict[str, Any], spent: float,
                      _period_start: datetime, renews_at: datetime | None) -> None:
        """Raise BudgetExceededError if ``values['epsilon']`` does not fit what is left."""
        limit, eps = self.policy.limit(role), values["epsilon"]
        if limit is None or spent + eps <= limit * (1 + _REL_TOL):
            return
        left = max(limit - spent, 0.0)
        renew = f" The budget renews on {renews_at:%Y-%m-%d %H:%M} UTC." if renews_at else ""
        raise BudgetExceededError(
            f"Privacy budget exhausted for the {role.label.lower()} role on dataset "
            f"'{values['dataset_id']}': this request needs ε = {_fmt(eps)}, but the "
            f"budget has spent {_fmt(spent)} of {_fmt(limit)}, {_fmt(left)} left. "
            f"Nothing was charged and no answer was released. Previously released "
            f"answers stay available at no cost.{renew}"
        )

    @staticmethod
    def _budget_select(role: Role, dataset_id: str):
        return select(_BUDGETS).where(_BUDGETS.c.role == role.value,
                                      _BUDGETS.c.dataset_id == str(dataset_id))

    def _lock_budget(self, conn: Connection, role: Role, dataset_id: str,
                     now: datetime) -> tuple[float, datetime, datetime | None]:
        """Lock the budget row (creating it); return (spent this period, period start, renewal).

        One round trip: an upsert whose no-op update takes the row lock (PostgreSQL waits
        for any other holder and then sees its committed spend) and returns the row.
        """
        ins = pg_insert if self.dialect == "postgresql" else sqlite_insert
        stmt = ins(_BUDGETS).values(role=role.value, dataset_id=dataset_id,
                                    first_charge_at=now, period_start=now, spent=0.0)
        stmt = stmt.on_conflict_do_update(
            index_elements=[_BUDGETS.c.role, _BUDGETS.c.dataset_id],
            set_={"role": stmt.excluded.role},
        ).returning(*_BUDGETS.c)
        row = conn.execute(stmt).mappings().one()
        return self._current_spend(row, now)

    @contextmanager
    def _write_lock(self) -> Iterator[None]:
        """SQLite: queue writers on a file lock (woken at once) instead of busy-wait polling."""
        if self.dialect != "sqlite":
            yield
            return
        with self._thread_lock:
            if self._lock_path is None:
                yield
                return
            fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the lock; a killed process releases it too

    def _current_spend(self, row: Mapping[str, Any],
                       now: datetime) -> tuple[float, datetime, datetime | None]:
        first = _aware(row["first_charge_at"])
        start = self.policy.period_start(first, now)
        spent = float(row["spent"]) if _aware(row["period_start"]) >= start else 0.0
        return spent, start, self.policy.next_renewal(first, now)

    # -- reading -------------------------------------------------------------------------------

    def budget(self, *, role: Role, dataset_id: str) -> BudgetStatus:
        """Limit, spend and what is left for (role, dataset) in the current period."""
        role = Role(str(role))
        limit = self.policy.limit(role)
        with self._tx(write=False) as conn:
            row = conn.execute(self._budget_select(role, dataset_id)).mappings().first()
        spent, renews_at = 0.0, None
        if row is not None:
            spent, _, renews_at = self._current_spend(row, _now())
        remaining = None if limit is None else max(limit - spent, 0.0)
        return BudgetStatus(role.value, str(dataset_id), limit, spent, remaining, renews_at)

    def budgets(self) -> list[BudgetStatus]:
        """Every (role, dataset) budget that has been charged at least once."""
        with self._tx(write=False) as conn:
            rows = conn.execute(select(_BUDGETS.c.role, _BUDGETS.c.dataset_id)
                                .order_by(_BUDGETS.c.dataset_id, _BUDGETS.c.role)).all()
        return [self.budget(role=Role(r.role), dataset_id=r.dataset_id) for r in rows]

    def dataset_loss(self, dataset_id: str) -> float:
        """Total dataset-level ε released on ``dataset_id`` (each query's least-noisy tier once)."""
        with self._tx(write=False) as conn:
            total = conn.execute(select(func.coalesce(func.sum(_RELEASES.c.dataset_loss), 0.0))
                                 .where(_RELEASES.c.dataset_id == str(dataset_id))).scalar_one()
        return float(total)

    def releases(self, *, user: str | None = None, dataset_id: str | None = None,
                 limit: int | None = 1000) -> list[StoredRelease]:
        """Stored releases, newest first, optionally filtered by user and dataset."""
        stmt = _filtered(select(_RELEASES).order_by(_RELEASES.c.id.desc()), user, dataset_id)
        if limit is not None:
            stmt = stmt.limit(int(limit))
        with self._tx(write=False) as conn:
            rows = conn.execute(stmt).mappings().all()
        return [_to_release(r, cached=False) for r in rows]

    def count_releases(self, *, user: str | None = None, dataset_id: str | None = None) -> int:
        """How many releases match the filters."""
        stmt = _filtered(select(func.count()).select_from(_RELEASES), user, dataset_id)
        with self._tx(write=False) as conn:
            return int(conn.execute(stmt).scalar_one())

    def users(self) -> list[str]:
        """Every user with at least one release (for the ledger page's filter)."""
        with self._tx(write=False) as conn:
            return list(conn.execute(select(_RELEASES.c.user_name).distinct()
                                     .order_by(_RELEASES.c.user_name)).scalars())

    def dataset_ids(self) -> list[str]:
        """Every dataset with at least one release."""
        with self._tx(write=False) as conn:
            return list(conn.execute(select(_RELEASES.c.dataset_id).distinct()
                                     .order_by(_RELEASES.c.dataset_id)).scalars())

    def totals(self) -> pd.DataFrame:
        """Per user and dataset: releases paid for, ε charged, dataset-level ε, answers served
        again from the cache, first and last activity."""
        import pandas as pd  # only the ledger page needs it; workers start faster without

        r, d = _RELEASES.c, _DELIVERIES.c
        paid = (select(r.user_name.label("user"), r.dataset_id,
                       func.count().label("releases"),
                       func.sum(r.epsilon).label("epsilon"),
                       func.sum(r.dataset_loss).label("dataset_loss"),
                       func.min(r.created_at).label("first_release"),
                       func.max(r.created_at).label("last_release"))
                .group_by(r.user_name, r.dataset_id))
        reused = (select(d.user_name.label("user"), r.dataset_id,
                         func.count().label("cache_hits"),
                         func.min(d.delivered_at).label("first_hit"),
                         func.max(d.delivered_at).label("last_hit"))
                  .join_from(_DELIVERIES, _RELEASES, d.release_id == r.id)
                  .group_by(d.user_name, r.dataset_id))
        with self._tx(write=False) as conn:
            a = pd.DataFrame([dict(m) for m in conn.execute(paid).mappings()],
                             columns=["user", "dataset_id", "releases", "epsilon",
                                      "dataset_loss", "first_release", "last_release"])
            b = pd.DataFrame([dict(m) for m in conn.execute(reused).mappings()],
                             columns=["user", "dataset_id", "cache_hits", "first_hit",
                                      "last_hit"])
        out = a.merge(b, on=["user", "dataset_id"], how="outer")
        for col in ("releases", "cache_hits"):
            out[col] = out[col].fillna(0).astype(int)
        for col in ("epsilon", "dataset_loss"):
            out[col] = out[col].fillna(0.0).astype(float)
        first = [min(_aware(t) for t in pair if not pd.isna(t))
                 for pair in zip(out["first_release"], out["first_hit"], strict=True)]
        last = [max(_aware(t) for t in pair if not pd.isna(t))
                for pair in zip(out["last_release"], out["last_hit"], strict=True)]
        out = out.assign(first_release=first, last_release=last)
        columns = ["user", "dataset_id", "releases", "epsilon", "dataset_loss", "cache_hits",
                   "first_release", "last_release"]
        return out[columns].sort_values(["user", "dataset_id"]).reset_index(drop=True)

    def export_csv(self, **filters: Any) -> str:
        """Every release matching ``filters`` (user, dataset_id) as CSV, oldest first."""
        rows = list(reversed(self.releases(user=filters.get("user"),
                                           dataset_id=filters.get("dataset_id"), limit=None)))
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["id", "created_at", "user", "role", "dataset_id", "dataset_version",
                         "query_key", "tier", "mechanism", "epsilon", "dataset_loss", "answer"])
        for rel in rows:
            writer.writerow([
                rel.id, rel.created_at.isoformat(), _cell(rel.user), rel.role,
                _cell(rel.dataset_id), _cell(rel.dataset_version), _cell(rel.query_key),
                rel.tier, _cell(rel.mechanism), repr(rel.epsilon), repr(rel.dataset_loss),
                _dumps(rel.answer),
            ])
        return out.getvalue()


def _filtered(stmt, user: str | None, dataset_id: str | None):
    """Restrict a releases query to one user and/or dataset (empty = no filter)."""
    if user:
        stmt = stmt.where(_RELEASES.c.user_name == user)
    if dataset_id:
        stmt = stmt.where(_RELEASES.c.dataset_id == dataset_id)
    return stmt


def _cell(value: str) -> str:
    """Neutralize spreadsheet formulas (CSV injection) in free-text cells."""
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _to_release(row: Mapping[str, Any], *, cached: bool) -> StoredRelease:
    return StoredRelease(
        id=int(row["id"]), created_at=_aware(row["created_at"]), user=row["user_name"],
        role=row["role"], dataset_id=row["dataset_id"], dataset_version=row["dataset_version"],
        query_key=row["query_key"], tier=int(row["tier"]), mechanism=row["mechanism"],
        epsilon=float(row["epsilon"]), answer=json.loads(row["answer_json"]), cached=cached,
        dataset_loss=float(row["dataset_loss"]),
    )


def _configure_sqlite(engine) -> None:
    """WAL (readers never block the writer), a long busy timeout, and explicit BEGIN modes."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # let the "begin" hook below emit BEGIN itself
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_MS}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        write = conn.get_execution_options().get("ledger_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _dispose_after_fork(engine) -> None:
    """A forked child must not reuse the parent's pooled connections."""
    ref = weakref.ref(engine)

    def _child() -> None:
        eng = ref()
        if eng is not None:
            eng.dispose(close=False)

    os.register_at_fork(after_in_child=_child)
