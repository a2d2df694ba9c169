"""Noise factors and their bands of noise, in percent (the PyDPLib settings)."""

from __future__ import annotations

from dp_engine.errors import UnknownQueryError

NOISE_BANDS: dict[int, tuple[float, float]] = {0: (0.0, 5.0), 1: (5.0, 10.0), 2: (10.0, 20.0)}
NOISE_LABELS: dict[int, str] = {0: "low", 1: "medium", 2: "high"}


def band(noise_factor: object) -> tuple[float, float]:
    """The (low, high) percent band of a noise factor; UnknownQueryError otherwise."""
    try:
        key = int(noise_factor)  # type: ignore[call-overload]
        numeric = float(noise_factor)  # type: ignore[arg-type]
        if key != numeric or isinstance(noise_factor, bool):
            raise ValueError
        return NOISE_BANDS[key]
    except (TypeError, ValueError, KeyError):
        raise UnknownQueryError(
            f"Unknown noise factor {noise_factor!r}: use 0 (low, 0–5 %), "
            "1 (medium, 5–10 %) or 2 (high, 10–20 %)."
        ) from None
