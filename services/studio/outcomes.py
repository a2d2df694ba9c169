"""A finished studio run as the Release page needs it, kept on the server for its downloads.

``outcome`` adds to a charged run its model check, figure summaries and release report (all
post-processing: nothing is charged again). ``RecentOutcomes`` keeps each user's last few
outcomes so the DP CSV and the report are downloaded from the server by run id; the browser
never holds the table. The store lives in the process: with several workers a download may
land on another one, which then answers "run it again" (a new, charged draw).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from dp_engine.errors import DPError
from services.studio.model_check import binary_targets, model_check
from services.studio.report import report
from services.studio.summaries import run_summaries

if TYPE_CHECKING:
    from services.studio.service import StudioRun

KEEP_PER_USER = 3
KEEP_TOTAL = 12


@dataclass(frozen=True)
class Outcome:
    """One run with what the page shows and downloads."""

    run: StudioRun
    model: dict[str, Any] | None
    model_note: str
    summaries: dict[str, Any]
    report: dict[str, Any]


def outcome(run: StudioRun, original: pd.DataFrame, target: str | None) -> Outcome:
    """The run's model check (when ``target`` is a released binary column), figure
    summaries and report. Owner only: it reads the original."""
    model, note = None, ""
    released = list(run.copy.frame.columns)
    if target:
        if target not in binary_targets(run.schema, released):
            note = ("The model check needs a released yes/no column as its target; "
                    f"'{target}' is not one in this run.")
        else:
            try:
                model = model_check(original, run.copy.frame, run.schema, target,
                                    paired=True).to_dict()
            except (DPError, ValueError) as exc:
                note = f"The model check could not run: {exc}"
    summaries = run_summaries(original, run.copy.frame, run.schema, run.answer["metrics"],
                              include_original=True)
    rep = report(run.answer, dataset=run.dataset_title, release_id=run.served.release_id,
                 model=model)
    return Outcome(run, model, note, summaries, rep)


class RecentOutcomes:
    """Each user's last ``KEEP_PER_USER`` outcomes (at most ``KEEP_TOTAL`` in all)."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str], Outcome] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, user: str, item: Outcome) -> None:
        with self._lock:
            self._items[(user, item.run.run_id)] = item
            mine = [k for k in self._items if k[0] == user]
            for key in mine[:-KEEP_PER_USER]:
                del self._items[key]
            while len(self._items) > KEEP_TOTAL:
                self._items.popitem(last=False)

    def get(self, user: str, run_id: object) -> Outcome | None:
        """The user's outcome ``run_id`` (another user's id finds nothing)."""
        if not isinstance(run_id, str):
            return None
        with self._lock:
            return self._items.get((user, run_id))
