"""The one place that decides where heavy work runs (issue 22, item 2).

Heavy work is session or service work: an Explore screen that computes (previews, pricing, a
fresh release), a studio per-record copy or synthetic copy (the MST fit), the anonymizer. It
is a module-level function ``fn(services, progress, *args)`` of plain, picklable arguments
that returns data (answers, tables, dicts) — never Dash components: the callback renders.

One interface, two ways to run it, chosen by ``COHORT_RUNNER_PROCESSES``:

- ``InlineRunner`` (0, the default; tests and ``make run``): in the caller's process.
- ``ProcessRunner`` (n ≥ 1; the deployment): ``n`` child processes per web worker, at a lower
  CPU priority (nice +10) so the threads serving cached answers are not slowed, and one more
  for quick work (``Lanes``: previews and quotes spend nothing and never queue behind a
  release or a studio fit), each with its own services built from the same configuration
  (same ledger database and datasets, so a release still goes through the one door and is
  recorded once). A child ends with its parent (``PR_SET_PDEATHSIG`` on Linux, a parent
  watchdog elsewhere): no orphans.

``call`` runs the work now and waits (the web thread only waits on a pipe); ``submit`` runs it
in the background as a job whose state lives in a ``JobStore`` under the data directory
(``services.runner.jobs``), with progress, cancel and a heartbeat: a job whose process died
reads "failed" within ``STALE_BEATS`` heartbeats, whichever worker's poll reads it. Work that
died (``JobDied``) or was cancelled charged nothing unless its ledger release had committed:
the door writes a release and its charge in one transaction after the work is done.
"""

from __future__ import annotations

from services.runner.base import JobCancelled, JobDied, Progress, Runner, no_progress
from services.runner.inline import InlineRunner
from services.runner.jobs import Jobs
from services.runner.lanes import Lanes
from services.runner.pool import ProcessRunner

__all__ = ["InlineRunner", "JobCancelled", "JobDied", "Jobs", "Lanes", "ProcessRunner",
           "Progress", "Runner", "no_progress"]
