"""The privacy side panel: what was released, with which ε, and what it means."""

from __future__ import annotations

import math

import dash_bootstrap_components as dbc
from dash import html

from dp_engine.bands import NOISE_LABELS
from layouts import ids
from layouts.components.budget import BudgetFigures, budget_block
from layouts.components.figures import fmt
from services.identity.roles import Role
from services.views.answer import ViewAnswer


def _row(term: str, value, value_id: str | None = None, hint: str = "") -> list:
    dd = html.Dd(value, id=value_id, className="mb-1") if value_id else html.Dd(
        value, className="mb-1")
    dt = html.Dt(term, className="small text-muted mb-0", title=hint or None)
    return [dt, dd]


def odds_sentence(epsilon: float) -> str:
    factor = math.exp(epsilon) if epsilon < 700 else math.inf
    return ("Whatever is shown, the odds of any guess about one patient change by at most a "
            f"factor e^ε = {fmt(factor)}.")


def budget_meter(ans: ViewAnswer, granted: Role) -> html.Div:
    """The role's shared budget, this user's spend and the dataset's cap
    (layouts/components/budget.py)."""
    return budget_block(BudgetFigures(granted, ans.budget_limit, ans.budget_spent,
                                      ans.user_spent, ans.user_limit, ans.dataset_loss,
                                      ans.dataset_cap))


def spent_text(ans: ViewAnswer) -> str:
    """The ε this request took from the role's budget, as the ledger charged it."""
    if ans.cached:
        return "0 — same request as before, stored answer shown (nothing charged)"
    if not ans.dp:
        return (f"{fmt(ans.epsilon_charged)} — not differentially private, so not counted in "
                f"any DP budget; recorded in the ledger with a loss of at least "
                f"ε = {fmt(ans.effective_epsilon)}")
    return fmt(ans.epsilon_charged)


def unit_text(ans: ViewAnswer) -> str:
    """Per patient or per row, truthfully (the schema's patient column and bound k)."""
    if ans.privacy_unit == "patient":
        k = ans.contribution
        return (f"per patient: at most {k} row{'s' if k != 1 else ''} of each patient are used, "
                "and the noise covers all of them")
    return ("per row: the table names no patient column, so a patient with several rows is "
            "protected only as much as each row")


def error_text(ans: ViewAnswer) -> str:
    """The stated expected error: the worst shown group, in the statistic's unit."""
    if not math.isfinite(ans.expected_error):
        return "no group is shown at this noise level"
    many = len(ans.groups) > 1
    return (f"{'up to ' if many else ''}± {fmt(ans.expected_error)} {ans.error_unit} "
            f"(≈ {ans.expected_relative_error:.1f} % of the statistic's own size)"
            + ("; each group below" if many else "")
            + ". Hover a value for its 95 % interval.")


PRICE_DRIVER_RATIO = 1.25
"""A group sets the price when its ε is this much above every other shown group's."""


def price_driver(ans: ViewAnswer) -> tuple[str, float, float, float | None] | None:
    """(group, its ε, the view's ε without it, its public size) when one group's ε sets the
    view's price well above the rest; None otherwise (or when nothing is grouped)."""
    shown = [(e, g) for g, e in enumerate(ans.group_epsilon or [])
             if e is not None and not (g < len(ans.withheld) and ans.withheld[g])]
    if len(shown) < 2:
        return None
    shown.sort(reverse=True)
    (top, g), (second, _) = shown[0], shown[1]
    if top <= PRICE_DRIVER_RATIO * second:
        return None
    n = ans.group_n_estimate[g] if g < len(ans.group_n_estimate or []) else None
    return ans.groups[g], float(top), float(second), n


def driver_block(ans: ViewAnswer, *, released: bool) -> html.Div | None:
    """Which group sets the price, what the view costs without it, and a button that
    leaves it out (a new view: the one released stays as it is)."""
    found = price_driver(ans)
    if found is None:
        return None
    name, top, without, n = found
    size = f" (about {fmt(n)} patients)" if n is not None else ""
    verb = "set" if released else "sets"
    return html.Div([
        html.P([html.Strong(f"{ans.group_label}: {name}"), f"{size} {verb} this view's price: "
                f"ε {fmt(top)}. Without it the view would cost ε {fmt(without)}."],
               className="small mb-1"),
        html.Button(f"Leave {name} out", id=ids.EX_LEAVE_OUT, value=name, n_clicks=0,
                    className="btn btn-outline-primary btn-sm mb-2",
                    title="A preview of the view without this group; nothing is spent"),
    ], className="price-driver")


