"""A generator that leaves a daemon behind: a grandchild in a session of its own (fork, setsid,
fork), outside the runner's process group. It writes a heartbeat file in the scratch folder, and
with the category "hog" also takes memory; it stops on its own after 30 s should it escape."""

import os
import time

import numpy as np

from ._common import Model, tones


def load_model(path):
    return Model()


def _daemon(category):
    kept = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if category == "hog" and len(kept) < 24:
            kept.append(np.ones(8 * 1024 * 1024))  # 64 MiB a step, every page touched
        with open("heartbeat", "w") as handle:
            handle.write(f"{time.monotonic():.6f}")
        time.sleep(0.05)


def generate(model, category, n, seed):
    if os.fork() == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                _daemon(category)
        finally:
            os._exit(0)
    os.wait()  # the middle child, gone at once: the daemon is an orphan
    if category == "hog":
        time.sleep(60)  # the call itself stays small; the daemon grows
    return tones(model, category, n, seed)
