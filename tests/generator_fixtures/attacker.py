"""A hostile generator: it makes one attack, named in its configuration, and carries on as a
valid generator if the attack worked. Each attack is written the plain way (no error caught), so
the report shows what the sandbox made it meet.

The configuration (passed to load_model as a JSON file): {"attack": NAME, "at": "load" or
"generate", ...the attack's arguments}.
"""

import json
import os
import signal
import socket
import time

from ._common import Model, tones


def connect_unix(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(path)


def connect_tcp(host, port):
    socket.create_connection((host, port), timeout=5).close()


def udp(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
        client.sendto(b"escaped", (host, port))


def read(path, secret=None):
    with open(path, "rb") as handle:
        data = handle.read()
    if secret is not None and secret.encode() not in data:
        raise LookupError(f"{path} was read but holds none of the worker's secrets")


def write(path):
    with open(path, "w") as handle:
        handle.write("escaped")


def write_beside_code():
    write(os.path.join(os.path.dirname(os.path.abspath(__file__)), "escaped.txt"))


def kill(pid):
    os.kill(pid, signal.SIGKILL)


def memfd(mb):
    fd = os.memfd_create("hoard")
    block = b"x" * (1 << 20)
    for _ in range(mb):
        os.write(fd, block)


def fork_bomb(count):
    children = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children.append(pid)


def allocate():
    kept = []
    while True:  # 64 MiB at a time, every page touched
        kept.append(bytearray(b"x" * (64 << 20)))


def spin():
    while True:  # CPU time without end
        pass


def sleep_forever():
    while True:
        time.sleep(3600)


def ignore_sigterm():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sleep_forever()


ATTACKS = {
    f.__name__: f
    for f in (
        connect_unix,
        connect_tcp,
        udp,
        read,
        write,
        write_beside_code,
        kill,
        memfd,
        fork_bomb,
        allocate,
        spin,
        sleep_forever,
        ignore_sigterm,
    )
}


def _attack(config):
    arguments = {k: v for k, v in config.items() if k not in ("attack", "at")}
    ATTACKS[config["attack"]](**arguments)


def load_model(path):
    with open(path) as handle:
        config = json.load(handle)
    if config.get("at") == "load":
        _attack(config)
    model = Model()
    model.config = config
    return model


def generate(model, category, n, seed):
    if model.config.get("at", "generate") == "generate":
        _attack(model.config)
    return tones(model, category, n, seed)
