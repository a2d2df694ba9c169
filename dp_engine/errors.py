"""One exception hierarchy for every bad input the engine can meet.

Each message is written for the person at the dashboard (a clinician or a data
officer): it says what is wrong and what to do, never a stack-trace fragment.
"""

from __future__ import annotations


class DPError(ValueError):
    """Base class: a request the engine refuses, with a message a user can act on."""


class EmptyDataError(DPError):
    """No usable values (empty, or every value missing)."""


class InvalidEpsilonError(DPError):
    """ε is not a finite positive number."""


class InvalidBoundsError(DPError):
    """Public bounds are missing, not finite, or lower >= upper."""


class UnknownQueryError(DPError):
    """Unknown query type, statistic, view or noise factor."""


class UnknownCategoryError(DPError):
    """A value or category that is not in the column's public category list."""


class DataTypeError(DPError):
    """The values do not have the type the operation needs."""


class BudgetExceededError(DPError):
    """A release would take a privacy budget past its limit."""


class NotNestableError(DPError):
    """A release cannot be refined to a noisier tier by post-processing."""


class SchemaError(DPError):
    """A dataset schema (public metadata) is invalid or incomplete."""
