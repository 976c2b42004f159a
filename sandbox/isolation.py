"""What keeps submitted generator code away from the platform: bubblewrap, seccomp and a cgroup.

Every rule is enforced by the kernel, set up through maintained tools; nothing here inspects what
the generator does.

- bubblewrap (`bwrap`) starts the runner in new user, mount, PID, network, IPC, UTS and cgroup
  namespaces, as uid 65534 with no capabilities, in a new session (no terminal to type into),
  dying with its parent. Its root file system holds only the system's libraries (/usr and the
  loader cache), the Python runtime with its site-packages, the generator's own code (read-only)
  and its scratch folder (writable); a fresh /proc that lists the sandbox's processes only and a
  minimal /dev (with the NVIDIA device nodes on GPU jobs). The rest of the host (/etc, /run, /var,
  /home, the media folder, the project, PostgreSQL's and every other Unix socket) is not there.
  The network namespace holds a loopback device of its own and nothing else. Further user
  namespaces are disabled inside.
- seccomp (libseccomp, through pyseccomp) refuses the system calls a generator never needs and
  namespaces do not cover: kernel keyrings, which are keyed by the uid outside (root's on a root
  worker); io_uring, BPF, perf events, userfaultfd, ptrace and process_vm_*; mounting; module and
  kernel loading.
- A cgroup per sandbox (v2, or v1 where the host has that) caps memory (shared memory and memfd
  included, swap excluded), the number of processes and threads, and is how the whole sandbox is
  killed; its counters say which limit was met.

`probe()` checks that all of it works here. When anything is missing the sandbox refuses to run
untrusted code and names what is missing and how to provide it (`Isolation.missing`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SANDBOX_UID = 65534  # "nobody" inside the sandbox's user namespace
SANDBOX_ROOT = "/sandbox"
CGROUP_FS = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpuacct")
V2_CONTROLLERS = ("memory", "pids", "cpu")

# System calls refused with EPERM inside the sandbox (bubblewrap refuses nothing by itself).
DENIED_SYSCALLS = (
    "add_key",
    "keyctl",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "setns",
    "swapon",
    "swapoff",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "acct",
    "quotactl",
    "reboot",
)


def bwrap_path() -> str | None:
    """`FOLEY_SANDBOX_BWRAP` (a command name or path; default `bwrap`), if it is installed."""
    return shutil.which(os.environ.get("FOLEY_SANDBOX_BWRAP") or "bwrap")


# --- cgroups -------------------------------------------------------------------------------------


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per v1 controller, and under "" its v2 cgroup."""
    found = {}
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _id, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                found[name.removeprefix("name=")] = path
    return found


def _v1_mounts() -> dict[str, Path]:
    """Where each v1 controller's hierarchy is mounted."""
    mounts = {}
    with open("/proc/self/mounts") as handle:
        for line in handle:
            _dev, where, kind, options, *_ = line.split()
            if kind == "cgroup":
                for option in options.split(","):
                    if option in V1_CONTROLLERS:
                        mounts[option] = Path(where)
    return mounts


@dataclass(frozen=True)
class CgroupBase:
    """Where sandboxes' cgroups are made: one folder (v2) or one per controller (v1)."""

    version: int
    dirs: tuple[tuple[str, Path], ...]  # (controller or "", folder)


def cgroup_base() -> CgroupBase:
    """The cgroup folders under which each sandbox gets its own; raises OSError when unusable.

    `FOLEY_SANDBOX_CGROUP` names it relative to the hierarchy's root (e.g. `/foley-sandbox`, a
    folder delegated to the worker's user). By default: on cgroup v2, beside the worker's own
    cgroup (a cgroup holding processes cannot hand controllers down); on v1, inside it, so a
    sandbox also stays within the worker's own limits.
    """
    wanted = os.environ.get("FOLEY_SANDBOX_CGROUP", "").strip()
    own = _own_cgroups()
    if (CGROUP_FS / "cgroup.controllers").exists():
        relative = wanted or str(Path(own.get("", "/")).parent / "foley-sandbox")
        folder = CGROUP_FS / relative.lstrip("/")
        _enable_v2(folder)
        return CgroupBase(2, (("", folder),))
    mounts = _v1_mounts()
    missing = [name for name in V1_CONTROLLERS if name not in mounts]
    if missing:
        raise OSError(errno.ENOENT, f"no cgroup {' or '.join(missing)} controller is mounted")
    dirs = []
    for name in V1_CONTROLLERS:
        relative = wanted or str(Path(own.get(name, "/")) / "foley-sandbox")
        folder = mounts[name] / relative.lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        dirs.append((name, folder))
    return CgroupBase(1, tuple(dirs))