def group_table(ans: ViewAnswer, granted: Role) -> dbc.Table:
    """ε, expected error and (owner) realized noise of every group; withheld groups say so."""
    owner = granted is Role.OWNER and ans.group_realized_noise_percent is not None
    head = ["Group", "ε", f"Expected error ({ans.error_unit or 'value'})", "Relative"]
    if owner:
        head.append("Realized (owner)")
    body = []
    for g, name in enumerate(ans.groups):
        if g < len(ans.withheld) and ans.withheld[g]:
            cells = [name, "–", html.Em(ans.withheld_reason[g] or "withheld"), "–"]
            if owner:
                cells.append("–")
        else:
            rel = ans.group_expected_relative_error[g]
            cells = [name, fmt(ans.group_epsilon[g]), f"± {fmt(ans.group_expected_error[g])}",
                     "–" if rel is None else f"{rel:.1f} %"]
            if owner:
                real = ans.group_realized_noise_percent[g]  # type: ignore[index]
                cells.append("–" if real is None else f"{real:.1f} %")
        body.append(html.Tr([html.Td(c) for c in cells]))
    return dbc.Table([html.Caption("Per group: ε and expected error (relative to the "
                                   "statistic's own size)", className="small"),
                      html.Thead(html.Tr([html.Th(h, scope="col") for h in head])),
                      html.Tbody(body)], size="sm", className="mb-2 small",
                     id=ids.PANEL_GROUPS)


def panel(ans: ViewAnswer, granted: Role) -> dbc.Card:
    """One answer's panel. Realized noise only for the owner (it is computed from true data)."""
    lo, hi = ans.band
    viewing = Role(ans.role)
    role_txt = granted.label if viewing is granted else (
        f"{granted.label}, previewing {viewing.label.lower()}")
    rows: list = []
    rows += _row("Role", role_txt, ids.PANEL_ROLE)
    rows += _row("Noise factor and band",
                 f"{ans.tier} ({NOISE_LABELS[ans.tier]}) · {lo:g}–{hi:g} %", ids.PANEL_BAND)
    rows += _row("Mechanism", ans.mechanism_label, ids.PANEL_MECHANISM)
    rows += _row("ε of this view", fmt(ans.epsilon), ids.PANEL_EPSILON,
                 "The privacy-loss parameter the mechanism was run with.")
    rows += _row("Sensitivity S_f", ans.sensitivity, ids.PANEL_SENSITIVITY)
    rows += _row("ε spent by this view", spent_text(ans), ids.PANEL_SPENT,
                 "Exactly what the privacy ledger charged your role's budget for this view.")
    if granted is Role.OWNER and ans.realized_noise_percent is not None:
        many = len(ans.groups) > 1 and ans.dp
        rows += _row("Realized noise (owner only)", f"{ans.realized_noise_percent:.2f} %"
                     + (" (mean over the groups shown)" if many else ""),
                     ids.PANEL_REALIZED, "Computed against the true values; never shown to "
                     "other roles.")
    if ans.dp:
        rows += _row("Unit of privacy", unit_text(ans), hint="Who the guarantee protects.")
        rows += _row("Expected error", error_text(ans), ids.PANEL_ERROR, ans.error_definition)
    body = [
        html.H2("Privacy", className="h5"),
        html.Dl(rows, className="mb-2"),
    ]
    if ans.dp and ans.group_epsilon:
        driver = driver_block(ans, released=True)
        if driver is not None:
            body.append(driver)
        body.append(group_table(ans, granted))
    if granted is Role.OWNER:
        body += [dbc.Alert(w, color="warning", className="small py-2")
                 for w in ans.realized_warnings]
    body.append(html.P(odds_sentence(ans.epsilon), id=ids.PANEL_ODDS, className="small"))
    if not ans.dp:
        body.append(dbc.Alert(
            [html.Strong("Not differentially private as labelled. "),
             f"Each record is noised separately and the ε was searched on the data, so the "
             f"released statistic's privacy loss is at least ε = {fmt(ans.effective_epsilon)} "
             "(effective ε), not the labelled one. Use sound mode to share."],
            color="danger", id=ids.PANEL_EFFECTIVE, className="small"))
    for flag in ans.flags:
        body.append(dbc.Alert(flag, color="warning", className="small py-2"))
    if ans.calibration_note and ans.dp:
        body.append(html.P(ans.calibration_note, className="small text-muted"))
    body.append(budget_meter(ans, granted))
    return dbc.Card(dbc.CardBody(body), className="privacy-panel")


def compare_panel(answers: list[ViewAnswer], granted: Role) -> dbc.Card:
    rows = []
    for a in answers:
        rows.append(html.Tr([html.Td(f"{a.tier} ({NOISE_LABELS[a.tier]})"),
                             html.Td(fmt(a.epsilon)),
                             html.Td("–" if a.realized_noise_percent is None
                                     else f"{a.realized_noise_percent:.2f} %")]))
    table = dbc.Table([html.Thead(html.Tr([html.Th("Noise factor"), html.Th("ε"),
                                           html.Th("Realized noise")])),
                       html.Tbody(rows)], size="sm", className="mb-2")
    return dbc.Card(dbc.CardBody([
        html.H2("Privacy — compare", className="h5"), table,
        html.P("The three tiers are nested: the medium-noise answer is the low-noise one plus "
               "independent noise, and the high-noise one is the medium one plus noise.",
               className="small"),
        html.P(odds_sentence(answers[0].epsilon), id=ids.PANEL_ODDS, className="small"),
        budget_meter(answers[0], granted),
    ]), className="privacy-panel")
