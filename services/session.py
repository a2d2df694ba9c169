"""One caller's session: every question a page asks of the privacy ledger, in few transactions.

A ``Session`` is the caller (its identity comes from the server session, never from a request)
facing the app's services: it plans a request, reads everything a screen shows in one
transaction (``look``: each request's price or stored answer, the preset prices, the role's own
releases, its budget, the public calibration a preview is simulated from), spends through the
ledger's one door (``serve``: several answers all or nothing; ``price``: a grouping's DP
sizes), reopens and exports stored releases (the delivery logged in the same transaction as the
read; ``open_stored``: a published page's figures), and says where the role stands
(``status``). Pages, publishing and the studio ask it; they never read the ledger's tables
themselves. The door stays the only writer of releases and charges.

Transactions per Explore screen: a preview reads once; a screen of answers the role already
has reads once and logs its deliveries once; a fresh release reads once and goes through the
door (two). With runner children a preview reads twice (the web worker's read, then the
child's); the other counts hold (the worker's read decides a fresh release, the child runs the
door alone). Figures and components are the web layer's business: a session returns data.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dp_engine.errors import DPError
from services import reproduce
from services.identity.roles import Role
from services.ledger.records import AccountStatus, Quote, StoredRelease
from services.views import report
from services.views.answer import ViewAnswer
from services.views.inputs import known_plans_only, pilot_key, size_key
from services.views.plans import PaperPlan, ViewPlan
from services.views.queries import ViewRequest

HISTORY = 2000
"""Newest releases of a dataset listed for the role (My releases, reopen, export)."""
ASK_SHARE = 0.25
"""Spend only on purpose: a one-click spend asks first above this share of what a non-owner
has left (an Explore preset, a studio synthetic copy)."""


def left_of(status: AccountStatus) -> float | None:
    """What the caller may still spend on the dataset: the lesser of what its role and its
    own limit have left (None: no limit)."""
    left = [x for x in (status.role.remaining, status.user.remaining) if x is not None]
    return min(left) if left else None


def asks_first(role: Role, status: AccountStatus, cost: float) -> bool:
    """Whether a spend of ``cost`` must be confirmed first: it would take more than
    ``ASK_SHARE`` of what a non-owner (role or user) has left. The owner is never asked."""
    if role is Role.OWNER:
        return False
    left = left_of(status)
    return left is not None and cost > ASK_SHARE * left


@dataclass
class ScreenRead:
    """What ``Session.look`` read for one screen (one transaction)."""

    requests: list[ViewRequest]
    plans: list[ViewPlan | PaperPlan]
    quotes: list[Quote | Exception]                 # one per request
    preset_quotes: list[Quote | Exception]          # one per preset request given
    status: AccountStatus
    internals: dict[str, Any] = field(default_factory=dict)
    mine: list[StoredRelease] = field(default_factory=list)

    @property
    def all_served(self) -> bool:
        """Every request is an answer the role already holds (the screen spends nothing)."""
        return all(isinstance(q, Quote) and q.cached for q in self.quotes)

    @property
    def priced(self) -> bool:
        """Every request's exact price is known (its grouping's sizes are public)."""
        return all(isinstance(q, Quote) and not q.missing_inputs for q in self.quotes)


class Session:
    """The privacy ledger as one caller sees it (see the module docstring)."""

    def __init__(self, services: Any, identity: Any) -> None:
        self.services = services
        self.identity = identity
        self.releases = services.releases
        self.ledger = services.ledger

    @property
    def role(self) -> Role:
        return self.identity.role

    # -- planning and reading ------------------------------------------------------------------

    def plan(self, ds, req: ViewRequest) -> ViewPlan | PaperPlan:
        """The plan of ``req`` (public metadata only, no rows)."""
        return self.releases.plan(self.identity, req, dataset=ds)

    def look(self, ds, reqs: list[ViewRequest], *,
             presets: list[ViewRequest | None] = (), history: int = HISTORY) -> ScreenRead:
        """Everything a screen of ``reqs`` shows, read in one transaction (after the dataset
        version's reserved calibration, drawn once per version and process). A preset's box
        plot that no worker has planned yet is not planned for its label (it says its price
        shows when chosen: ``PlanPending``); the screen's own requests always are."""
        self.releases.calibrate(ds)
        plans = [self.plan(ds, r) for r in reqs]
        preset_plans: list = []
        for req in presets:
            try:
                preset_plans.append(self.plan(ds, req) if req is not None else
                                    DPError("not a request"))
            except Exception as exc:    # noqa: BLE001 - its label says why (PlanPending too)
                preset_plans.append(exc)
        sources = plans + [p for p in preset_plans if not isinstance(p, Exception)]
        keys = {size_key(None)}
        for req, p in zip(reqs, plans, strict=True):
            keys |= {s.key for s in p.inputs}
            keys.add(pilot_key(req.x))
        seen = self.ledger.look(sources, user=self.identity.user, role=self.role,
                                dataset_id=str(ds.id), dataset_version=str(ds.version),
                                internals=sorted(keys), history=history,
                                quoting=lambda i: (known_plans_only() if i >= len(plans)
                                                   else contextlib.nullcontext()))
        got = iter(seen.quotes[len(plans):])
        preset_quotes = [p if isinstance(p, Exception) else next(got) for p in preset_plans]
        return ScreenRead(list(reqs), plans, list(seen.quotes[:len(plans)]), preset_quotes,
                          seen.status, dict(seen.internals), list(seen.mine))

    def stored(self, ds, req: ViewRequest) -> StoredRelease | None:
        """The role's stored answer to ``req`` (read only: no delivery is logged)."""
        return self.ledger.lookup(self.plan(ds, req).key)

    def charged_since(self, dataset_id: str, since: datetime) -> bool:
        """Whether the ledger holds a release of this caller's on ``dataset_id`` stored at or
        after ``since`` (after a runner process died: did its work charge?)."""
        newest = self.ledger.releases(user=self.identity.user, dataset_id=dataset_id, limit=1)
        return bool(newest) and newest[0].created_at >= since

    def status(self, dataset_id: str) -> AccountStatus:
        """Role spent / limit, this user's spend / limit, dataset loss / cap (one read)."""
        return self.ledger.status(role=self.role, dataset_id=dataset_id,
                                  user=self.identity.user)

    # -- spending --------------------------------------------------------------------------------

    def serve(self, ds, reqs: list[ViewRequest], *, channel: str = "explore",
              price: bool = False) -> list[tuple[ViewAnswer, int, StoredRelease | None]]:
        """The answers to ``reqs`` (stored ones free, the delivery logged), all or nothing,
        each with its release id and stored row."""
        return self.releases.answer_all(self.identity, list(reqs), dataset=ds,
                                        channel=channel, price=price)

    def price(self, ds, req: ViewRequest) -> float:
        """Release ``req``'s grouping's DP sizes if nobody has (charged to the role)."""
        return self.releases.prepare(self.identity, req, dataset=ds)

    # -- stored releases -------------------------------------------------------------------------

    def reopen(self, release_id: Any, *, channel: str = "explore-reopen",
               dataset_id: str | None = None) -> StoredRelease | None:
        """The role's stored release ``release_id`` (any untrusted value; on ``dataset_id``
        when given), its delivery logged in the same transaction; None when it is not the
        role's (nothing logged)."""
        text = str(release_id)
        if not (text.isascii() and text.isdigit()) or len(text) > 18:   # past ID_MAX: none
            return None
        return self.ledger.deliver_own(int(text), user=self.identity.user, role=self.role,
                                       channel=channel, dataset_id=dataset_id)

    def open_stored(self, release_ids: list[int], *, paid_by: Role,
                    channel: str) -> list[StoredRelease]:
        """The differentially private releases among ``release_ids`` that ``paid_by`` paid for
        (a published page's figures), in order, their deliveries logged in one transaction."""
        return self.ledger.deliver(release_ids, user=self.identity.user, role=self.role,
                                   channel=channel, paid_by=paid_by, only_dp=True)

    def export(self, release_id: Any, kind: str) -> tuple[str, str, str] | None:
        """(file name, body, media type) of the role's stored release as CSV or a JSON
        report; None when it is not the role's. The delivery is logged."""
        if kind not in ("csv", "report"):
            return None
        rel = self.reopen(release_id, channel=f"export-{kind}")
        if rel is None:
            return None
        name = f"release-{rel.id}"
        if kind == "csv":
            return f"{name}.csv", report.figure_csv(rel), "text/csv"
        script = reproduce.for_release(rel, ledger=self.ledger,
                                       registry=self.services.registry)
        body = json.dumps(report.release_report(rel, exported_by=self.identity.user,
                                                reproduce=script and script.to_dict()),
                          indent=2, ensure_ascii=False)
        return f"{name}-report.json", body, "application/json"