def _enable_v2(folder: Path) -> None:
    """Create `folder` with the memory, pids and cpu controllers handed down to its children."""
    folder.mkdir(parents=True, exist_ok=True)
    chain = [folder, *folder.parents]
    chain = list(reversed(chain[: chain.index(CGROUP_FS)]))  # from the top down to `folder`
    parent = CGROUP_FS
    for level in chain:
        have = (parent / "cgroup.subtree_control").read_text().split()
        need = [c for c in V2_CONTROLLERS if c not in have]
        if need:
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in need))
        parent = level
    have = (folder / "cgroup.subtree_control").read_text().split()
    need = [c for c in V2_CONTROLLERS if c not in have]
    if need:
        (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in need))


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _counter(path: Path, key: str) -> int:
    """The value of `key` in a flat-keyed cgroup file (memory.events, pids.events, ...)."""
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return 0


class Cgroup:
    """One sandbox's cgroup: its limits, its counters, and a way to kill everything in it."""

    def __init__(self, base: CgroupBase, memory_bytes: int, max_processes: int):
        self.version = base.version
        self.memory_bytes = memory_bytes
        name = f"sandbox-{os.getpid()}-{time.monotonic_ns()}"
        self.dirs = {controller: folder / name for controller, folder in base.dirs}
        for folder in self.dirs.values():
            folder.mkdir()
        try:
            if self.version == 2:
                folder = self.dirs[""]
                _write(folder / "memory.max", str(memory_bytes))
                with contextlib.suppress(FileNotFoundError):
                    _write(folder / "memory.swap.max", "0")
                _write(folder / "pids.max", str(max_processes))
            else:
                _write(self.dirs["memory"] / "memory.limit_in_bytes", str(memory_bytes))
                with contextlib.suppress(FileNotFoundError, PermissionError):
                    _write(self.dirs["memory"] / "memory.memsw.limit_in_bytes", str(memory_bytes))
                _write(self.dirs["pids"] / "pids.max", str(max_processes))
        except OSError:
            self.remove()
            raise
        # Written by the child between fork and exec, where nothing may allocate much.
        self._procs = [str(folder / "cgroup.procs") for folder in self.dirs.values()]

    def join(self) -> None:
        """Move the calling process in (the sandbox's child, before it runs anything)."""
        pid = str(os.getpid())
        for path in self._procs:
            with open(path, "w") as handle:
                handle.write(pid)

    def _folder(self, controller: str) -> Path:
        return self.dirs["" if self.version == 2 else controller]

    def oom_kills(self) -> int:
        """Processes the kernel killed for passing the memory limit."""
        if self.version == 2:
            return _counter(self._folder("memory") / "memory.events", "oom_kill")
        return _counter(self._folder("memory") / "memory.oom_control", "oom_kill")

    def forks_refused(self) -> int:
        """Forks and thread starts refused at the process limit."""
        return _counter(self._folder("pids") / "pids.events", "max")

    def peak_bytes(self) -> int:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int((self._folder("memory") / name).read_text())
        return 0

    def cpu_seconds(self) -> float:
        with contextlib.suppress(OSError, ValueError):
            if self.version == 2:
                return _counter(self.dirs[""] / "cpu.stat", "usage_usec") / 1e6
            return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        return 0.0

    def pids(self) -> list[int]:
        with contextlib.suppress(OSError):
            text = (self._folder("pids") / "cgroup.procs").read_text()
            return [int(pid) for pid in text.split()]
        return []

    def kill(self) -> None:
        """Kill every process in it, those forked meanwhile too, and wait until none is left."""
        kill_file = self._folder("") / "cgroup.kill" if self.version == 2 else None
        if kill_file is not None and kill_file.exists():
            _write(kill_file, "1")
        for _ in range(1000):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        for folder in self.dirs.values():
            for _ in range(200):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # busy until the killed processes have left it
                    time.sleep(0.01)


