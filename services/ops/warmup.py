"""Warm at boot what the first figure needs, in the background (issue 20, cold start).

``import app`` loads no heavy module it can do without (scipy's statistics and optimizer,
DuckDB, the studio's extras are imported where used), so the server answers within seconds.
The first figure would then pay for the rest: scipy.special, the engine's first plans,
plotly's validators, and — with ``COHORT_OFFLOAD_UNCACHED=1`` — spawning the worker's child
process and building its services (seconds). ``start`` does that work once, right after the
app is built, in a daemon thread (and asks the offload child to start and do the same), so a
visitor who arrives a few seconds after boot finds it done.

Nothing here reads a dataset's rows or releases anything: only public, synthetic inputs run
through the code paths, so warming costs no privacy budget and changes no ledger.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def warm_engine() -> float:
    """Import and run once the engine paths of a first view; seconds taken."""
    start = time.perf_counter()
    import numpy as np
    from scipy import special  # noqa: F401 - the count model's Gamma quantiles

    from dp_engine.sound import plan_tiers
    from dp_engine.sound.pilot import uniform_scales
    from dp_engine.sound.releases import FINE_CANDIDATES, quantile_bank, quantiles

    grids, _, _ = quantiles._grid_constants(FINE_CANDIDATES,
                                            quantiles.MAX_CDF_CANDIDATES)
    for c in grids:                      # every grid a box plot can be planned on
        quantile_bank.noise_bank(int(c) + 1)
    scales = uniform_scales([200.0, 2000.0], 0.0, 100.0)
    plan_tiers("histogram", scales, bins=np.linspace(0.0, 100.0, 11))
    plan_tiers("mean", scales)
    plan_tiers("quantiles", scales)
    return time.perf_counter() - start


def warm(services: Any, figures: Callable[[], None] | None = None) -> None:
    """The warm-up itself (the thread's body): never raises, logs what it did.

    ``figures`` warms the web layer's figure code (the core imports no plotting library).
    """
    try:
        offload = getattr(getattr(services, "releases", None), "offload", None)
        if offload is not None:
            offload.warm()                   # the child starts and warms in parallel
        took = warm_engine()
        if figures is not None:
            figures()
        log.info("Warm-up done in %.1f s (engine, figures%s).", took,
                 ", offload child starting" if offload is not None else "")
    except Exception:  # noqa: BLE001 - a failed warm-up only leaves the first view slower
        log.warning("Warm-up failed; the first view will be slower.", exc_info=True)


def start(services: Any, figures: Callable[[], None] | None = None) -> threading.Thread:
    """Run ``warm`` in a daemon thread; returns it (tests and benches may join it)."""
    thread = threading.Thread(target=warm, args=(services, figures), name="warm-up",
                              daemon=True)
    thread.start()
    return thread
