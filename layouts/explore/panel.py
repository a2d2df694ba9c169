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
    return [html.Dt(term, className="small text-muted mb-0", title=hint or None),
            html.Dd(value, className="mb-1", **({"id": value_id} if value_id else {}))]


def _table(caption: str, head: list[str], rows: list[list]) -> dbc.Table:
    """The panel's table (per group, or per tier in compare mode)."""
    return dbc.Table([html.Caption(caption, className="small"),
                      html.Thead(html.Tr([html.Th(h, scope="col") for h in head])),
                      html.Tbody([html.Tr([html.Td(c) for c in cells]) for cells in rows])],
                     size="sm", className="mb-2 small", responsive=True, id=ids.PANEL_GROUPS)


def odds_sentence(epsilon: float) -> str:
    """What ε promises, in words a clinician reads (the formula sits in the details)."""
    factor = math.exp(epsilon) if epsilon < 700 else math.inf
    return ("Whatever this view shows, it changes the odds of any guess about one patient — "
            f"whether they are in the data, what their values are — by at most ×{fmt(factor)}.")


def odds_formula(epsilon: float) -> str:
    factor = math.exp(epsilon) if epsilon < 700 else math.inf
    return f"That factor is e^ε = e^{fmt(epsilon)} = {fmt(factor)}."


def scale_words(ans: ViewAnswer) -> str:
    """What a relative error is measured against, for this kind of figure."""
    if ans.figure == "histogram" or ans.error_unit in ("patients", "records"):
        return "the group's typical count per bar"
    if ans.figure == "box":
        return "the spread of the group's middle 90 %"
    if ans.statistic_label.lower().startswith("variance"):
        return "the group's variance"
    return "the group's standard deviation"


def noise_words(ans: ViewAnswer) -> str:
    """The noise level in words: "high: typically 10–20 % of the group's spread"."""
    lo, hi = ans.band
    return f"{NOISE_LABELS[ans.tier]} — about {lo:g}–{hi:g} % of {scale_words(ans)}"


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
    return (f"On average each value is within ± {fmt(ans.expected_error)} {ans.error_unit} of "
            f"the true one{' (the least precise group; each group below)' if many else ''}, "
            f"about {ans.expected_relative_error:.1f} % of {scale_words(ans)}. "
            "Hover a value for its 95 % interval.")


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
    head = ["Group", "ε", f"Typical error ({ans.error_unit or 'value'})", "Relative"]
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
        body.append(cells)
    return _table(f"Per group: privacy cost (ε) and typical error (relative to "
                  f"{scale_words(ans)})", head, body)


def details(ans: ViewAnswer, extra: list | None = None) -> html.Details:
    """The technical detail behind a disclosure: mechanism, sensitivity, unit, definitions."""
    rows: list = []
    rows += _row("Noise factor (the paper's tiers 0–2)", f"{ans.tier} ({NOISE_LABELS[ans.tier]})")
    rows += _row("Mechanism", ans.mechanism_label, ids.PANEL_MECHANISM)
    rows += _row("Sensitivity S_f", ans.sensitivity, ids.PANEL_SENSITIVITY,
                 "How much one patient can move the statistic before noise.")
    if ans.dp:
        rows += _row("Unit of privacy", unit_text(ans), hint="Who the guarantee protects.")
        rows += _row("How errors are measured", ans.error_definition)
    body: list = [html.Dl(rows, className="mb-2"),
                  html.P(odds_formula(ans.epsilon), className="small")]
    if ans.calibration_note and ans.dp:
        body.append(html.P(ans.calibration_note, className="small text-muted"))
    body += extra or []
    return html.Details([html.Summary("Details for statisticians", className="small"),
                         html.Div(body, className="mt-2")],
                        className="panel-details mb-2", id=ids.PANEL_DETAILS)


