"""The preview's marks: the banner over a simulated chart, its panel, the Release button text.

A preview costs nothing and shows no patient: every part says so. The panel states what the
release would cost (the ledger's quote), its expected error and the budget after it.
"""

from __future__ import annotations

import dash_bootstrap_components as dbc
from dash import html

from layouts import ids
from layouts.components.budget import BudgetFigures, budget_block
from layouts.components.figures import fmt
from layouts.explore.panel import driver_block, noise_words, scale_words
from services.identity.roles import Role
from services.views.preview import PREVIEW_LABEL, Preview


def banner() -> dbc.Alert:
    return dbc.Alert(
        [html.Strong(PREVIEW_LABEL.capitalize() + "."),
         " Drawn from data simulated from the public schema at the ε the release would use: "
         "the chart's shape and noise, not your patients. Nothing is spent until you press "
         "Release."],
        color="info", className="py-1 px-2 mb-2 small", id=ids.EX_PREVIEW_BANNER)


def mark(fig: dict) -> dict:
    """A preview figure, marked in its title and across its plot area."""
    layout = fig.setdefault("layout", {})
    title = layout.setdefault("title", {})
    title["text"] = f"PREVIEW — simulated · {title.get('text', '')}"
    layout["annotations"] = [*layout.get("annotations", []), {
        "text": "PREVIEW — SIMULATED, NOT YOUR PATIENTS", "xref": "paper", "yref": "paper",
        "x": 0.5, "y": 0.5, "showarrow": False, "opacity": 0.18, "textangle": -18,
        "font": {"size": 22, "color": "#0b5394"}}]
    return fig


def release_label(previews: list[Preview]) -> str:
    """The Release button's text: what pressing it would cost now."""
    if all(p.cached for p in previews):
        return "Released — open (free)"
    if not all(p.dp for p in previews):
        return "Release (paper mode, not DP)"
    if not all(p.priced for p in previews):
        return f"Price this grouping (ε {fmt(pricing_cost(previews))})"
    return f"Release (ε {fmt(sum(p.cost for p in previews))})"


def pricing_cost(previews: list[Preview]) -> float:
    """ε pricing the grouping takes (once: previews of one grouping share its sizes)."""
    return max((p.pricing_cost for p in previews if not p.priced), default=0.0)


def pricing_text(previews: list[Preview]) -> str | None:
    """What pressing "Price this grouping" does, when nobody has grouped by it yet."""
    if all(p.priced for p in previews):
        return None
    bound = max(p.bound or 0.0 for p in previews if not p.priced)
    return (f"Nobody has grouped this dataset by this column yet. Pricing the grouping "
            f"releases its DP group sizes to your role (ε {fmt(pricing_cost(previews))} from "
            "your budget; public to every role from then on). The view then shows its exact "
            f"price, at most ε {fmt(bound)} (your role's limit per view); only Release spends "
            "it.")


def refusal(previews: list[Preview]) -> str | None:
    return next((p.refusal for p in previews if p.refusal), None)


def _pair(term: str, value, **dd_props) -> list:
    return [html.Dt(term, className="small text-muted mb-0"),
            html.Dd(value, className="mb-1", **dd_props)]


def panel(previews: list[Preview], granted: Role) -> dbc.Card:
    """What releasing the previewed view(s) would cost, and the budget after it."""
    first = previews[0]
    cost = sum(p.cost for p in previews)
    rows: list = []
    for p in previews:
        a = p.answer

        def named(value_id: str, first_only: Preview = p) -> dict:
            return {"id": value_id} if first_only is first else {}

        eps = "set by PyDPLib's search at release (not DP)" if not p.dp else fmt(a.epsilon)
        rows += [*_pair("Noise level", noise_words(a), **named(ids.PANEL_BAND)),
                 *_pair("Privacy cost of this view (ε)", eps, **named(ids.PANEL_EPSILON))]
        if p.dp:
            rows += _pair("How close to the truth",
                          f"On average within ± {fmt(a.expected_error)} {a.error_unit} of the "
                          f"true value, about {a.expected_relative_error:.1f} % of "
                          f"{scale_words(a)}", **named(ids.PANEL_ERROR))
    cost_text = ("0 — already released to your role, opens free" if all(p.cached for p in
                                                                        previews)
                 else f"{fmt(cost)} from your role's budget" if all(p.priced for p in previews)
                 else f"shown once the grouping is priced (at most "
                 f"{fmt(max(p.bound or 0.0 for p in previews))})")
    rows += _pair("Releasing it would take", cost_text, id=ids.PANEL_SPENT)
    body: list = [html.H2("Preview — nothing spent", className="h5"),
                  html.Dl(rows, className="mb-2")]
    if len(previews) == 1 and first.priced and first.dp and not first.cached:
        driver = driver_block(first.answer, released=False)
        if driver is not None:
            body.append(driver)
    for flag in dict.fromkeys(f for p in previews for f in p.answer.flags):
        if flag != PREVIEW_LABEL:
            body.append(dbc.Alert(flag, color="warning", className="small py-2"))
    pricing = pricing_text(previews)
    if pricing:
        body.append(dbc.Alert(pricing, color="info", className="small py-2",
                              id=ids.PANEL_PRICING))
    stop = refusal(previews)
    if stop:
        body.append(dbc.Alert(stop, color="danger", className="small py-2"))
    body.append(budget_block(BudgetFigures.of(first.status), extra=cost,
                             title="Budget after this release"))
    return dbc.Card(dbc.CardBody(body), className="privacy-panel")
