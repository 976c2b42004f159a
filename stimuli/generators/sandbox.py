"""Running submitted generator code in an isolated process.

`Sandbox` starts `runner.py` in a child process and talks to it over pipes. What is enforced:

- A separate process tree, killed as a whole when stopped: where `unshare` works, the runner is
  in a PID namespace of its own (its own /proc), whose processes all die with it; elsewhere the
  parent walks the process tree (the runner adopts orphans, so a child that starts its own
  session stays in it) and stops, then kills, every process in it.
- Time: a limit on loading and on every `generate` call (the parent kills the process when a
  reply is late); optionally RLIMIT_CPU on the total CPU time.
- Memory: the resident memory of the whole process tree is watched and the tree killed past the
  limit; RLIMIT_AS also caps the address space when no GPU is used (CUDA reserves huge virtual
  ranges, so the address-space cap is left off on GPU workers and only the watch applies).
- Network: a new, empty network namespace (`unshare`, with `--map-root-user` for an
  unprivileged worker where user namespaces are allowed); Landlock (ABI 4+) refuses TCP connect
  and bind; an audit hook refuses Python sockets and name lookups and reports the attempt.
- Files: Landlock lets the process read only the system, the Python installation and the
  generator's own code, and write only its scratch folder (its working directory, HOME and
  TMPDIR); the audit hook refuses and reports Python-level writes outside it. Without Landlock
  only the hook applies, which code using ctypes or C extensions can get around.
- Environment: nothing of the worker's environment is passed on (no DATABASE_URL, SECRET_KEY,
  broker URL or settings module); the settings and the database files are outside what Landlock
  lets it read. Of /proc, Landlock allows the process's own entries and machine-wide figures
  only, so the worker's /proc/<pid>/environ and mem are unreadable even without a PID
  namespace; without either, the audit hook refuses Python-level reads of them.
- Output comes back as .npy files; the header's shape and dtype are checked against the clips
  asked for before any data is read, and the data is read with allow_pickle=False semantics.
- Archives: checked from the zip's central directory alone (names, file count, compression
  method and ratio, expanded size) before anything is unpacked; unpacking, on the worker, cuts
  every member at its declared size.

`enforcement()` says which of these this machine provides; reports and job logs include it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib.util import find_spec
from pathlib import Path, PurePosixPath

import numpy as np

from ..archives import RATIO_CHECK_MIN_BYTES, _check_name
from ..npy_header import is_plain_numbers, read_header
from .api import OutputSpec

RUNNER = Path(__file__).with_name("runner.py")
SYSTEM_READ_PATHS = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/sys"]
# Never /proc as a whole: other processes' environ, maps and mem are there, the worker's among
# them. What Python, numpy and torch read: the process's own entries and machine-wide figures.
PROC_READ_PATHS = [
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
    "/proc/sys/kernel",
    "/proc/sys/vm",
]
# What the CUDA driver reads to find its devices.
GPU_PROC_READ_PATHS = ["/proc/driver/nvidia", "/proc/devices"]
MANIFEST = "foley-generator.json"
MAX_MANIFEST_BYTES = 64 * 1024
# Methods Python's zipfile can read; anything else would fail only when unpacked.
ZIP_METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}


def _zip_read_errors() -> tuple[type[BaseException], ...]:
    """What reading a corrupt or hostile zip member can raise, from zipfile and its codecs."""
    errors: list[type[BaseException]] = [
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        zlib.error,
        EOFError,
        NotImplementedError,
        RuntimeError,  # encrypted members
        ValueError,
        OSError,  # bz2 reports bad data as OSError
    ]
    with contextlib.suppress(ImportError):
        import lzma

        errors.append(lzma.LZMAError)
    return tuple(errors)


ZIP_READ_ERRORS = _zip_read_errors()


class SandboxError(Exception):
    """The generator broke a rule or the API; `code` names how, `detail` holds its traceback."""

    def __init__(self, code: str, message: str, detail: str = ""):
        self.code = code
        self.message = message
        self.detail = detail
        super().__init__(f"{code}: {message}")


@dataclass(frozen=True)
class Limits:
    load_timeout_s: float = 600.0
    call_timeout_s: float = 600.0
    memory_mb: int = 8192
    # Address space (virtual memory) cap without a GPU: generous, since imports reserve a lot.
    address_space_mb: int = 32768
    file_size_mb: int = 4096
    # Total CPU seconds for the process (RLIMIT_CPU); off by default, since a long generation
    # on many threads legitimately burns hours. The wall-clock limits above always apply.
    cpu_s: int | None = None

    @classmethod
    def from_settings(cls) -> Limits:
        from django.conf import settings

        return cls(**getattr(settings, "FOLEY_SANDBOX_LIMITS", {}))


@dataclass(frozen=True)
class ArchiveLimits:
    """What a generator archive may hold; checked from its central directory, before unpacking."""

    max_files: int = 10_000
    max_expanded_bytes: int = 8 * 1024**3
    # Members over archives.RATIO_CHECK_MIN_BYTES may not expand more than this many times.
    max_ratio: int = 100

    @classmethod
    def from_settings(cls) -> ArchiveLimits:
        from django.conf import settings

        return cls(
            max_files=settings.FOLEY_GENERATOR_MAX_FILES,
            max_expanded_bytes=settings.FOLEY_GENERATOR_MAX_EXPANDED_BYTES,
            max_ratio=settings.FOLEY_GENERATOR_MAX_RATIO,
        )


@dataclass(frozen=True)
class ArchiveContents:
    """A checked generator archive: its module, where `load_model` looks, and what to unpack."""

    module: str
    model_path: str | None
    members: tuple[zipfile.ZipInfo, ...]


@dataclass
class GeneratorSource:
    """Where a generator's code is: a module to import, from where, with which model path."""

    module: str
    sys_path: list[str] = field(default_factory=list)
    read_paths: list[str] = field(default_factory=list)
    model_path: str | None = None
    # Names to link into an import folder of their own: the folder holding a module (a project
    # checkout, say) is not made readable, only the module's top-level package.
    links: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_module(cls, name: str, model_path: str | None = None) -> GeneratorSource:
        """An importable module, e.g. `stimuli.generators.baseline` or an installed package.

        Only the top-level package's folder is made readable, not the folder that holds it.
        """
        try:
            spec = find_spec(name)
        except (ImportError, ValueError) as exc:
            raise SandboxError("import", f"cannot find module {name}: {exc}") from None
        if spec is None or not spec.origin:
            raise SandboxError("import", f"no module named {name}")
        top = name.split(".")[0]
        origin = Path(spec.origin).resolve()
        depth = name.count(".") + (1 if origin.name == "__init__.py" else 0)
        top_path = origin.parents[depth - 1] if depth else origin
        reads = [str(top_path)]
        if model_path:
            reads.append(str(Path(model_path).resolve()))
        return cls(
            module=name,
            read_paths=reads,
            model_path=model_path,
            links={top_path.name if top_path.suffix == ".py" else top: str(top_path)},
        )

    @classmethod
    def from_archive(
        cls, archive: Path | str, dest: Path | str, limits: ArchiveLimits | None = None
    ) -> GeneratorSource:
        """Check a .zip or a wheel (`inspect_archive`), unpack it into `dest`, find its module.

        `load_model` gets the unpacked folder (where the weights are) unless the manifest names
        a path inside it.
        """
        contents = inspect_archive(archive, limits)
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        _unpack(Path(archive), contents.members, dest)
        model_path = str(dest)
        if contents.model_path:
            inner = (dest / contents.model_path).resolve()
            if not inner.is_relative_to(dest.resolve()):
                raise SandboxError("archive", "model_path points outside the archive")
            model_path = str(inner)
        return cls(
            module=contents.module,
            sys_path=[str(dest)],
            read_paths=[str(dest)],
            model_path=model_path,
        )


