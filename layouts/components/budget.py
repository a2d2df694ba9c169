"""Budgets in words: the role's shared budget, this user's part of it, the dataset's cap.

Drawn from public figures only (what the ledger charged); the numbers come from the ledger's
status (services/ledger/records.py) or an answer's copy of it. Layouts never query.
"""

from __future__ import annotations

from dataclasses import dataclass

import dash_bootstrap_components as dbc
from dash import html

from layouts import ids
from layouts.components.accessible import progress
from layouts.components.figures import fmt
from services.identity.roles import Role
from services.ledger.records import AccountStatus

CAP_WARNING = 0.8
"""Share of the dataset cap at which every page warns."""

PEERS = {Role.OWNER: "data owners", Role.COLLABORATOR: "collaborators",
         Role.THIRD_PARTY: "third parties"}


@dataclass(frozen=True)
class BudgetFigures:
    """What a budget block shows, for the paying role."""

    role: Role
    limit: float | None
    spent: float
    user_spent: float
    user_limit: float | None
    loss: float
    cap: float | None

    @classmethod
    def of(cls, status: AccountStatus) -> BudgetFigures:
        return cls(Role(status.role.role), status.role.limit, status.role.spent,
                   status.user.spent, status.user.limit, status.dataset.loss,
                   status.dataset.cap)


def shared_text(b: BudgetFigures, extra: float = 0.0) -> str:
    """"shared by all collaborators: ε X of Y used; you used Z" (after ``extra`` more)."""
    spent, mine = b.spent + extra, b.user_spent + extra
    own = f"you used {fmt(mine)}" + (f" of your limit {fmt(b.user_limit)}"
                                    if b.user_limit is not None else "")
    if b.limit is None:
        return f"{b.role.label} role: no budget limit; you used ε {fmt(mine)}"
    return (f"Shared by all {PEERS[b.role]}: ε {fmt(spent)} of {fmt(b.limit)} used; {own}")


def cap_share(loss: float, cap: float | None) -> float | None:
    return None if cap is None else (loss / cap if cap > 0 else 1.0)


def cap_text(loss: float, cap: float | None) -> str:
    if cap is None:
        return f"Dataset total privacy loss: ε {fmt(loss)} (no cap set)"
    return f"Dataset total privacy loss: ε {fmt(loss)} of its cap {fmt(cap)}"


def cap_warning(loss: float, cap: float | None) -> dbc.Alert | None:
    """A warning from 80 % of the cap on; past it non-owners are refused."""
    share = cap_share(loss, cap)
    if share is None or share < CAP_WARNING:
        return None
    text = (f"This dataset has used {share * 100:.0f} % of its privacy-loss cap. "
            "New releases that would pass the cap are refused for everyone but the data "
            "owner; released views stay available free.")
    return dbc.Alert(text, color="danger" if share >= 1 else "warning",
                     className="small py-2 mb-1")


def budget_block(b: BudgetFigures, *, extra: float = 0.0, title: str = "Privacy budget "
                 "on this dataset") -> html.Div:
    """The budget block of the panel; ``extra``: a previewed release's cost, shown as after."""
    children: list = [html.Div(title, className="small text-muted")]
    if b.limit is not None:
        used = (b.spent + extra) / b.limit * 100 if b.limit else 100.0
        colour = "success" if used < 60 else "warning" if used < 90 else "danger"
        children.append(html.Div(progress(used, f"{used:.0f} %", "Privacy budget used",
                                          colour), className="my-1"))
    children.append(html.Div(shared_text(b, extra), className="small",
                             id=ids.EX_BUDGET_SHARED))
    children.append(html.Div(cap_text(b.loss, b.cap), className="small text-muted"))
    warning = cap_warning(b.loss, b.cap)
    if warning is not None:
        children.append(warning)
    return html.Div(children, id=ids.EX_BUDGET)
