"""``ViewAnswer``: the public answer to one Explore view, safe for any browser it is sent to."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class ViewAnswer:
    """Only DP numbers and public metadata, labelled with the mechanism and ε that made them.

    The first block is stored with the paying role's served copy; the second is filled per
    request from the ledger (what this request cost, the budgets after it).
    ``realized_noise_percent`` is computed from the true data and set for the owner only.
    ``figure`` names the figure kind (layouts/figures.py); ``dp`` is False for paper mode,
    whose ``effective_epsilon`` is a lower bound of its privacy loss.

    Per group (sound mode; one entry per ``groups``): ``group_epsilon`` (None: withheld),
    ``group_expected_error`` (absolute, in ``error_unit``: the column's unit, unit² for a
    variance, patients or records for counts), ``group_expected_relative_error`` (percent of
    the statistic's own scale, the one definition of ``error_definition``), ``withheld`` and
    ``withheld_reason``. ``epsilon`` is the largest group ε: what the view costs.
    ``expected_error`` / ``expected_relative_error`` are the largest over the shown groups.
    Owner only: ``group_realized_noise_percent`` and ``realized_warnings`` (groups whose
    realized noise exceeds the band). ``privacy_unit`` is "patient" (at most ``contribution``
    rows per patient are used) or "row".
    """

    dataset_id: str
    dataset_title: str
    view: str
    x: str
    x_label: str
    unit: str
    group: str | None
    group_label: str
    mechanism: str                 # "sound" | "paper"
    mechanism_label: str
    role: str
    tier: int
    band: tuple[float, float]
    epsilon: float
    sensitivity: str
    groups: list[str]
    cells: list[str]               # bin / category labels, or quantile names, or the statistic
    values: list[list[float]]
    ci_low: list[list[float]]
    ci_high: list[list[float]]
    expected_error: float
    expected_relative_error: float
    calibration_note: str
    n_estimate: int
    figure: str = "bars"           # "histogram" | "bars" | "box"
    statistic_label: str = ""      # e.g. "Mean", "Variance of" (bars)
    error_unit: str = ""           # unit of the expected error ("patients" for counts)
    dp: bool = True
    realized_noise_percent: float | None = None
    effective_epsilon: float | None = None
    flags: list[str] = field(default_factory=list)
    group_epsilon: list[float | None] = field(default_factory=list)
    group_expected_error: list[float | None] = field(default_factory=list)
    group_expected_relative_error: list[float | None] = field(default_factory=list)
    withheld: list[bool] = field(default_factory=list)
    withheld_reason: list[str] = field(default_factory=list)
    group_n_estimate: list[float | None] = field(default_factory=list)   # public DP sizes
    error_scale: list[float | None] = field(default_factory=list)   # what relative errors are of
    error_definition: str = ""
    privacy_unit: str = "row"      # "patient" | "row"
    contribution: int = 1          # most rows of one patient used (k)
    group_realized_noise_percent: list[float | None] | None = None
    realized_warnings: list[str] = field(default_factory=list)
    # per request, from the ledger
    cached: bool = False
    epsilon_charged: float = 0.0
    budget_limit: float | None = None
    budget_spent: float = 0.0
    budget_remaining: float | None = None
    user_limit: float | None = None
    user_spent: float = 0.0
    dataset_loss: float = 0.0
    dataset_cap: float | None = None

    def without_truth(self) -> ViewAnswer:
        """This answer with everything computed from true values removed (non-owners)."""
        return replace(self, realized_noise_percent=None, group_realized_noise_percent=None,
                       realized_warnings=[])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ViewAnswer:
        d = dict(d)
        d["band"] = tuple(d["band"])
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
