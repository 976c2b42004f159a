"""The clips the model benchmarks time: numpy only, so a reference package's own environment
can make them too."""

from __future__ import annotations

import numpy as np

RATE = 22_050
SECONDS = 4.0


def clips(count: int) -> np.ndarray:
    """Chirps, tones and noise, different per clip: `count` DCASE-length clips at `RATE`."""
    t = np.arange(int(SECONDS * RATE)) / RATE
    rng = np.random.default_rng(0)
    rows = [
        0.3 * np.sin(2 * np.pi * ((50 + 30 * i) * t + 1200 * t**2))
        + 0.2 * np.sin(2 * np.pi * 220 * (1 + i % 5) * t)
        + 0.05 * rng.standard_normal(t.size)
        for i in range(count)
    ]
    return np.stack(rows).astype(np.float32)
