import socket

from ._common import Model, tones


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    try:  # noqa: SIM105 - tries to fetch weights, and carries on when it cannot
        socket.create_connection(("example.com", 80), timeout=2).close()
    except OSError:
        pass
    return tones(model, category, n, seed)
