import os

from ._common import Model, tones

# Beside this file: outside the scratch folder, inside the (read-only) code.
TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "escaped.txt")


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    with open(TARGET, "w") as handle:
        handle.write("escaped")
    return tones(model, category, n, seed)
