"""A tiny tone generator the fixtures build on."""

import os

import numpy as np


class Model:
    def __init__(self, sample_rate=None, duration_s=None):
        self.sample_rate = sample_rate or int(os.environ.get("FOLEY_SAMPLE_RATE", 22050))
        self.duration_s = duration_s or float(os.environ.get("FOLEY_CLIP_DURATION_S", 4.0))

    @property
    def frames(self):
        return round(self.sample_rate * self.duration_s)


def tones(model, category, n, seed, frames=None):
    frames = frames or model.frames
    out = np.zeros((n, frames), dtype=np.float32)
    t = np.arange(frames) / model.sample_rate
    for i in range(n):
        rng = np.random.default_rng([seed, i, len(category)])
        out[i] = 0.5 * np.sin(2 * np.pi * rng.uniform(100, 2000) * t)
    return out
