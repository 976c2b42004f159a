"""The process that runs submitted generator code, started by `sandbox.Sandbox`.

Run as ``python -I -B runner.py CONFIG.json``; self-contained (standard library and numpy only)
so it never needs the platform's code or settings on its import path. It:

0. when it is PID 1 of a namespace of its own, forks: the first process stays as the namespace's
   init (it reaps orphans and passes on how the runner ended), the child carries on;
1. keeps the original stdout as a private reply channel and points fd 1 at stderr, so whatever
   the generator prints goes to the log and cannot corrupt the replies;
2. restricts itself with Landlock when the kernel has it: read-only access to the system, the
   Python installation and the generator's code; read-write access to its scratch folder only;
   no TCP connect or bind (Landlock ABI 4+);
3. installs an audit hook that refuses, and records, network use, writes outside the scratch
   folder, reads of other processes' /proc entries (outside a PID namespace of its own) and
   (when the kernel restrictions are missing) starting other programs;
4. imports the module, calls `load_model`, then answers requests read from stdin, one JSON object
   a line: ``{"op": "generate", "category": ..., "n": ..., "seed": ..., "out": "name.npy"}``.
   Output goes to ``out/name.npy`` in the scratch folder (never pickles); each reply is one JSON
   line naming it, or the error with the tail of its traceback, and every violation so far.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import re
import signal
import socket
import sys
import time
import traceback
from typing import NoReturn

VIOLATIONS: list[dict] = []
SCRATCH = ""
WRITABLE: list[str] = []
REFUSE_PROCESSES = False
# Outside a PID namespace of its own, /proc holds the worker's entries (its environ, maps, mem).
REFUSE_OTHER_PROCESSES = False

# --- Landlock ------------------------------------------------------------------------------------

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_CHILD_SUBREAPER = 36
_EXECUTE, _WRITE_FILE, _READ_FILE, _READ_DIR = 1, 2, 4, 8
_TRUNCATE, _IOCTL_DEV, _REFER = 1 << 14, 1 << 15, 1 << 13
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


def landlock_abi() -> int:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return max(int(libc.syscall(_SYS_CREATE_RULESET, None, 0, 1)), 0)
    except Exception:
        return 0


def apply_landlock(read_paths: list[str], write_paths: list[str], device_paths: list[str]) -> dict:
    """Restrict this process and its children; returns what was enforced."""
    abi = landlock_abi()
    if abi < 1:
        return {"filesystem": False, "tcp": False, "abi": 0}
    libc = ctypes.CDLL(None, use_errno=True)
    handled = (1 << 13) - 1
    if abi >= 2:
        handled |= _REFER
    if abi >= 3:
        handled |= _TRUNCATE
    if abi >= 5:
        handled |= _IOCTL_DEV
    attr = _RulesetAttr(handled, 3 if abi >= 4 else 0)  # 3: TCP bind and connect
    size = ctypes.sizeof(attr) if abi >= 4 else 8
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return {"filesystem": False, "tcp": False, "abi": abi}
    read = _EXECUTE | _READ_FILE | _READ_DIR

    def allow(path: str, rights: int) -> None:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= _FILE_RIGHTS
            rule = _PathBeneath(rights & handled, fd)
            libc.syscall(_SYS_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0)
        finally:
            os.close(fd)

    for path in read_paths:
        allow(path, read)
    for path in device_paths:
        allow(path, read | _WRITE_FILE | _IOCTL_DEV)
    for path in write_paths:
        allow(path, handled)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    ok = libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) == 0
    os.close(ruleset)
    return {"filesystem": ok, "tcp": ok and abi >= 4, "abi": abi}


# --- the audit hook ------------------------------------------------------------------------------

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_PATH_EVENTS = {
    "os.remove": "remove",
    "os.rename": "rename",
    "os.mkdir": "create a folder",
    "os.rmdir": "remove a folder",
    "os.symlink": "link",
    "os.link": "link",
    "os.chmod": "change the mode of",
    "os.chown": "change the owner of",
    "os.truncate": "truncate",
    "os.utime": "touch",
    "shutil.rmtree": "remove",
}
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
_PROCESS_EVENTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"}


_PROC_ENTRY = re.compile(r"^/proc/(\d+)(?:/|$)")


def _other_process(path: str) -> bool:
    """Whether `path` names another process's /proc entry (its own and its threads' are fine)."""
    # The path as written is enough: the hook refuses Python-level links to outside the folder,
    # and the system's own links into /proc (/dev/fd, /etc/mtab) lead to /proc/self.
    match = _PROC_ENTRY.match(os.path.abspath(path))
    return bool(match) and not (
        int(match[1]) == os.getpid() or os.path.exists(f"/proc/self/task/{match[1]}")
    )


def _inside(path: str) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root + os.sep) for root in WRITABLE)


def _refuse(code: str, message: str) -> None:
    if len(VIOLATIONS) < 20:
        VIOLATIONS.append({"code": code, "message": message})
    raise PermissionError(message)


def _hook(event: str, args: tuple) -> None:
    if event == "open":
        path, _mode, flags = args
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if (
            isinstance(path, str)
            and flags is not None
            and flags & _WRITE_FLAGS
            and not _inside(path)
        ):
            _refuse("write_outside", f"opened {path} for writing outside its folder")
        if REFUSE_OTHER_PROCESSES and isinstance(path, str) and _other_process(path):
            _refuse("process", f"reading another process's {path} is not allowed")
    elif event in _PATH_EVENTS:
        # Both ends of a rename or a link count: moving a file out is writing outside.
        paths = args[:2] if event in ("os.rename", "os.link", "os.symlink") else args[:1]
        for path in paths:
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if isinstance(path, str) and not _inside(path):
                _refuse(
                    "write_outside", f"tried to {_PATH_EVENTS[event]} {path} outside its folder"
                )
    elif event in _NETWORK_EVENTS:
        target = (
            args[1] if event.startswith("socket.") and event != "socket.getaddrinfo" else args[0]
        )
        if isinstance(target, tuple):
            target = ":".join(str(part) for part in target)
        _refuse("network", f"network access is not allowed ({event} {target})")
    elif event == "socket.__new__":
        family = args[1] if len(args) > 1 else None
        if family in (socket.AF_INET, socket.AF_INET6):
            _refuse("network", "network access is not allowed (opened an internet socket)")
    elif REFUSE_PROCESSES and event in _PROCESS_EVENTS:
        _refuse("process", f"starting other programs is not allowed ({event})")


# --- requests ------------------------------------------------------------------------------------


def _reply(channel, payload: dict) -> None:
    payload["violations"] = list(VIOLATIONS)
    channel.write(json.dumps(payload) + "\n")
    channel.flush()


def _error(exc: BaseException, code: str | None = None) -> dict:
    if code is None:
        if isinstance(exc, MemoryError):
            code = "memory"
        elif isinstance(exc, PermissionError) and VIOLATIONS:
            code = VIOLATIONS[-1]["code"]
        else:
            code = "exception"
    tail = traceback.format_exception(exc)
    return {
        "event": "error",
        "code": code,
        "message": f"{type(exc).__name__}: {exc}"[:1000],
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


def _be_init(child: int) -> NoReturn:
    """PID 1 of the runner's namespace: reap whatever is orphaned into it until the runner ends.

    The runner itself does not stay PID 1: the kernel ignores signals an init has no handler for
    (SIGXCPU from RLIMIT_CPU among them), and `unshare` cannot pass on a death by SIGKILL. So
    this process exits with 128 + the signal when the runner dies of one, as a shell reports it;
    its exit takes every other process of the namespace with it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == child:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.waitstatus_to_exitcode(status))


