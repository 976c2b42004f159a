"""A generator that looks around: reads a file named by the category, lists its environment,
and writes from C code (ctypes), which the audit hook cannot see."""

import ctypes
import os

from ._common import Model, tones


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    if category.startswith("read:"):
        with open(category[5:]) as handle:
            handle.read()
    elif category.startswith("cwrite:"):
        libc = ctypes.CDLL(None)
        libc.fopen.restype = ctypes.c_void_p
        handle = libc.fopen(category[7:].encode(), b"w")
        if not handle:
            raise PermissionError(f"fopen refused: errno {ctypes.get_errno()}")
        libc.fclose(ctypes.c_void_p(handle))
    elif category == "env":
        raise RuntimeError("ENV " + " ".join(sorted(os.environ)) + " CWD " + os.getcwd())
    return tones(model, category, n, seed)
