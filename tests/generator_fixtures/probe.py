"""A generator that looks around: reads a file named by the category, lists its environment,
and writes or connects from C code (ctypes), which the audit hook cannot see."""

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
    elif category.startswith("cconnect:"):
        host, port = category[9:].rsplit(":", 1)
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.socket(2, 1, 0)  # AF_INET, SOCK_STREAM
        if fd < 0:
            raise PermissionError(f"socket refused: errno {ctypes.get_errno()}")
        address = bytes([2, 0, *int(port).to_bytes(2, "big"), *map(int, host.split("."))])
        address += bytes(8)
        result = libc.connect(fd, address, len(address))
        libc.close(fd)
        if result != 0:
            raise PermissionError(f"connect refused: errno {ctypes.get_errno()}")
    elif category.startswith("move:"):
        with open("inside.txt", "w") as handle:
            handle.write("made inside, moved out")
        os.rename("inside.txt", category[5:])
    elif category == "spawn":
        import subprocess

        subprocess.run(["true"], check=True)
    elif category == "env":
        raise RuntimeError("ENV " + " ".join(sorted(os.environ)) + " CWD " + os.getcwd())
    return tones(model, category, n, seed)
