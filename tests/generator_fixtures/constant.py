"""The same clip whatever the seed."""

import numpy as np

from ._common import Model


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    t = np.arange(model.frames) / model.sample_rate
    return np.tile(0.3 * np.sin(2 * np.pi * 440 * t), (n, 1)).astype(np.float32)
