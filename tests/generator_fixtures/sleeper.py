import time

from ._common import Model


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    time.sleep(3600)
