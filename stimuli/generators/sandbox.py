"""Running submitted generator code in an isolated process.

`Sandbox` starts `runner.py` in a child process and talks to it over pipes. What is enforced:

- A separate process, its own session (process group), killed as a whole when stopped.
- Time: a limit on loading and on every `generate` call (the parent kills the process when a
  reply is late); optionally RLIMIT_CPU on the total CPU time.
- Memory: the resident memory of the process group is watched and the group killed past the
  limit; RLIMIT_AS also caps the address space when no GPU is used (CUDA reserves huge virtual
  ranges, so the address-space cap is left off on GPU workers and only the watch applies).
- Network: a new, empty network namespace (`unshare -n`, or `unshare -rn` for an unprivileged
  worker where user namespaces are allowed); Landlock (ABI 4+) refuses TCP connect and bind; an
  audit hook refuses Python sockets and name lookups and reports the attempt.
- Files: Landlock lets the process read only the system, the Python installation and the
  generator's own code, and write only its scratch folder (its working directory, HOME and
  TMPDIR); the audit hook refuses and reports Python-level writes outside it. Without Landlock
  only the hook applies, which code using ctypes or C extensions can get around.
- Environment: nothing of the worker's environment is passed on (no DATABASE_URL, SECRET_KEY,
  broker URL or settings module); the settings and the database files are outside what Landlock
  lets it read.

`enforcement()` says which of these this machine provides; reports and job logs include it.
Output comes back as .npy files loaded with allow_pickle=False.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np

from .api import OutputSpec

RUNNER = Path(__file__).with_name("runner.py")
SYSTEM_READ_PATHS = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys"]
MAX_ARCHIVE_BYTES = 8 * 1024**3
MAX_ARCHIVE_FILES = 10_000


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
    def from_archive(cls, archive: Path | str, dest: Path | str) -> GeneratorSource:
        """Unpack a .zip or a wheel into `dest` and find its module.

        The module is named by `foley-generator.json` ({"module": ..., "model_path": ...}) when
        the archive has one, else it is the archive's one top-level package or .py file.
        `load_model` gets the unpacked folder (where the weights are) unless the manifest names
        a path inside it.
        """
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        _safe_extract(Path(archive), dest)
        manifest = dest / "foley-generator.json"
        model_path = str(dest)
        if manifest.exists():
            try:
                data = json.loads(manifest.read_text())
                module = str(data["module"])
            except (ValueError, KeyError, TypeError) as exc:
                raise SandboxError("archive", f"foley-generator.json is invalid: {exc}") from None
            if data.get("model_path"):
                inner = (dest / str(data["model_path"])).resolve()
                if not inner.is_relative_to(dest.resolve()):
                    raise SandboxError("archive", "model_path points outside the archive")
                model_path = str(inner)
        else:
            candidates = sorted(
                {p.name for p in dest.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
                | {p.stem for p in dest.glob("*.py")}
            )
            if len(candidates) != 1:
                found = ", ".join(candidates) or "none"
                raise SandboxError(
                    "archive",
                    "the archive must hold exactly one top-level module or package, or a "
                    f"foley-generator.json naming it (found: {found})",
                )
            module = candidates[0]
        return cls(
            module=module, sys_path=[str(dest)], read_paths=[str(dest)], model_path=model_path
        )


def _safe_extract(archive: Path, dest: Path) -> None:
    if not zipfile.is_zipfile(archive):
        raise SandboxError("archive", f"{archive.name} is not a zip archive or a wheel")
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        if len(members) > MAX_ARCHIVE_FILES:
            raise SandboxError("archive", f"the archive holds more than {MAX_ARCHIVE_FILES} files")
        if sum(m.file_size for m in members) > MAX_ARCHIVE_BYTES:
            raise SandboxError("archive", "the archive expands to more than 8 GiB")
        root = dest.resolve()
        for member in members:
            target = (dest / member.filename).resolve()
            if member.filename.startswith("/") or not target.is_relative_to(root):
                raise SandboxError("archive", f"{member.filename}: a path outside the archive")
            if (member.external_attr >> 16) & 0o170000 == 0o120000:
                raise SandboxError("archive", f"{member.filename}: symbolic links are not allowed")
        zf.extractall(dest)


@cache
def network_namespace_command() -> tuple[str, ...]:
    """The `unshare` prefix that gives a child an empty network namespace here, or ()."""
    unshare = shutil.which("unshare")
    if not unshare:
        return ()
    for flags in (("-n",), ("-rn",)):
        try:
            done = subprocess.run(
                [unshare, *flags, "true"], capture_output=True, timeout=10, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return (unshare, *flags)
    return ()


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
    netns = network_namespace_command()
    network = []
    if netns:
        network.append("empty network namespace")
    if abi >= 4:
        network.append("Landlock refuses TCP")
    network.append("Python sockets refused by an audit hook")
    return {
        "process": "separate process group, killed when stopped",
        "time": "wall-clock limits on loading and on every call",
        "memory": "resident memory watched and capped"
        + ("" if gpu else ", RLIMIT_AS on the address space"),
        "network": "; ".join(network),
        "filesystem": (
            f"Landlock ABI {abi}: reads system, Python and own code only, writes scratch only; "
            "audit hook reports writes outside"
            if abi >= 1
            else "audit hook refuses Python writes outside scratch (C code not covered: "
            "no Landlock here)"
        ),
        "environment": "stripped: no database, broker, settings or secrets",
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


class _MemoryWatch(threading.Thread):
    """Kills the child's process group when its resident memory passes the limit."""

    def __init__(self, pgid: int, limit_bytes: int):
        super().__init__(daemon=True)
        self.pgid = pgid
        self.limit = limit_bytes
        self.tripped = 0
        self.peak = 0
        self._halt = threading.Event()

    def _rss(self) -> int:
        total = 0
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                if int(fields[2]) != self.pgid:  # field 5 of stat: the process group
                    continue
                total += int(fields[21]) * resource.getpagesize()  # field 24: rss in pages
            except (OSError, IndexError, ValueError):
                continue
        return total

    def run(self) -> None:
        while not self._halt.wait(0.1):
            rss = self._rss()
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.tripped = rss
                _kill_group(self.pgid)
                return

    def stop(self) -> None:
        self._halt.set()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


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
        on_wait: Callable[[], None] | None = None,
    ):
        self.source = source
        self.spec = spec or OutputSpec()
        self.limits = limits or Limits()
        self.use_gpu = cuda_visible() if use_gpu is None else use_gpu
        # Off, only the audit hook applies: what a kernel without Landlock or namespaces gives.
        self.kernel_rules = kernel_rules
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
        netns = network_namespace_command() if self.kernel_rules else ()
        devices = [str(p) for p in Path("/dev").glob("nvidia*")] if self.use_gpu else []
        config = {
            "scratch": str(self.scratch),
            "module": self.source.module,
            "sys_path": [*self.source.sys_path, str(imports)],
            "model_path": self.source.model_path,
            "read_paths": [
                *SYSTEM_READ_PATHS,
                *_python_read_paths(),
                *self.source.read_paths,
                str(imports),
                str(RUNNER),
            ],
            "devices": [*devices, "/dev/null", "/dev/urandom", "/dev/zero"],
            "landlock": self.kernel_rules,
            "network_namespace": bool(netns),
        }
        config_path = self.root / "config.json"
        config_path.write_text(json.dumps(config))
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.proc = subprocess.Popen(
                [*netns, sys.executable, "-I", "-B", str(RUNNER), str(config_path)],
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
        self.watch = _MemoryWatch(self.proc.pid, self.limits.memory_mb * 1024**2)
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
            if self.proc.poll() is None:
                try:
                    self.proc.stdin.write(b'{"op": "exit"}\n')
                    self.proc.stdin.flush()
                    self.proc.wait(2)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            _kill_group(self.proc.pid)
            self.proc.wait()
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
                _kill_group(self.proc.pid)
                self.proc.wait()
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
                self.proc.wait()
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
            _kill_group(self.proc.pid)
            self.proc.wait()
            detail = "\n".join(v["message"] for v in violations)
            raise SandboxError(first["code"], first["message"], detail + "\n" + self.log_tail())
        return reply

    def _died(self, doing: str) -> None:
        assert self.proc is not None and self.watch is not None
        code = self.proc.wait()
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
        path = self.scratch / "out" / payload["out"]
        if path.is_symlink() or not path.is_file():
            raise SandboxError("protocol", f"the output of {doing} is missing")
        try:
            array = np.load(path, allow_pickle=False)
        except ValueError as exc:
            raise SandboxError(
                "wrong_dtype", f"the output of {doing} is not plain samples: {exc}"
            ) from None
        finally:
            path.unlink(missing_ok=True)
        return array

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