def inspect_archive(archive: Path | str, limits: ArchiveLimits | None = None) -> ArchiveContents:
    """Check a generator archive from its central directory, unpacking nothing.

    Names, member kinds, the file count, every member's compression method and ratio and the
    total expanded size are checked; only the small manifest is read. The module is named by
    `foley-generator.json` ({"module": ..., "model_path": ...}) when the archive has one, else
    it is the archive's one top-level package or .py file. Any problem, a damaged archive
    included, is a SandboxError("archive", ...).
    """
    archive = Path(archive)
    limits = limits or ArchiveLimits()
    with _open_zip(archive) as zf:
        members = tuple(zf.infolist())
        _check_members(members, limits)
        manifest = next((m for m in members if m.filename == MANIFEST), None)
        data = None
        if manifest is not None:
            if manifest.file_size > MAX_MANIFEST_BYTES:
                raise SandboxError("archive", f"{MANIFEST} is over {MAX_MANIFEST_BYTES:,} bytes")
            data = _parse_manifest(b"".join(_member_chunks(zf, manifest)))
    if data is not None:
        module = data["module"]
        model_path = data.get("model_path") or None
        if model_path is not None and _check_name(model_path):
            raise SandboxError("archive", "model_path points outside the archive")
        return ArchiveContents(module, model_path, members)
    candidates = set()
    for member in members:
        parts = PurePosixPath(member.filename).parts
        if len(parts) == 2 and parts[1] == "__init__.py":
            candidates.add(parts[0])
        elif len(parts) == 1 and parts[0].endswith(".py") and not member.is_dir():
            candidates.add(parts[0][: -len(".py")])
    if len(candidates) != 1:
        found = ", ".join(sorted(candidates)) or "none"
        raise SandboxError(
            "archive",
            "the archive must hold exactly one top-level module or package, or a "
            f"foley-generator.json naming it (found: {found})",
        )
    return ArchiveContents(candidates.pop(), None, members)