# --- seccomp -------------------------------------------------------------------------------------


def seccomp_program() -> bytes:
    """The compiled BPF filter that bubblewrap installs before starting the runner."""
    import pyseccomp

    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        with contextlib.suppress(RuntimeError, ValueError):  # not a call on this architecture
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
    with tempfile.TemporaryFile() as handle:
        rules.export_bpf(handle)
        handle.seek(0)
        return handle.read()


# --- the bubblewrap command line -----------------------------------------------------------------


def python_paths() -> list[str]:
    """The Python installation and its site-packages: what the runner and the generator import."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        if path := sysconfig.get_paths().get(key):
            paths.add(path)
    paths.update(p for p in sys.path if "site-packages" in p or "dist-packages" in p)
    real = {os.path.realpath(p) for p in paths if p and os.path.exists(p)}
    real |= {p for p in paths if p and os.path.exists(p)}
    # A folder inside another is bound with it.
    ordered = sorted(real)
    return [p for p in ordered if not any(p.startswith(q + os.sep) for q in ordered if q != p)]


# The loader cache; CPU topology, which BLAS and torch read to size their thread pools.
SYSTEM_BIND_TRIES = {"/etc/ld.so.cache", "/sys/devices/system/cpu"}


def _system_args() -> list[str]:
    """The system's libraries, read-only: /usr, its merged-/usr links and the loader cache."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for path in SYSTEM_BIND_TRIES:
        args += ["--ro-bind-try", path, path]
    return args


def gpu_args() -> list[str]:
    """The NVIDIA device nodes and the driver's sysfs entries CUDA reads, for GPU jobs only."""
    args = []
    for node in sorted(Path("/dev").glob("nvidia*")):
        if node.is_char_device() or node.is_dir():  # the devices, and /dev/nvidia-caps
            args += ["--dev-bind", str(node), str(node)]
    for path in ("/sys/module/nvidia", "/sys/bus/pci", "/sys/devices"):
        args += ["--ro-bind-try", path, path]
    return args


def namespace_args(user_namespace: bool) -> list[str]:
    """bubblewrap's namespaces and who the sandbox runs as.

    With a user namespace (the usual way, also for an unprivileged worker): uid 65534 inside, no
    capabilities, no further user namespaces. Without one (a root worker on a host that disables
    user namespaces), bubblewrap still makes the other namespaces as root, and `drop_privileges`
    makes the runner uid 65534 with no capabilities before it starts.
    """
    common = ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if user_namespace:
        return [
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--cap-drop",
            "ALL",
            *common,
        ]
    unshare = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    return [*unshare, "--unshare-cgroup-try", *common]


def drop_privileges() -> list[str]:
    """The command that makes the runner uid 65534 with no capabilities (no user namespace)."""
    return [
        "/usr/bin/setpriv",
        f"--reuid={SANDBOX_UID}",
        f"--regid={SANDBOX_UID}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def bwrap_command(
    bwrap: str,
    *,
    read_only: list[tuple[str, str]],
    writable: list[tuple[str, str]],
    workdir: str,
    seccomp_fd: int | None,
    use_gpu: bool,
    user_namespace: bool = True,
) -> list[str]:
    """The command line before the runner's own; binds are (host, inside) pairs."""
    args = [bwrap, *namespace_args(user_namespace)]
    binds = [
        *(("--ro-bind", path, path) for path in python_paths()),
        *(("--ro-bind", host, inside) for host, inside in read_only),
        *(("--bind", host, inside) for host, inside in writable),
    ]
    # The folders leading to the binds, made traversable first: bubblewrap would make them 0700,
    # which only a sandbox user mapped onto their owner (a user namespace) could enter.
    targets = {inside for _kind, _host, inside in binds} | SYSTEM_BIND_TRIES
    parents = {str(parent) for target in targets for parent in Path(target).parents}
    for folder in sorted(parents - targets - {"/"}, key=lambda p: (p.count("/"), p)):
        args += ["--perms", "0755", "--dir", folder]
    args += _system_args()
    for kind, host, inside in binds:
        args += [kind, host, inside]
    args += ["--proc", "/proc", "--dev", "/dev"]
    if use_gpu:
        args += gpu_args()
    # The root itself read-only: nothing can be created beside the binds.
    args += ["--remount-ro", "/", "--chdir", workdir]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, "--", *([] if user_namespace else drop_privileges())]