def main(config_path: str) -> int:
    global SCRATCH, WRITABLE, REFUSE_PROCESSES, REFUSE_OTHER_PROCESSES
    if os.getpid() == 1:
        child = os.fork()
        if child:
            _be_init(child)
    with open(config_path) as handle:
        config = json.load(handle)
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.dont_write_bytecode = True

    SCRATCH = os.path.realpath(config["scratch"])
    WRITABLE = [SCRATCH, "/dev/null"]
    os.chdir(SCRATCH)
    enforced = {"filesystem": False, "tcp": False, "abi": 0}
    if config.get("landlock", True):
        enforced = apply_landlock(config["read_paths"], [SCRATCH, "/dev/null"], config["devices"])
    REFUSE_PROCESSES = not (enforced["filesystem"] and config.get("network_namespace"))
    REFUSE_OTHER_PROCESSES = not config.get("pid_namespace")
    if not config.get("pid_namespace"):
        # Orphans of its children (a daemon started with setsid) come to the runner rather than
        # to the machine's init, so the sandbox still finds them in the runner's process tree.
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    sys.addaudithook(_hook)
    sys.path[:0] = config["sys_path"]

    import numpy as np  # after the restrictions: the generator's own imports see the same world

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
        _reply(channel, _error(exc, "memory" if isinstance(exc, MemoryError) else "load_model"))
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
            "enforced": enforced,
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
