"""Release reports and figure CSVs: what one stored release says, in words and numbers.

Built from a served release as the ledger stored it (the public answer, its ε and mechanism),
never from data, so anything that shows a stored release (Explore exports, the ledger page, a
later "published views" page) says the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from dp_engine.bands import NOISE_LABELS
from services.csv_safe import rows_csv
from services.ledger.records import StoredRelease
from services.studio.naming import is_studio, studio_words

REPORT_VERSION = 1
STATISTICS = {"histogram": "histogram", "mean": "mean", "median": "median box plot",
              "variance": "variance"}
CSV_HEADER = ["dataset", "dataset_version", "query", "group", "cell", "value", "ci95_low",
              "ci95_high", "epsilon", "mechanism", "noise_tier", "differentially_private",
              "release_id"]


def query_words(answer: Mapping[str, Any]) -> str:
    """A stored answer's query in words, e.g. "mean of Age by PI-RADS score"; a studio
    table by what it is ("Per-record copy of … · ε …", ``services.studio.naming``)."""
    if is_studio(answer):
        return studio_words(answer)
    view = str(answer.get("view", ""))
    what = STATISTICS.get(view, view or "query")
    x = _plain(answer.get("x_label") or answer.get("x") or "?")
    text = f"{what} of {x}"
    group = answer.get("group")
    if group:
        text += f" by {_plain(answer.get('group_label') or group)}"
    if answer.get("mechanism") == "paper":
        text += " (paper mode)"
    return text


def _plain(label: object) -> str:
    """An axis label without its unit: "Age (years)" -> "Age"."""
    return str(label).split(" (")[0]


def finite_number(v: Any) -> float | None:
    """``v`` as a finite float, else None (missing, text, NaN or infinite)."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def cells(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One record per (group, cell): the DP value and its 95 % interval (None: withheld)."""
    groups, names = list(answer.get("groups", [])), list(answer.get("cells", []))
    grids = {k: answer.get(grid, []) for k, grid in
             (("value", "values"), ("ci95_low", "ci_low"), ("ci95_high", "ci_high"))}
    return [{"group": group, "cell": cell, **{k: _at(grid, g, c) for k, grid in grids.items()}}
            for g, group in enumerate(groups) for c, cell in enumerate(names)]


def _at(grid: Any, g: int, c: int) -> float | None:
    try:
        return finite_number(grid[g][c])
    except (IndexError, TypeError, KeyError):
        return None


def figure_csv(rel: StoredRelease) -> str:
    """The DP numbers of one release with intervals, ε and mechanism (escaped CSV)."""
    ans = rel.answer
    query = query_words(ans)
    tier = NOISE_LABELS.get(rel.tier, str(rel.tier))
    rows = ([rel.dataset_id, rel.dataset_version, query, c["group"], c["cell"], c["value"],
             c["ci95_low"], c["ci95_high"], finite_number(ans.get("epsilon")),
             ans.get("mechanism_label") or rel.mechanism, tier,
             "yes" if rel.dp else "no", rel.id]
            for c in cells(ans))
    return rows_csv(CSV_HEADER, rows)


def release_report(rel: StoredRelease, *, exported_by: str, at: datetime | None = None,
                   reproduce: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-ready report of one release (dataset version, query, tier, mechanism, ε,
    values with intervals, time, user) and, when given, its reproduction script
    (``services.reproduce``). Public answer only: nothing here is private."""
    ans = rel.answer
    report = {
        "report_version": REPORT_VERSION,
        "release_id": rel.id,
        "dataset": {"id": rel.dataset_id, "title": ans.get("dataset_title", ""),
                    "version": rel.dataset_version},
        "query": {"words": query_words(ans), "view": ans.get("view"), "measured": ans.get("x"),
                  "group_by": ans.get("group"), "mode": ans.get("mechanism", "sound")},
        "tier": {"noise_factor": rel.tier, "noise": NOISE_LABELS.get(rel.tier),
                 "shown_as_role": ans.get("role"), "paid_by_role": rel.role,
                 "band_percent": list(ans.get("band", []))},
        "mechanism": ans.get("mechanism_label") or rel.mechanism,
        "differentially_private": rel.dp,
        "epsilon": finite_number(ans.get("epsilon")),
        "epsilon_charged_to_role": rel.charged,
        "effective_epsilon_lower_bound": (None if rel.dp
                                          else finite_number(ans.get("effective_epsilon"))),
        "sensitivity": ans.get("sensitivity"),
        "expected_error": finite_number(ans.get("expected_error")),
        "expected_error_unit": ans.get("error_unit", ""),
        "expected_relative_error_percent": finite_number(ans.get("expected_relative_error")),
        "dp_size_estimate": ans.get("n_estimate"),
        "values": cells(ans),
        "notes": list(ans.get("flags", [])),
        "released_at": rel.created_at.isoformat(),
        "released_to": rel.user,
        "exported_by": exported_by,
        "exported_at": (at or datetime.now(UTC)).isoformat(),
    }
    if reproduce is not None:
        report["reproduce"] = dict(reproduce)
    return report