# --- what this machine provides ------------------------------------------------------------------


@dataclass(frozen=True)
class Isolation:
    """What this machine provides for running untrusted code, and what it lacks."""

    bwrap: str | None
    cgroup: CgroupBase | None
    seccomp: bool
    missing: tuple[str, ...]
    # False: a root worker without user namespaces (the sandbox drops to uid 65534 by setpriv).
    user_namespace: bool = True

    @property
    def ok(self) -> bool:
        return not self.missing

    def describe(self, use_gpu: bool) -> dict[str, str]:
        """What is enforced, rule by rule, for reports and job logs."""
        if not self.ok:
            return {"isolation": "none: " + "; ".join(self.missing)}
        version = self.cgroup.version if self.cgroup else 0
        return {
            "tool": f"bubblewrap ({self.bwrap}), seccomp, cgroup v{version}",
            "namespaces": (
                "user (uid 65534, no capabilities), mount, PID, network, IPC, UTS, cgroup; no "
                "further user namespaces"
                if self.user_namespace
                else "mount, PID, network, IPC, UTS, cgroup (no user namespaces here: uid 65534 "
                "by setpriv, no capabilities, no_new_privs)"
            ),
            "files": "read-only: system libraries, Python and its packages, the generator's "
            "code; writable: its scratch folder; nothing else of the host visible",
            "network": "none: a loopback device of its own",
            "processes": "its own /proc and PID namespace, all killed with the sandbox; "
            "process limit by the cgroup",
            "memory": "cgroup limit, shared memory and memfd included",
            "time": "wall-clock limits on loading and on every call",
            "system calls": "keyrings, io_uring, BPF, perf, ptrace, mounting refused (seccomp)",
            "devices": "NVIDIA device nodes bound" if use_gpu else "no GPU devices",
            "environment": "stripped: no database, broker, settings or secrets",
        }


def _check_bwrap(bwrap: str, user_namespace: bool) -> str | None:
    """Why bubblewrap cannot make its namespaces here, or None when it can."""
    command = [
        bwrap,
        *namespace_args(user_namespace),
        *_system_args(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        *([] if user_namespace else drop_privileges()),
        "true",
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": "/usr/bin:/bin"},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"exit {done.returncode}")


@cache
def probe() -> Isolation:
    """Check, once per worker process, that bubblewrap, seccomp and cgroups work here."""
    missing = []
    bwrap = bwrap_path()
    user_namespace = True
    if bwrap is None:
        missing.append(
            "bubblewrap is not installed (Debian: apt-get install bubblewrap; or set "
            "FOLEY_SANDBOX_BWRAP to its path)"
        )
    elif problem := _check_bwrap(bwrap, user_namespace=True):
        # A root worker may make the other namespaces without one (and drop to uid 65534).
        user_namespace = False
        if os.geteuid() != 0 or _check_bwrap(bwrap, user_namespace=False) is not None:
            missing.append(
                f"bubblewrap cannot create its namespaces here ({problem}): allow user "
                "namespaces (sysctl user.max_user_namespaces > 0; "
                "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for "
                "bwrap), or run the worker as root; in a container, the settings of "
                "docs/deployment.md"
            )
    seccomp = True
    try:
        seccomp_program()
    except (ImportError, OSError, RuntimeError) as exc:
        seccomp = False
        missing.append(
            f"seccomp filters cannot be built ({exc}): install libseccomp (Debian: libseccomp2) "
            "and the Python package pyseccomp"
        )
    base = None
    try:
        base = cgroup_base()
        Cgroup(base, 64 * 1024**2, 8).remove()
    except OSError as exc:
        base = None
        missing.append(
            f"no writable cgroup for memory and process limits ({exc}): run the worker where it "
            "may create cgroups (as root, or in a cgroup v2 folder delegated to its user named by "
            "FOLEY_SANDBOX_CGROUP; docs/deployment.md)"
        )
    return Isolation(bwrap, base, seccomp, tuple(missing), user_namespace)
