"""Errors of the dataset registry; each message tells the data owner what to fix."""

from __future__ import annotations

from dp_engine.errors import DPError


class DatasetError(DPError):
    """A file that cannot be loaded as a dataset (bad encoding, layout or values)."""


class UnknownDatasetError(DatasetError):
    """A dataset id that the registry does not hold."""
