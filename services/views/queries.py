"""Explore-page queries: parse untrusted input into a canonical, validated request.

Every field of a callback is untrusted (anyone can POST to ``/_dash-update-component``).
The role is clamped to the one granted by the server session, paper mode is kept for
the owner looking as the owner, and columns must be queryable in the public schema.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dp_engine.errors import DPError, SchemaError, UnknownQueryError
from dp_engine.schema import ColumnKind, ColumnSpec, Schema
from services.identity import access
from services.identity.roles import Role
from services.views.statistics import group_keys

VIEWS: dict[str, str] = {
    "histogram": "Histogram (counts)",
    "mean": "Mean",
    "median": "Median box plot",
    "variance": "Variance",
}
"""The Explore views offered, by name; each has its plan class in services/views/plans.py."""
MECHANISMS: dict[str, str] = {"sound": "Sound (central DP)", "paper": "Paper (PyDPLib)"}
BOX_QS: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
"""Quantiles released for a box plot: whiskers at the 5th/95th percentile, box q1–q3."""

RELEASE_FORMAT = 2
"""Part of every query key: answers of format 1 (one ε per view, computed from a row sample of
large tables) are never served as answers of the per-group aggregate releases."""

GROUPABLE_KINDS = frozenset({ColumnKind.ORDINAL, ColumnKind.CATEGORICAL, ColumnKind.BOOLEAN})


class RequestError(DPError):
    """A request the Explore page cannot answer as asked."""


@dataclass(frozen=True)
class Preset:
    """A one-click reproduction of one of the PyDPLib paper's figures."""

    key: str
    label: str
    view: str
    x: str
    group: str | None
    role: Role | None = None   # e.g. Fig. 5 is shown at high noise
    note: str = ""


PRESETS: dict[str, Preset] = {
    p.key: p
    for p in (
        Preset("fig2", "Fig. 2 — age histograms by PI-RADS score", "histogram", "Age",
               "PIRADS score", note="counts per age bin, one bar colour per PI-RADS score"),
        Preset("fig3", "Fig. 3 — average age by PI-RADS score", "mean", "Age", "PIRADS score"),
        Preset("fig4", "Fig. 4 — median age by prostatitis (box plot)", "median", "Age",
               "Prostatitis"),
        Preset("fig5", "Fig. 5 — age histogram at high noise", "histogram", "Age", None,
               role=Role.THIRD_PARTY),
    )
}


@dataclass(frozen=True)
class ViewRequest:
    """A validated Explore request, answered at ``role`` (already clamped)."""

    dataset_id: str
    view: str
    x: str
    group: str | None
    mechanism: str
    role: Role
    without: tuple[str, ...] = ()   # groups left out on purpose (the price without them)

    @property
    def tier(self) -> int:
        """The noise factor of the role the answer is shown at."""
        return self.role.noise_factor

    def canonical(self, schema: Schema) -> dict[str, Any]:
        """What makes two requests the same answer (roles excluded: they pick the tier)."""
        specs = (schema.column(self.x),) + ((schema.column(self.group),) if self.group else ())
        return {
            "dataset": self.dataset_id,
            "view": self.view,
            "x": self.x,
            "group": self.group,
            "mechanism": self.mechanism,
            "metadata": _metadata_hash(specs),
            "release": RELEASE_FORMAT,
        } | ({"without": sorted(self.without)} if self.without else {})

    def query_key(self, schema: Schema) -> str:
        return json.dumps(self.canonical(schema), sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=1024)
def _metadata_hash(specs: tuple[ColumnSpec, ...]) -> str:
    """A short hash of the columns' public metadata (an edit makes a new answer); memoized,
    since every quote and lookup keys on it."""
    cols = [spec.to_dict() for spec in specs]
    return hashlib.sha256(json.dumps(cols, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _text(raw: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = raw.get(key)
    if value in (None, "", "none") and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > 200:
        raise RequestError(f"Choose a {key.replace('_', ' ')} from the list.")
    return value


def parse_request(raw: Mapping[str, Any], granted: Role, schema: Schema) -> ViewRequest:
    """Validate an untrusted request against the public schema and the granted role.

    What a view needs of its measured column is checked by the view's plan
    (services/views/plans.py) when it is built.
    """
    dataset_id = _text(raw, "dataset")
    view = _text(raw, "view")
    if view not in VIEWS:
        raise UnknownQueryError(
            f"Unknown view {view!r}: choose a histogram, a mean, a median box plot or a variance."
        )
    role = access.viewing_role(granted, raw.get("role", granted.value))
    mechanism = access.mechanism_for(granted, role, raw.get("mechanism"))
    x = _text(raw, "x")
    group = _text(raw, "group", optional=True)
    assert dataset_id is not None and x is not None
    _queryable(schema, x)
    if group is not None:
        g_spec = _queryable(schema, group)
        if g_spec.kind not in GROUPABLE_KINDS:
            raise RequestError(
                f"'{g_spec.label}' cannot group the chart: choose a categorical, ordinal or "
                "yes/no column (grouping needs a public list of categories)."
            )
        g_spec.category_list()
        if group == x:
            raise RequestError("Choose a group column different from the measured column.")
    return ViewRequest(dataset_id, view, x, group, mechanism, role,
                       _without(raw.get("without"), schema, group))


MAX_LEFT_OUT = 50


def _without(value: Any, schema: Schema, group: str | None) -> tuple[str, ...]:
    """Groups to leave out: labels of the grouping's public categories (untrusted input)."""
    if value in (None, "", [], ()):
        return ()
    if group is None:
        raise RequestError("Only a grouped view can leave groups out.")
    items = value if isinstance(value, list | tuple) else [value]
    labels = set(group_keys(schema.column(group)))
    if len(items) > MAX_LEFT_OUT or not all(isinstance(i, str) and i in labels for i in items):
        raise RequestError("Leave out only groups of the chosen grouping, from the list.")
    if len(set(items)) >= len(labels):
        raise RequestError("Keep at least one group in the view.")
    return tuple(sorted(set(items)))


def _queryable(schema: Schema, name: str) -> ColumnSpec:
    try:
        spec = schema.column(name)
    except SchemaError:
        raise RequestError(f"The dataset has no column named '{name}'.") from None
    if not spec.queryable:
        raise RequestError(
            f"'{spec.label}' is an identifier or free text and cannot be charted."
        )
    return spec
