import ctypes

from ._common import Model


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    ctypes.string_at(0)  # a segmentation fault, as a broken extension module gives
