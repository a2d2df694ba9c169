"""Warm the engine at boot: what a first view's plan needs, on public synthetic inputs.

``import app`` loads no heavy module it can do without, so the server answers within seconds;
the first figure would then pay for scipy.special, the engine's first plans and the noise
banks of the box plot's error model. ``warm_engine`` does that work once (the web layer runs
it in a background thread after the app is built, ``callbacks.server.warmup``, and a runner
child runs it when it starts). Nothing here reads a dataset or releases anything.
"""

from __future__ import annotations

import time


def warm_engine() -> float:
    """Import and run once the engine paths of a first view; seconds taken."""
    start = time.perf_counter()
    import numpy as np
    from scipy import special  # noqa: F401 - the count model's Gamma quantiles

    from dp_engine.sound import plan_tiers
    from dp_engine.sound.pilot import uniform_scales
    from dp_engine.sound.releases import FINE_CANDIDATES, quantile_bank, quantiles

    grids, _, _ = quantiles._grid_constants(FINE_CANDIDATES, quantiles.MAX_CDF_CANDIDATES)
    for c in grids:                      # every grid a box plot can be planned on
        quantile_bank.noise_bank(int(c) + 1)
    scales = uniform_scales([200.0, 2000.0], 0.0, 100.0)
    plan_tiers("histogram", scales, bins=np.linspace(0.0, 100.0, 11))
    plan_tiers("mean", scales)
    plan_tiers("quantiles", scales)
    return time.perf_counter() - start


def warm_job(_services: object, _progress: object) -> float:
    """``warm_engine`` as runner work (in a runner child: its own engine)."""
    return warm_engine()
