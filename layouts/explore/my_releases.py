"""'My releases' (what this user and the role released on a dataset) and per-figure exports.

Every item reopens a stored answer: free, whatever it cost when first released. The list is
one RadioItems (static id), so reopening never depends on components added at run time.
"""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import html

from dp_engine.bands import NOISE_LABELS
from layouts import ids
from layouts.components.accessible import field
from layouts.components.figures import fmt
from services.ledger.records import StoredRelease
from services.studio.naming import is_studio
from services.views.report import query_words

MAX_ITEMS = 30


def _option_label(rel: StoredRelease, mine: bool) -> str:
    who = "you" if mine else f"a colleague ({rel.user})"
    when = f"{rel.created_at:%Y-%m-%d %H:%M} UTC"
    if is_studio(rel.answer):       # a studio table: its name says what it is and its ε
        return f"{query_words(rel.answer)} · {who} · {when}"
    cost = f"ε {fmt(rel.epsilon)}" if rel.dp else "paper mode, not DP"
    return (f"{query_words(rel.answer)} · {NOISE_LABELS.get(rel.tier, rel.tier)} noise · "
            f"{cost} · {who} · {when}")


def release_options(user: str, releases: list[StoredRelease]) -> list[dict]:
    """This user's releases first, then the rest of the role's (newest first in each); each
    option reopens its stored answer."""
    mine = [r for r in releases if r.user == user]
    others = [r for r in releases if r.user != user]
    return [{"label": _option_label(r, r.user == user), "value": str(r.id)}
            for r in (mine + others)[:MAX_ITEMS]]


def my_releases() -> html.Div:
    """The card's static part; the callbacks fill the options of ``EX_REOPEN``."""
    return html.Div([
        html.H2("My releases", className="h6 mb-1", id=f"{ids.EX_MY_RELEASES}-title"),
        html.P("What you and your role released on this dataset. Choose one to reopen it: "
               "free, whatever it cost.", className="small text-muted mb-2"),
        field("Reopen a release (free)",
              dbc.RadioItems(id=ids.EX_REOPEN, options=[], value=None,
                             className="small my-releases"), class_name="mb-1"),
        html.Div(id=ids.EX_MY_RELEASES, className="small text-muted"),
    ])


def figure_tools(release_id: int) -> html.Div:
    """Export buttons under one released figure (CSV of the DP numbers, JSON report), in the
    product blue: Bootstrap's grey outline is 4.3:1 on the page's background (AA: 4.5)."""
    return html.Div(
        [dbc.Button("Download CSV", id={"type": ids.EX_CSV, "index": str(release_id)},
                    size="sm", color="primary", outline=True, className="me-2",
                    title="The DP numbers with their 95 % intervals, ε and mechanism"),
         dbc.Button("Download report (JSON)",
                    id={"type": ids.EX_REPORT, "index": str(release_id)}, size="sm",
                    color="primary", outline=True,
                    title="Dataset version, query, tier, mechanism, ε, intervals, time, user"),
         html.Span(f"release #{release_id}", className="small text-muted ms-2")],
        className="figure-tools mt-1 mb-2")
