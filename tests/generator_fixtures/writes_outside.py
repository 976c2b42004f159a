import os

from ._common import Model, tones


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    target = os.environ.get("FOLEY_FIXTURE_TARGET", "/tmp/foley-escaped.txt")
    with open(target, "w") as handle:
        handle.write("escaped")
    return tones(model, category, n, seed)
