"""What the ledger hands back: stored rows, budget and loss statuses, a served answer, a quote."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.ledger.plan import ReleasePlan


@dataclass(frozen=True)
class StoredRelease:
    """One served release as stored (``epsilon``: what the role paid when ``dp``; a paper-mode
    row records its effective ε as a lower bound and was charged nothing)."""

    id: int
    created_at: datetime
    user: str
    role: str
    dataset_id: str
    dataset_version: str
    query_key: str
    tier: int
    mechanism: str
    epsilon: float
    answer: dict
    dataset_loss: float = 0.0
    dp: bool = True

    @property
    def charged(self) -> float:
        """ε taken from the role's budget (0 for a release that is not DP)."""
        return self.epsilon if self.dp else 0.0


@dataclass(frozen=True)
class TierRecord:
    """One row of the tier store: a tier of a query, or a calibration release."""

    id: int
    created_at: datetime
    dataset_id: str
    dataset_version: str
    query_key: str
    tier: int
    mechanism: str
    epsilon: float
    dataset_loss: float
    refined_from: int | None
    dp: bool
    drawn: str = ""                        # fresh, refined, sharpened or bridged
    disclosed_at: datetime | None = None   # None: only the owner has seen it


@dataclass(frozen=True)
class BudgetStatus:
    """Spend of one (role, dataset) budget in the current period; ``None`` limit = unlimited."""

    role: str
    dataset_id: str
    limit: float | None
    spent: float
    remaining: float | None
    renews_at: datetime | None = None


@dataclass(frozen=True)
class UserStatus:
    """One user's spend inside a (role, dataset) budget this period; ``None`` = no limit."""

    user: str
    role: str
    dataset_id: str
    limit: float | None
    spent: float
    remaining: float | None


@dataclass(frozen=True)
class DatasetStatus:
    """A dataset's total (dataset-level) loss against its cap (``None`` = no cap).

    ``unsound_loss`` sums paper-mode releases' effective ε: a lower bound on a loss that is
    not differentially private, kept apart from ``loss``.
    """

    dataset_id: str
    loss: float
    cap: float | None
    remaining: float | None
    unsound_loss: float = 0.0


@dataclass(frozen=True)
class AccountStatus:
    """Everything a page shows about budgets for one (role, dataset, user)."""

    role: BudgetStatus
    user: UserStatus
    dataset: DatasetStatus


@dataclass(frozen=True)
class Served:
    """The door's answer: the paying role's public answer and what this call cost.

    ``charged``: ε taken from the role's budget by this call (0 when cached or not DP);
    ``loss_added``: what the dataset-level loss grew by (internal releases included);
    ``plan``: the plan that priced it (None when served from the cache).
    """

    answer: Mapping[str, Any]
    release_id: int
    cached: bool
    charged: float
    loss_added: float
    status: AccountStatus
    plan: ReleasePlan | None = None
    stored: StoredRelease | None = None    # the served row as stored (no extra read)


@dataclass(frozen=True)
class Quote:
    """What a release would cost now, read without computing or spending (for a preview).

    ``plan`` is None when the answer is cached or an internal release it is built from
    (``missing_inputs``) has not been released yet; ``refusal`` is the message a release
    would be refused with now (None if it fits).
    """

    cached: bool
    plan: ReleasePlan | None
    missing_inputs: tuple[str, ...]
    cost: float
    loss_growth: float
    status: AccountStatus
    refusal: str | None


@dataclass(frozen=True)
class Look:
    """What one screen read in one transaction (``Ledger.look``)."""

    quotes: list[Quote | Exception]
    status: AccountStatus
    internals: Mapping[str, Any]          # calibration releases by key (decoded)
    mine: list[StoredRelease]             # the role's newest view releases on the dataset
