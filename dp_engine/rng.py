"""Random generators: every random function takes an explicit ``rng``.

``None`` means a fresh generator seeded from the operating system's entropy
(``secrets``), never a fixed global seed, so production noise is unpredictable
while tests stay reproducible by passing ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import secrets

import numpy as np

RngLike = np.random.Generator | None


def as_generator(rng: RngLike) -> np.random.Generator:
    """Return ``rng`` itself, or a new OS-seeded generator when it is None."""
    if rng is None:
        return np.random.default_rng(secrets.randbits(128))
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator or None")
    return rng
