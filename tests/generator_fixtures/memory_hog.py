import numpy as np

from ._common import Model

_kept = []


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    while True:  # grows without bound, 64 MiB at a time, every page touched
        _kept.append(np.ones(8 * 1024 * 1024))
