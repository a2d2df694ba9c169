"""The privacy side panel: what was released, with which ε, and what it means."""

from __future__ import annotations

import math

import dash_bootstrap_components as dbc
from dash import html

from dp_engine.bands import NOISE_LABELS
from layouts import ids
from layouts.budget import BudgetFigures, budget_block
from layouts.figures import fmt
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
    """The role's shared budget, this user's spend and the dataset's cap (layouts/budget.py)."""
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
        rows += _row("Realized noise (owner only)", f"{ans.realized_noise_percent:.2f} %",
                     ids.PANEL_REALIZED, "Computed against the true values; never shown to "
                     "other roles.")
    if ans.dp:
        rows += _row(
            "Expected error", f"± {fmt(ans.expected_error)} {ans.error_unit} per value "
            f"(≈ {ans.expected_relative_error:.1f} % relative); hover a value for its "
            "95 % interval", ids.PANEL_ERROR,
        )
    body = [
        html.H2("Privacy", className="h5"),
        html.Dl(rows, className="mb-2"),
        html.P(odds_sentence(ans.epsilon), id=ids.PANEL_ODDS, className="small"),
    ]
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
