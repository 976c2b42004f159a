"""The process that runs submitted generator code, started by `sandbox.Sandbox`.

Run as ``python -I -B runner.py CONFIG.json``, inside the sandbox; self-contained (standard
library and numpy only) so it never needs the platform's code or settings on its import path. It:

1. keeps the original stdout as a private reply channel and points fd 1 at stderr, so whatever
   the generator prints goes to the log and cannot corrupt the replies;
2. installs an audit hook that notes network use (the sandbox has no network; the note lets the
   report say what was tried);
3. imports the module, calls `load_model`, then answers requests read from stdin, one JSON object
   a line: ``{"op": "generate", "category": ..., "n": ..., "seed": ..., "out": "name.npy"}``.
   Output goes to ``out/name.npy`` in the scratch folder (never pickles); each reply is one JSON
   line naming it, or the error, in the report's words where the sandbox stopped something, with
   the tail of its traceback, and every network attempt so far.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import sys
import time
import traceback

VIOLATIONS: list[dict] = []
SCRATCH = ""
LAST_KILL: list[int] = []
WRITING: set[str] = set()  # paths opened for writing, to tell a refused write from a read
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC

# --- what the generator tried -------------------------------------------------------------------
# The sandbox around this process enforces the rules; the audit hook only notes what the generator
# attempted, so that the report can name it. The network is the one attempt that may not fail
# visibly (a datagram to the sandbox's own loopback is "sent"), so any use of it is recorded.

_NETWORK_EVENTS = {
    "socket.connect",
    "socket.bind",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.sendto",
    "socket.sendmsg",
    "urllib.Request",
}


def _note(code: str, message: str) -> None:
    if len(VIOLATIONS) < 20:
        VIOLATIONS.append({"code": code, "message": message})


def _literal_address(host) -> bool:
    """Whether a name lookup is only the parsing of an address (the connect itself is noted)."""
    import ipaddress

    try:
        ipaddress.ip_address(host.decode() if isinstance(host, bytes) else host)
    except (ValueError, TypeError, UnicodeDecodeError):
        return False
    return True


def _hook(event: str, args: tuple) -> None:
    if event == "socket.getaddrinfo" and _literal_address(args[0]):
        return
    if event in _NETWORK_EVENTS:
        target = (
            args[1] if event.startswith("socket.") and event != "socket.getaddrinfo" else args[0]
        )
        if isinstance(target, tuple):
            target = ":".join(str(part) for part in target)
        _note("network", f"network unavailable: the sandbox has no network ({event} {target})")
    elif event == "os.kill":
        LAST_KILL[:] = [args[0]]
    elif (
        event == "open"
        and isinstance(args[2], int)
        and args[2] & _WRITE_FLAGS
        and isinstance(args[0], str | bytes)
        and len(WRITING) < 1000
    ):
        WRITING.add(os.fsdecode(args[0]))


def _outside(path) -> bool:
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return False
    real = os.path.realpath(path)
    return not (real == SCRATCH or real.startswith(SCRATCH + os.sep))


def _classify(exc: BaseException) -> tuple[str, str] | None:
    """What an exception says the sandbox stopped, in the report's words, if anything."""
    if isinstance(exc, MemoryError):
        return "memory", f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, OSError):
        return None
    # A rename or a link names two paths: the one outside is what was refused.
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    path = next((p for p in paths if _outside(p)), paths[0] if paths else None)
    if exc.errno == errno.EAGAIN and path is None:
        return "process_limit", f"process limit reached: {exc}"
    if isinstance(exc, ProcessLookupError):
        target = f" {LAST_KILL[0]}" if LAST_KILL else ""
        return "process", f"no process outside the sandbox is visible (signal to pid{target})"
    if path is not None and _outside(path):
        written = exc.errno == errno.EROFS or os.fsdecode(path) in WRITING
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) and written:
            return "write_outside", f"writing outside its folder refused (read-only): {path}"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "not_visible", f"file outside its folder not readable: {path}"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EXDEV):
            return "not_visible", f"file outside its folder not visible: {path}"
    if exc.errno in (errno.ENETUNREACH, errno.ECONNREFUSED, errno.EHOSTUNREACH):
        return "network", f"network unavailable: {exc}"
    return None


