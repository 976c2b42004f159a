"""A good generator that takes its time, so a test can stop its worker part-way."""

import time

from ._common import Model, tones


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    time.sleep(0.4)
    return tones(model, category, n, seed)
