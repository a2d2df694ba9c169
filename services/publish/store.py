"""Published pages and cohort descriptions in the ledger's SQL database (SQLAlchemy Core; every
worker shares them). The tables are the publish store's own: created here when missing, never
by the ledger's migrations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, text, update
from sqlalchemy.exc import IntegrityError

from services.identity.roles import Role
from services.ledger.db import Database, aware
from services.publish.models import cohorts as _COHORTS
from services.publish.models import figures as _FIGURES
from services.publish.models import metadata
from services.publish.models import pages as _PAGES
from services.publish.records import Audience, Cohort, FigureRef, Page

_PG_DDL_LOCK = 0x1ED6E9  # advisory-lock key serializing CREATE on PostgreSQL (ledger: ...E8)


class PublishStore:
    """Create, list, read and withdraw published pages (one transaction each)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        with db.tx(write=True) as conn:
            if db.dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_DDL_LOCK})
            metadata.create_all(conn)

    def create(self, *, slug: str, title: str, dataset_id: str, audience: Audience,
               tier_role: Role, expires_at: datetime, created_by: str, created_at: datetime,
               figures: Sequence[FigureRef]) -> Page:
        """Store a page and its figures together."""
        with self.db.tx(write=True) as conn:
            page_id = conn.execute(_PAGES.insert().values(
                slug=slug, title=title, dataset_id=dataset_id, audience_kind=audience.kind,
                audience=audience.name, tier_role=tier_role.value, expires_at=expires_at,
                withdrawn=False, created_by=created_by, created_at=created_at,
            ).returning(_PAGES.c.id)).scalar_one()
            for f in figures:
                conn.execute(_FIGURES.insert().values(
                    page_id=page_id, position=f.position, caption=f.caption,
                    release_id=f.release_id, request_json=json.dumps(f.request, sort_keys=True)))
        page = self.get(slug)
        assert page is not None
        return page

    def get(self, slug: str) -> Page | None:
        """The page at ``slug`` with its figures in order, or None."""
        with self.db.tx(write=False) as conn:
            row = conn.execute(select(_PAGES).where(_PAGES.c.slug == slug)).mappings().first()
            if row is None:
                return None
            figs = conn.execute(select(_FIGURES).where(_FIGURES.c.page_id == row["id"])
                                .order_by(_FIGURES.c.position)).mappings().all()
        return _page(row, tuple(FigureRef(int(f["position"]), f["caption"],
                                          int(f["release_id"]), json.loads(f["request_json"]))
                                for f in figs))

    def list(self) -> list[Page]:
        """Every page, newest first (without figures)."""
        with self.db.tx(write=False) as conn:
            rows = conn.execute(select(_PAGES).order_by(_PAGES.c.id.desc())).mappings().all()
        return [_page(r, ()) for r in rows]

    def withdraw(self, slug: str) -> bool:
        """Mark the page withdrawn; False if there is no such page."""
        with self.db.tx(write=True) as conn:
            done = conn.execute(update(_PAGES).where(_PAGES.c.slug == slug)
                                .values(withdrawn=True))
        return bool(done.rowcount)

    # ---- cohort descriptions (one per dataset) ------------------------------------------
    def cohort(self, dataset_id: str) -> Cohort:
        """The dataset's cohort description (empty when the owner wrote none)."""
        with self.db.tx(write=False) as conn:
            row = conn.execute(select(_COHORTS).where(
                _COHORTS.c.dataset_id == str(dataset_id))).mappings().first()
        if row is None:
            return Cohort(str(dataset_id))
        return Cohort(row["dataset_id"], row["period"], row["inclusion"], row["source"],
                      row["updated_by"], aware(row["updated_at"]))

    def save_cohort(self, cohort: Cohort, *, user: str, at: datetime) -> Cohort:
        """Store (replace) the dataset's cohort description; returns it as stored."""
        values = {"period": cohort.period, "inclusion": cohort.inclusion,
                  "source": cohort.source, "updated_by": str(user), "updated_at": at}
        for attempt in (1, 2):      # a twin insert by another worker: update it instead
            try:
                with self.db.tx(write=True) as conn:
                    done = conn.execute(update(_COHORTS).where(
                        _COHORTS.c.dataset_id == cohort.dataset_id).values(**values))
                    if not done.rowcount:
                        conn.execute(_COHORTS.insert().values(dataset_id=cohort.dataset_id,
                                                               **values))
                break
            except IntegrityError:
                if attempt == 2:
                    raise
        return self.cohort(cohort.dataset_id)


def _page(row, figures: tuple[FigureRef, ...]) -> Page:
    return Page(
        id=int(row["id"]), slug=row["slug"], title=row["title"], dataset_id=row["dataset_id"],
        audience=Audience(row["audience_kind"], row["audience"]),
        tier_role=Role(row["tier_role"]), expires_at=aware(row["expires_at"]),
        withdrawn=bool(row["withdrawn"]), created_by=row["created_by"],
        created_at=aware(row["created_at"]), figures=figures)