# --- requests ------------------------------------------------------------------------------------


def _reply(channel, payload: dict) -> None:
    payload["violations"] = list(VIOLATIONS)
    channel.write(json.dumps(payload) + "\n")
    channel.flush()


def _error(exc: BaseException, code: str | None = None) -> dict:
    found = _classify(exc)
    message = f"{type(exc).__name__}: {exc}"
    if found is not None:
        code, message = found
    tail = traceback.format_exception(exc)
    return {
        "event": "error",
        "code": code or "exception",
        "message": message[:1000],
        "traceback": "".join(tail)[-4000:],
    }


def _as_array(value):
    import numpy as np

    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"generate returned {type(value).__name__}, not an array of samples")
    return np.ascontiguousarray(array)


def main(config_path: str) -> int:
    global SCRATCH
    with open(config_path) as handle:
        config = json.load(handle)
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.dont_write_bytecode = True

    SCRATCH = os.path.realpath(config["scratch"])
    os.chdir(SCRATCH)
    sys.addaudithook(_hook)
    sys.path[:0] = config["sys_path"]

    import numpy as np

    started = time.perf_counter()
    try:
        module = importlib.import_module(config["module"])
    except BaseException as exc:
        _reply(channel, _error(exc, "import"))
        return 1
    missing = [
        name for name in ("load_model", "generate") if not callable(getattr(module, name, None))
    ]
    if missing:
        _reply(
            channel,
            {
                "event": "error",
                "code": "missing_function",
                "message": f"the module has no {' or '.join(missing)} function",
                "traceback": "",
            },
        )
        return 1
    try:
        model = module.load_model(config.get("model_path"))
        sample_rate = getattr(model, "sample_rate", None)
    except BaseException as exc:
        _reply(channel, _error(exc, "load_model"))
        return 1
    _reply(
        channel,
        {
            "event": "loaded",
            "sample_rate": sample_rate
            if isinstance(sample_rate, int | float)
            else repr(sample_rate),
            "has_text": callable(getattr(module, "generate_from_text", None)),
            "seconds": time.perf_counter() - started,
        },
    )

    out_dir = os.path.join(SCRATCH, "out")
    os.makedirs(out_dir, exist_ok=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("op") == "exit":
            break
        started = time.perf_counter()
        try:
            if request["op"] == "generate_from_text":
                value = module.generate_from_text(
                    model, request["prompt"], int(request["n"]), int(request["seed"])
                )
            elif request["op"] == "generate_from_texts":
                value = _from_texts(module, model, request)
            else:
                value = module.generate(
                    model, request["category"], int(request["n"]), int(request["seed"])
                )
            array = _as_array(value)
            name = os.path.basename(request["out"])
            np.save(os.path.join(out_dir, name), array, allow_pickle=False)
        except BaseException as exc:
            _reply(channel, _error(exc))
            continue
        _reply(
            channel,
            {
                "event": "done",
                "out": name,
                "shape": list(array.shape),
                "dtype": str(array.dtype),
                "seconds": time.perf_counter() - started,
            },
        )
    return 0


def _from_texts(module, model, request: dict):
    """Clips of several prompts in one call: the module's own batch function where it has one,
    else its single-prompt function once per prompt, stacked in prompt order."""
    import numpy as np

    prompts = [str(p) for p in request["prompts"]]
    seeds = [int(s) for s in request["seeds"]]
    per_prompt = int(request["per_prompt"])
    batch = getattr(module, "generate_from_texts", None)
    if callable(batch):
        return batch(model, prompts, per_prompt, seeds)
    parts = [
        _as_array(module.generate_from_text(model, prompt, per_prompt, seed))
        for prompt, seed in zip(prompts, seeds, strict=True)
    ]
    return np.concatenate(parts, axis=0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
