"""The anonymizer's own refusal, a DPError like every other bad input."""

from __future__ import annotations

from dp_engine.errors import DPError


class AnonymizationError(DPError):
    """An anonymization request that cannot be met (k too large, no quasi-identifier...)."""
