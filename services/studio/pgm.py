"""Estimation and sampling of the synthetic copy by ``mbi`` (Private-PGM): post-processing.

The noisy marginals MST measured become ``mbi`` linear measurements (identity queries, the
Laplace noise's standard deviation √2·scale); mirror descent fits a graphical model with n̂
records, whose junction tree is sampled. mbi and jax are imported here only, when a copy is
made, with 64-bit floats (mbi's advice for large tables) and jax's compilation cache off.
mbi samples with numpy's global generator: it is seeded from ours for the draw and restored.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from dp_engine.errors import DPError
from dp_engine.release.synthetic import Measurements

ITERS = 1000
"""Mirror-descent iterations (mbi's default); tests pass fewer."""
_GLOBAL_RNG = threading.Lock()


def _mbi() -> Any:
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_enable_compilation_cache", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mbi
    return mbi


def require() -> None:
    """A clear message, before anything is charged, when the studio extra is not installed."""
    from importlib.util import find_spec

    missing = [name for name in ("mbi", "opendp") if find_spec(name) is None]
    if missing:
        raise DPError("Synthetic copies are not installed on this server (missing: "
                      f"{', '.join(missing)}); ask the administrator to install the "
                      "'studio' extra: pip install -e '.[studio]'.")


def library_versions() -> dict[str, str]:
    """Versions of the libraries a synthetic copy was made with (for the report)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("mbi", "jax", "opendp"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def synthesize_codes(m: Measurements, rng: np.random.Generator, *, iters: int = ITERS,
                     progress: Callable[[float], None] | None = None) -> np.ndarray:
    """(n̂, columns) level indices sampled from the model fitted to the measurements.

    ``progress(fraction)`` is told how far the fit is (mbi calls back every few steps)."""
    mbi = _mbi()
    names, plan = m.domain.names, m.plan
    domain = mbi.Domain(names, m.domain.sizes)
    measured = [mbi.LinearMeasurement(np.asarray(y, dtype=float), (names[j],),
                                      stddev=math.sqrt(2) * plan.one_way_scale)
                for j, y in enumerate(m.one_way)]
    measured += [mbi.LinearMeasurement(np.asarray(y, dtype=float), (names[a], names[b]),
                                       stddev=math.sqrt(2) * plan.two_way_scale)
                 for (a, b), y in zip(m.edges, m.two_way, strict=True)]
    steps = [0]

    def step(_state: Any) -> None:
        steps[0] += 1
        if progress is not None:
            progress(min(1.0, steps[0] * getattr(mbi.estimation, "CALLBACK_EVERY", 50) / iters))

    model = mbi.estimation.MirrorDescent().estimate(domain, measured, known_total=float(m.rows),
                                                     iters=iters, callback_fn=step)
    with _GLOBAL_RNG:
        state = np.random.get_state()
        np.random.seed(int(rng.integers(2**32)))
        try:
            data = model.synthetic_data(rows=m.rows)
        finally:
            np.random.set_state(state)
    return np.column_stack([np.asarray(data.data[n], dtype=np.intp) for n in names])
