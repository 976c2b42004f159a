import numpy as np

from ._common import Model, tones


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    out = tones(model, category, n, seed)
    out[:, 100:200] = np.nan
    return out