def _check_members(members: tuple[zipfile.ZipInfo, ...], limits: ArchiveLimits) -> None:
    files = [m for m in members if not m.is_dir()]
    if len(files) > limits.max_files:
        raise SandboxError(
            "archive", f"the archive holds {len(files):,} files; the limit is {limits.max_files:,}"
        )
    total = 0
    for member in members:
        name = member.filename
        problem = _check_name(name)
        if problem:
            raise SandboxError("archive", f"{name}: a path outside the archive ({problem})")
        mode = member.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise SandboxError("archive", f"{name}: symbolic links are not allowed")
        if member.create_system == 3 and stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise SandboxError("archive", f"{name}: only files and folders are allowed")
        if member.flag_bits & 0x1:
            raise SandboxError("archive", f"{name}: encrypted entries are not supported")
        if member.compress_type not in ZIP_METHODS:
            raise SandboxError(
                "archive",
                f"{name}: compression method {member.compress_type} is not supported "
                "(use deflate, or none)",
            )
        ratio = member.file_size / max(member.compress_size, 1)
        if member.file_size > RATIO_CHECK_MIN_BYTES and ratio > limits.max_ratio:
            raise SandboxError(
                "archive",
                f"{name}: compression ratio {ratio:,.0f}:1 exceeds the limit of "
                f"{limits.max_ratio}:1 (possible zip bomb)",
            )
        total += member.file_size
    if total > limits.max_expanded_bytes:
        raise SandboxError(
            "archive",
            f"the archive expands to {total:,} bytes; the limit is {limits.max_expanded_bytes:,}",
        )


def _open_zip(archive: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(archive)
    except ZIP_READ_ERRORS as exc:
        raise SandboxError("archive", f"not a zip archive or a wheel ({exc})") from None


def _member_chunks(zf: zipfile.ZipFile, member: zipfile.ZipInfo) -> Iterator[bytes]:
    """A member's bytes, never more than its declared size; damage is a SandboxError."""
    size = 0
    try:
        with zf.open(member) as src:
            while chunk := src.read(1 << 20):
                size += len(chunk)
                if size > member.file_size:
                    raise SandboxError(
                        "archive", f"{member.filename}: expands beyond its declared size"
                    )
                yield chunk
    except ZIP_READ_ERRORS as exc:
        raise SandboxError("archive", f"{member.filename}: damaged ({exc})") from None


def _parse_manifest(raw: bytes) -> dict:
    """The manifest's settings: a module name and, optionally, a model path inside the archive."""
    try:
        data = json.loads(raw)
        if not isinstance(data["module"], str) or not isinstance(data.get("model_path") or "", str):
            raise TypeError("module and model_path must be strings")
    except (ValueError, KeyError, TypeError) as exc:
        raise SandboxError("archive", f"{MANIFEST} is invalid: {exc}") from None
    return data


def _unpack(archive: Path, members: tuple[zipfile.ZipInfo, ...], dest: Path) -> None:
    """Unpack checked members; each stops at its declared size, so the total is capped too."""
    root = dest.resolve()
    with _open_zip(archive) as zf:
        for member in members:
            target = dest / member.filename
            if not target.resolve().is_relative_to(root):
                raise SandboxError("archive", f"{member.filename}: a path outside the archive")
            try:
                if member.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "xb") as dst:
                    for chunk in _member_chunks(zf, member):
                        dst.write(chunk)
            except (FileExistsError, NotADirectoryError) as exc:
                raise SandboxError(
                    "archive", f"{member.filename}: clashes with another name in the archive"
                ) from exc