def panel(ans: ViewAnswer, granted: Role) -> dbc.Card:
    """One answer's panel, in a clinician's words first; realized noise only for the owner
    (it is computed from true data); the technical detail behind "Details"."""
    viewing = Role(ans.role)
    role_txt = granted.label if viewing is granted else (
        f"{granted.label}, previewing {viewing.label.lower()}")
    rows: list = []
    rows += _row("Role", role_txt, ids.PANEL_ROLE)
    rows += _row("Noise level", noise_words(ans), ids.PANEL_BAND,
                 "The tier's noise factor and its band, measured against each group's spread.")
    rows += _row("Privacy cost of this view (ε)", fmt(ans.epsilon), ids.PANEL_EPSILON,
                 "Smaller is more private. The privacy-loss parameter the noise was drawn "
                 "with.")
    rows += _row("Taken from your budget", spent_text(ans), ids.PANEL_SPENT,
                 "Exactly what the privacy ledger charged your role's budget for this view.")
    if ans.dp:
        rows += _row("How close to the truth", error_text(ans), ids.PANEL_ERROR,
                     ans.error_definition)
    if granted is Role.OWNER and ans.realized_noise_percent is not None:
        many = len(ans.groups) > 1 and ans.dp
        rows += _row("Realized noise (owner only)", f"{ans.realized_noise_percent:.2f} %"
                     + (" (mean over the groups shown)" if many else ""),
                     ids.PANEL_REALIZED, "How far this release is from the true values; "
                     "computed against them, so never shown to other roles.")
    body = [
        html.H2("Privacy", className="h5"),
        html.Dl(rows, className="mb-2"),
        html.P(odds_sentence(ans.epsilon), id=ids.PANEL_ODDS, className="small"),
    ]
    if ans.dp and ans.group_epsilon:
        driver = driver_block(ans, released=True)
        if driver is not None:
            body.append(driver)
        body.append(group_table(ans, granted))
    if granted is Role.OWNER:
        body += [dbc.Alert(w, color="warning", className="small py-2")
                 for w in ans.realized_warnings]
    if not ans.dp:
        body.append(dbc.Alert(
            [html.Strong("Not differentially private as labelled. "),
             f"Each record is noised separately and the ε was searched on the data, so the "
             f"released statistic's privacy loss is at least ε = {fmt(ans.effective_epsilon)} "
             "(effective ε), not the labelled one. Use sound mode to share."],
            color="danger", id=ids.PANEL_EFFECTIVE, className="small"))
    for flag in ans.flags:
        body.append(dbc.Alert(flag, color="warning", className="small py-2"))
    body.append(details(ans))
    body.append(budget_meter(ans, granted))
    return dbc.Card(dbc.CardBody(body), className="privacy-panel")


COMPARE_MODE = ("Compare draws the three noise levels in sound mode (central DP): paper mode "
                "(PyDPLib) has no nested tiers to compare. Switch Compare off to draw paper "
                "mode.")
"""What compare mode draws when paper mode is chosen (said, never switched silently)."""


def compare_spent(answers: list[ViewAnswer]) -> str:
    """What this screen took from the budget for the three tiers, as the ledger charged."""
    if all(a.cached for a in answers):
        return "0 — all three were released to your role before, opened free"
    return f"{fmt(sum(a.epsilon_charged for a in answers))} for the three tiers"


def compare_panel(answers: list[ViewAnswer], granted: Role) -> dbc.Card:
    """The compared tiers' privacy costs and errors, and the budget after this screen (from
    the answers of this very release, so never a figure from an earlier screen)."""
    owner = granted is Role.OWNER and any(a.realized_noise_percent is not None
                                          for a in answers)
    head = ["Noise level", "ε", "Taken now", "Typical error"] + (["Realized"] if owner else [])
    rows = []
    for a in answers:
        taken = "0 (stored)" if a.cached else fmt(a.epsilon_charged)
        rel = a.expected_relative_error
        cells = [f"{NOISE_LABELS[a.tier]}", fmt(a.epsilon), taken,
                 "–" if rel is None or not math.isfinite(rel) else f"{rel:.1f} %"]
        if owner:
            cells.append("–" if a.realized_noise_percent is None
                         else f"{a.realized_noise_percent:.2f} %")
        rows.append(cells)
    table = _table("Each tier's privacy cost (ε), what it took from your budget now and its "
                   "typical error", head, rows)
    return dbc.Card(dbc.CardBody([
        html.H2("Privacy — compare (sound mode)", className="h5"),
        html.Dl(_row("Taken from your budget", compare_spent(answers), ids.PANEL_SPENT,
                     "Exactly what the privacy ledger charged your role's budget for this "
                     "screen."), className="mb-2"),
        table,
        html.P("All three are central DP, drawn on one scale. They are nested: the "
               "medium-noise answer is the low-noise one plus independent noise, and the "
               "high-noise one is the medium one plus noise.", className="small"),
        html.P(odds_sentence(max(a.epsilon for a in answers)), id=ids.PANEL_ODDS,
               className="small"),
        budget_meter(answers[-1], granted),
    ]), className="privacy-panel")
