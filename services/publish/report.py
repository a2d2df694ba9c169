"""The JSON release report of one published figure: what was released, how, and when.

Only the public answer (DP numbers, public metadata) and the ledger's record of the release.
(``services.views.report`` is being written on another branch; unify the field names there.)
"""

from __future__ import annotations

from typing import Any

from services.ledger.records import StoredRelease
from services.views.answer import ViewAnswer

REPORT_VERSION = 1


def report_of(answer: ViewAnswer, release: StoredRelease) -> dict[str, Any]:
    """A JSON-able report of ``answer`` as the ledger served it in ``release``."""
    return {
        "report_version": REPORT_VERSION,
        "release_id": release.id,
        "released_at": release.created_at.isoformat(),
        "dataset_id": answer.dataset_id,
        "dataset_title": answer.dataset_title,
        "dataset_version": release.dataset_version,
        "view": answer.view,
        "x": answer.x,
        "x_label": answer.x_label,
        "unit": answer.unit,
        "group": answer.group,
        "group_label": answer.group_label,
        "role": answer.role,
        "tier": answer.tier,
        "band_percent": list(answer.band),
        "differentially_private": answer.dp,
        "mechanism": answer.mechanism_label,
        "epsilon": answer.epsilon,
        "epsilon_charged": release.charged,
        "sensitivity": answer.sensitivity,
        "groups": list(answer.groups),
        "cells": list(answer.cells),
        "values": answer.values,
        "ci95_low": answer.ci_low,
        "ci95_high": answer.ci_high,
        "expected_error": answer.expected_error,
        "expected_error_unit": answer.error_unit,
        "expected_relative_error_percent": answer.expected_relative_error,
        "n_estimate": answer.n_estimate,
        "calibration_note": answer.calibration_note,
        "flags": list(answer.flags),
    }