@dataclass(frozen=True)
class Namespaces:
    """The `unshare` prefix that isolates a child here, and what it gives."""

    command: tuple[str, ...] = ()
    network: bool = False
    pid: bool = False


# An empty network namespace and a PID namespace with its own /proc: the runner sees only its
# own processes, and when it dies (or `unshare` is killed: --kill-child) all of them die.
_PID_FLAGS = ("--net", "--pid", "--fork", "--kill-child", "--mount-proc")


@cache
def namespace_support() -> Namespaces:
    """The strongest isolation `unshare` gives a child on this machine (root or not)."""
    unshare = shutil.which("unshare")
    if not unshare:
        return Namespaces()
    attempts = [
        (_PID_FLAGS, True),
        (("--map-root-user", *_PID_FLAGS), True),
        (("-n",), False),
        (("-rn",), False),
    ]
    for flags, pid in attempts:
        try:
            done = subprocess.run(
                [unshare, *flags, "true"], capture_output=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return Namespaces((unshare, *flags), network=True, pid=pid)
    return Namespaces()


def network_namespace_command() -> tuple[str, ...]:
    """The `unshare` prefix that gives a child an empty network namespace here, or ()."""
    return namespace_support().command


@cache
def landlock_abi() -> int:
    from .runner import landlock_abi as probe

    return probe()


def cuda_visible() -> bool:
    """A GPU is visible when CUDA_VISIBLE_DEVICES names one and NVIDIA device files exist."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return bool(list(Path("/dev").glob("nvidia[0-9]*")))


def enforcement(use_gpu: bool | None = None) -> dict[str, str]:
    """What the sandbox enforces on this machine, in words, for reports and logs."""
    gpu = cuda_visible() if use_gpu is None else use_gpu
    abi = landlock_abi()
    ns = namespace_support()
    network = []
    if ns.network:
        network.append("empty network namespace")
    if abi >= 4:
        network.append("Landlock refuses TCP")
    network.append("Python sockets refused by an audit hook")
    processes = (
        "own PID namespace and /proc, all of it killed when stopped"
        if ns.pid
        else "separate process tree (daemons included), all of it killed when stopped"
    )
    proc = []
    if ns.pid:
        proc.append("other processes absent from its /proc")
    if abi >= 1:
        proc.append("Landlock: of /proc only its own entries readable")
    if not proc:
        proc.append("audit hook refuses Python reads of other processes' /proc (not C code)")
    return {
        "process": processes,
        "time": "wall-clock limits on loading and on every call",
        "memory": "resident memory of the process tree watched and capped"
        + ("" if gpu else ", RLIMIT_AS on the address space"),
        "network": "; ".join(network),
        "filesystem": (
            f"Landlock ABI {abi}: reads system, Python and own code only, writes scratch only; "
            "audit hook reports writes outside"
            if abi >= 1
            else "audit hook refuses Python writes outside scratch (C code not covered: "
            "no Landlock here)"
        ),
        "environment": "stripped: no database, broker, settings or secrets; " + "; ".join(proc),
    }


def _python_read_paths() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            paths.add(path)
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry):
            paths.add(entry)
    return sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)})


def _process_table() -> dict[int, tuple[int, int, int, int]]:
    """Every process on the machine: pid -> (parent pid, process group, start time, rss pages)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            # Fields 4, 5, 22 and 24 of stat; the split starts at field 3.
            table[int(entry.name)] = (
                int(fields[1]),
                int(fields[2]),
                int(fields[19]),
                int(fields[21]),
            )
        except (OSError, IndexError, ValueError):
            continue
    return table


def _start_time(pid: int) -> int | None:
    """When `pid` started (clock ticks after boot): with the pid, it names one process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _process_tree(root: int, root_start: int) -> dict[int, tuple[int, int]]:
    """The processes of a sandbox: `root`, its process group, and all their descendants.

    Returns pid -> (start time, rss pages). A daemon that left the group with setsid is still a
    descendant: the runner adopts orphans (a child subreaper, or its namespace's init). `root`
    counts only while it is the process that started at `root_start`: once reaped, its pid may
    be another's (its group id may not, while the group has members).
    """
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _group, _start, _rss) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = [pid for pid, info in table.items() if info[1] == root]
    if root in table and table[root][2] == root_start:
        todo.append(root)
    found: dict[int, tuple[int, int]] = {}
    while todo:
        pid = todo.pop()
        if pid in found or pid not in table:
            continue
        found[pid] = (table[pid][2], table[pid][3])
        todo.extend(children.get(pid, ()))
    return found


def _signal(pid: int, start: int, sig: signal.Signals) -> bool:
    """Send `sig` to the process `pid` that started at `start`; False when it is gone.

    Through a pidfd, so the signal reaches that very process and never a later one that got its
    pid; by pid alone where the kernel has no pidfds (before 5.3).
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:
        fd = None
    try:
        if _start_time(pid) != start:
            return False
        if fd is None:
            os.kill(pid, sig)
        else:
            signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd is not None:
            os.close(fd)


def _kill_tree(root: int, root_start: int) -> None:
    """Kill every process of a sandbox's tree (`_process_tree`), the late forks included.

    Each process is stopped before the tree is walked again, so none can fork a new one between
    the walk and the kill; then all are killed.
    """
    stopped: dict[int, int] = {}
    for _ in range(100):
        new = {
            pid: start
            for pid, (start, _rss) in _process_tree(root, root_start).items()
            if stopped.get(pid) != start
        }
        if not new:
            break
        for pid, start in new.items():
            _signal(pid, start, signal.SIGSTOP)
            stopped[pid] = start
    for pid, start in stopped.items():
        _signal(pid, start, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, signal.SIGKILL)


class _MemoryWatch(threading.Thread):
    """Kills the child's process tree when its resident memory passes the limit."""

    def __init__(self, root: int, root_start: int, limit_bytes: int):
        super().__init__(daemon=True)
        self.root = root
        self.root_start = root_start
        self.limit = limit_bytes
        self.tripped = 0
        self.peak = 0
        self._halt = threading.Event()

    def _rss(self) -> int:
        pages = sum(rss for _start, rss in _process_tree(self.root, self.root_start).values())
        return pages * resource.getpagesize()

    def run(self) -> None:
        while not self._halt.wait(0.1):
            rss = self._rss()
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.tripped = rss
                _kill_tree(self.root, self.root_start)
                return

    def stop(self) -> None:
        self._halt.set()


def _read_samples(handle, expected: tuple[int, ...], doing: str) -> np.ndarray:
    """An .npy array from `handle`, refused from its header when it is more than `expected`.

    A generator that returns [2, 200000000] would otherwise have the worker allocate gigabytes
    before the shape is ever looked at.
    """
    try:
        shape, fortran_order, dtype = read_header(handle)
    except ValueError as exc:
        raise SandboxError(
            "wrong_dtype", f"the output of {doing} is not plain samples: {exc}"
        ) from None
    if not is_plain_numbers(dtype):
        raise SandboxError(
            "wrong_dtype", f"the output of {doing} is not plain samples: {dtype} values"
        )
    count = math.prod(shape)
    if min(shape, default=0) < 0 or count > math.prod(expected) or dtype.itemsize > 8:
        size = count * dtype.itemsize
        raise SandboxError(
            "wrong_shape",
            f"the output of {doing} is {list(shape)} {dtype} ({size:,} bytes); expected "
            f"{list(expected)}: refused unread",
        )
    array = np.empty(count, dtype=dtype)
    if handle.readinto(array.view(np.uint8)) != array.nbytes:
        raise SandboxError("protocol", f"the output of {doing} is cut short")
    return array.reshape(shape, order="F" if fortran_order else "C")


class Sandbox:
    """One running generator: `start()` loads it, `generate()` asks it for clips."""

    def __init__(
        self,
        source: GeneratorSource,
        spec: OutputSpec | None = None,
        limits: Limits | None = None,
        *,
        use_gpu: bool | None = None,
        workdir: Path | str | None = None,
        kernel_rules: bool = True,
        namespaces: bool = True,
        on_wait: Callable[[], None] | None = None,
    ):
        self.source = source
        self.spec = spec or OutputSpec()
        self.limits = limits or Limits()
        self.use_gpu = cuda_visible() if use_gpu is None else use_gpu
        # Off, only the audit hook applies: what a kernel without Landlock or namespaces gives.
        self.kernel_rules = kernel_rules
        # Off, Landlock without namespaces: what a worker where `unshare` fails gives.
        self.namespaces = namespaces
        self._ns = Namespaces()
        self._root_start = 0
        self._killed = False
        # Called about every half second while waiting on the generator (a job's heartbeat).
        self.on_wait = on_wait
        self._own_root = workdir is None
        self.root = Path(workdir or tempfile.mkdtemp(prefix="foley-sandbox-"))
        self.scratch = self.root / "scratch"
        self.log_path = self.root / "generator.log"
        self.proc: subprocess.Popen | None = None
        self.watch: _MemoryWatch | None = None
        self.info: dict = {}
        self._calls = 0
        self._selector: selectors.BaseSelector | None = None
        self._buffer = b""

    # --- life cycle ---

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.scratch),
            "TMPDIR": str(self.scratch / "tmp"),
            "LANG": "C.UTF-8",
            "XDG_CACHE_HOME": str(self.scratch / ".cache"),
            "MPLCONFIGDIR": str(self.scratch / ".cache"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "FOLEY_DEVICE": "cuda" if self.use_gpu else "cpu",
            **self.spec.env(),
        }
        for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            if key in os.environ:
                env[key] = os.environ[key]
        # The worker's GPU assignment passes through; without a GPU, CUDA sees none.
        if not self.use_gpu:
            env["CUDA_VISIBLE_DEVICES"] = ""
        elif "CUDA_VISIBLE_DEVICES" in os.environ:
            env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        return env

    def _preexec(self) -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        size = self.limits.file_size_mb * 1024**2
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        if self.limits.cpu_s:
            cpu = self.limits.cpu_s
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 10))
        if not self.use_gpu and self.limits.address_space_mb:
            space = self.limits.address_space_mb * 1024**2
            resource.setrlimit(resource.RLIMIT_AS, (space, space))

    def start(self) -> dict:
        """Start the process and load the model; returns the `loaded` reply."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        (self.scratch / "tmp").mkdir(exist_ok=True)
        imports = self.root / "imports"
        imports.mkdir(exist_ok=True)
        for name, target in self.source.links.items():
            link = imports / name
            if not link.is_symlink():
                link.symlink_to(target)
        if self.kernel_rules and self.namespaces:
            self._ns = namespace_support()
        devices = [str(p) for p in Path("/dev").glob("nvidia*")] if self.use_gpu else []
        config = {
            "scratch": str(self.scratch),
            "module": self.source.module,
            "sys_path": [*self.source.sys_path, str(imports)],
            "model_path": self.source.model_path,
            "read_paths": [
                *SYSTEM_READ_PATHS,
                *PROC_READ_PATHS,
                *(GPU_PROC_READ_PATHS if self.use_gpu else []),
                *_python_read_paths(),
                *self.source.read_paths,
                str(imports),
                str(RUNNER),
            ],
            "devices": [*devices, "/dev/null", "/dev/urandom", "/dev/zero"],
            "landlock": self.kernel_rules,
            "network_namespace": self._ns.network,
            "pid_namespace": self._ns.pid,
        }
        config_path = self.root / "config.json"
        config_path.write_text(json.dumps(config))
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.proc = subprocess.Popen(
                [*self._ns.command, sys.executable, "-I", "-B", str(RUNNER), str(config_path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.scratch,
                env=self._env(),
                start_new_session=True,
                preexec_fn=self._preexec,
            )
        finally:
            log.close()
        # Read before anything can reap it: the process is a zombie at worst until waited for.
        self._root_start = _start_time(self.proc.pid) or 0
        self.watch = _MemoryWatch(self.proc.pid, self._root_start, self.limits.memory_mb * 1024**2)
        self.watch.start()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)
        reply = self._read_reply(self.limits.load_timeout_s, "loading the model")
        if reply["event"] == "error":
            self.close()
            raise SandboxError(reply["code"], reply["message"], reply.get("traceback", ""))
        self.info = reply
        return reply

    def close(self) -> None:
        if self.proc is not None:
            # No polite exit first: a runner that left before its children would orphan them
            # out of the tree, where nothing finds them.
            self._kill()
            for pipe in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    pipe.close()
        if self.watch is not None:
            self.watch.stop()
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def _kill(self) -> None:
        """Kill the whole tree, once: after that the pid and group id may be another's."""
        assert self.proc is not None
        if not self._killed:
            self._killed = True
            _kill_tree(self.proc.pid, self._root_start)
        self.proc.wait()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - chars))
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    # --- talking to the runner ---

    def _read_reply(self, timeout: float, doing: str) -> dict:
        assert self.proc is not None and self._selector is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise SandboxError(
                    "time_limit",
                    f"stopped after {timeout:g} s {doing} (the time limit)",
                    self.log_tail(),
                )
            if self.on_wait is not None:
                self.on_wait()
            if not self._selector.select(min(left, 0.5)):
                if self.proc.poll() is not None:
                    self._died(doing)
                continue
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                self._died(doing)
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            self.close()
            raise SandboxError(
                "protocol", "the generator process sent an unreadable reply"
            ) from None
        violations = reply.get("violations") or []
        if violations:
            first = violations[0]
            self._kill()
            detail = "\n".join(v["message"] for v in violations)
            raise SandboxError(first["code"], first["message"], detail + "\n" + self.log_tail())
        return reply

    def _died(self, doing: str) -> None:
        assert self.proc is not None and self.watch is not None
        self._kill()  # what it left behind
        code = self.proc.wait()
        if self._ns.pid and code > 128:
            # Its namespace's init passes a death by signal on as 128 + the signal (runner.py).
            with contextlib.suppress(ValueError):
                code = -signal.Signals(code - 128)
        if self.watch.tripped:
            raise SandboxError(
                "memory",
                f"stopped {doing}: it used {self.watch.tripped / 1024**2:,.0f} MiB, more than the "
                f"{self.limits.memory_mb:,} MiB memory limit",
                self.log_tail(),
            )
        if code < 0:
            name = signal.Signals(-code).name
            hint = " (killed, probably for memory)" if -code == signal.SIGKILL else ""
            hint = " (the CPU time limit)" if -code == signal.SIGXCPU else hint
            raise SandboxError(
                "crash", f"the process died of {name}{hint} {doing}", self.log_tail()
            )
        raise SandboxError(
            "crash", f"the process exited with status {code} {doing}", self.log_tail()
        )

    def _request(self, payload: dict, doing: str) -> np.ndarray:
        if self.proc is None or self.proc.poll() is not None:
            raise SandboxError("crash", "the generator process is not running")
        self._calls += 1
        payload["out"] = f"call-{self._calls:06d}.npy"
        try:
            self.proc.stdin.write((json.dumps(payload) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            self._died(doing)
        reply = self._read_reply(self.limits.call_timeout_s, doing)
        if reply["event"] == "error":
            raise SandboxError(reply["code"], reply["message"], reply.get("traceback", ""))
        return self._load_output(payload["out"], int(payload["n"]), doing)

    def _load_output(self, name: str, n: int, doing: str) -> np.ndarray:
        """The output file, read only after its header matches the clips asked for.

        Opened once, without following links, and read from that one handle: the generator may
        still be running and could swap the file between a check and a second open.
        """
        try:
            folder = os.open(self.scratch / "out", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            raise SandboxError("protocol", f"the output of {doing} is missing") from None
        try:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
            except OSError:
                raise SandboxError("protocol", f"the output of {doing} is missing") from None
            with open(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise SandboxError("protocol", f"the output of {doing} is missing")
                return _read_samples(handle, self.spec.shape(n), doing)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
            os.close(folder)

    def generate(self, category: str, n: int, seed: int) -> np.ndarray:
        return self._request(
            {"op": "generate", "category": category, "n": n, "seed": seed},
            f"generating {n} clips of {category}",
        )

    def generate_from_text(self, prompt: str, n: int, seed: int) -> np.ndarray:
        return self._request(
            {"op": "generate_from_text", "prompt": prompt, "n": n, "seed": seed},
            f"generating {n} clips from text",
        )
