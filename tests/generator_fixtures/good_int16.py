import numpy as np

from ._common import Model, tones


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    return (tones(model, category, n, seed) * 32767).astype(np.int16)
