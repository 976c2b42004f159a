"""Running submitted generator code: one sandboxed process per generator, talked to over pipes.

`Sandbox` builds the bubblewrap command line and the cgroup (`isolation.py`), starts `runner.py`
in them, watches the time limits, and reads the outputs. Submitted code is never run without the
isolation: where this machine cannot provide it, `start()` refuses with what is missing, unless
the generator is marked trusted by an organizer (then it runs as a plain child process, and the
job log says so).

Output comes back as .npy files; the header's shape and dtype are checked against the clips asked
for before any data is read, and the data is read with allow_pickle=False semantics.
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
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

import numpy as np

from .errors import SandboxError
from .isolation import (
    SANDBOX_ROOT,
    SANDBOX_UID,
    Cgroup,
    Isolation,
    bwrap_command,
    probe,
    seccomp_program,
)
from .npy_header import is_plain_numbers, read_header
from .source import GeneratorSource


class OutputSpec(Protocol):
    """What the sandbox needs of a clip spec (stimuli.audio.ClipSpec is one)."""

    sample_rate: int
    channels: int
    duration_s: float

    @property
    def frames(self) -> int: ...


@dataclass(frozen=True)
class DefaultSpec:
    """DCASE 2023 Task 7's clips: 4 s of 22,050 Hz mono."""

    sample_rate: int = 22_050
    channels: int = 1
    duration_s: float = 4.0

    @property
    def frames(self) -> int:
        return round(self.duration_s * self.sample_rate)


def output_shape(spec: OutputSpec, n: int) -> tuple[int, ...]:
    """The array one call for `n` clips must return: [n, frames], or [n, channels, frames]."""
    return (n, spec.frames) if spec.channels == 1 else (n, spec.channels, spec.frames)


def output_env(spec: OutputSpec) -> dict[str, str]:
    """The clip spec as the generator's process reads it (the contract's environment)."""
    return {
        "FOLEY_SAMPLE_RATE": str(spec.sample_rate),
        "FOLEY_CLIP_DURATION_S": repr(float(spec.duration_s)),
        "FOLEY_CHANNELS": str(spec.channels),
    }


RUNNER = Path(__file__).with_name("runner.py")


@dataclass(frozen=True)
class Limits:
    load_timeout_s: float = 600.0
    call_timeout_s: float = 600.0
    memory_mb: int = 8192
    # Processes and threads together (the cgroup's pids.max): torch starts a thread per core.
    max_processes: int = 256
    # Address space (virtual memory) cap without a GPU: generous, since imports reserve a lot.
    address_space_mb: int = 32768
    file_size_mb: int = 4096
    # Total CPU seconds of the whole sandbox; off by default, since a long generation on many
    # threads legitimately burns hours. The wall-clock limits above always apply.
    cpu_s: float | None = None


def cuda_visible() -> bool:
    """A GPU is visible when CUDA_VISIBLE_DEVICES names one and NVIDIA device files exist."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return bool(list(Path("/dev").glob("nvidia[0-9]*")))


def enforcement(use_gpu: bool | None = None, trusted: bool = False) -> dict[str, str]:
    """What the sandbox enforces on this machine, in words, for reports and logs."""
    isolation = probe()
    described = isolation.describe(cuda_visible() if use_gpu is None else use_gpu)
    if not isolation.ok and trusted:
        described["isolation"] = "none (trusted generator, run as a plain process): " + "; ".join(
            isolation.missing
        )
    return described


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
        trusted: bool = False,
        isolation: Isolation | None = None,
        on_wait: Callable[[], None] | None = None,
    ):
        self.source = source
        self.spec = spec or DefaultSpec()
        self.limits = limits or Limits()
        self.use_gpu = cuda_visible() if use_gpu is None else use_gpu
        # Trusted (an organizer's explicit choice): may run without isolation where none exists.
        self.trusted = trusted
        self.isolation = isolation
        self.isolated = False
        # Called about every half second while waiting on the generator (a job's heartbeat).
        self.on_wait = on_wait
        self._own_root = workdir is None
        self.root = Path(workdir or tempfile.mkdtemp(prefix="foley-sandbox-"))
        self.scratch = self.root / "scratch"
        self.log_path = self.root / "generator.log"
        self.proc: subprocess.Popen | None = None
        self.cgroup: Cgroup | None = None
        self.info: dict = {}
        self._killed = False
        self._calls = 0
        self._selector: selectors.BaseSelector | None = None
        self._buffer = b""

    # --- life cycle ---

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _env(self, home: str) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": f"{home}/tmp",
            "LANG": "C.UTF-8",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "MPLCONFIGDIR": f"{home}/.cache",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "FOLEY_DEVICE": "cuda" if self.use_gpu else "cpu",
            **output_env(self.spec),
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
        """In the child, before bubblewrap starts: its cgroup and the per-process limits."""
        if self.cgroup is not None:
            self.cgroup.join()
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        size = self.limits.file_size_mb * 1024**2
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        if not self.use_gpu and self.limits.address_space_mb:
            # CUDA reserves huge virtual ranges, so GPU jobs rely on the cgroup alone.
            space = self.limits.address_space_mb * 1024**2
            resource.setrlimit(resource.RLIMIT_AS, (space, space))

    def _layout(self) -> tuple[list[tuple[str, str]], dict]:
        """The read-only binds and the runner's configuration, as the runner will see them."""
        binds: list[tuple[str, str]] = []
        code_root = f"{SANDBOX_ROOT}/code" if self.isolated else str(self.root / "code")
        for host, where in self.source.code:
            inside = f"{code_root}/{where}".rstrip("/")
            if self.isolated:
                binds.append((host, inside))
            else:
                link = Path(inside)
                link.parent.mkdir(parents=True, exist_ok=True)
                if not link.is_symlink():
                    link.symlink_to(host)
        model_path = self.source.model_path
        if model_path and self.isolated:
            model = Path(model_path).resolve()
            for host, where in self.source.code:
                if model.is_relative_to(host):
                    model_path = str(PurePosixPath(code_root, where, model.relative_to(host)))
                    break
            else:
                model_path = f"{SANDBOX_ROOT}/model/{model.name}"
                binds.append((str(model), model_path))
        config = {
            "scratch": f"{SANDBOX_ROOT}/scratch" if self.isolated else str(self.scratch),
            "module": self.source.module,
            "sys_path": [code_root],
            "model_path": model_path,
        }
        return binds, config

    def start(self) -> dict:
        """Start the process and load the model; returns the `loaded` reply."""
        isolation = self.isolation or probe()
        if not isolation.ok and not self.trusted:
            raise SandboxError(
                "isolation_unavailable",
                "submitted code is not run without isolation, and this worker cannot provide it: "
                + "; ".join(isolation.missing)
                + ". (An organizer may mark a generator trusted to run it without.)",
            )
        self.isolated = isolation.ok
        self.scratch.mkdir(parents=True, exist_ok=True)
        (self.scratch / "tmp").mkdir(exist_ok=True)
        (self.scratch / "out").mkdir(exist_ok=True)
        if self.isolated and not isolation.user_namespace:
            # The runner is uid 65534 on this machine itself: its folder must be its own.
            for folder in (self.scratch, self.scratch / "tmp", self.scratch / "out"):
                os.chown(folder, SANDBOX_UID, SANDBOX_UID)
            self.root.chmod(0o711)
        binds, config = self._layout()
        config_path = self.root / "config.json"
        config_path.write_text(json.dumps(config))
        runner_args = ["-I", "-B"]
        seccomp_fd = None
        if self.isolated:
            assert isolation.bwrap is not None and isolation.cgroup is not None
            self.cgroup = Cgroup(
                isolation.cgroup, self.limits.memory_mb * 1024**2, self.limits.max_processes
            )
            seccomp_fd = os.memfd_create("foley-seccomp", 0)
            os.write(seccomp_fd, seccomp_program())
            os.lseek(seccomp_fd, 0, os.SEEK_SET)
            command = [
                *bwrap_command(
                    isolation.bwrap,
                    read_only=[
                        *binds,
                        (str(RUNNER), f"{SANDBOX_ROOT}/runner.py"),
                        (str(config_path), f"{SANDBOX_ROOT}/config.json"),
                    ],
                    writable=[(str(self.scratch), config["scratch"])],
                    workdir=config["scratch"],
                    seccomp_fd=seccomp_fd,
                    use_gpu=self.use_gpu,
                    user_namespace=isolation.user_namespace,
                ),
                sys.executable,
                *runner_args,
                f"{SANDBOX_ROOT}/runner.py",
                f"{SANDBOX_ROOT}/config.json",
            ]
        else:
            command = [sys.executable, *runner_args, str(RUNNER), str(config_path)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child, closed below
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.scratch,
                # bubblewrap's own process (PID 1 inside) keeps the environment it started with.
                env=self._env(config["scratch"]),
                start_new_session=True,
                pass_fds=(seccomp_fd,) if seccomp_fd is not None else (),
                preexec_fn=self._preexec,
            )
        except BaseException:
            self.close()
            raise
        finally:
            log.close()
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)
        reply = self._read_reply(self.limits.load_timeout_s, "loading the model")
        if reply["event"] == "error":
            self.close()
            raise self._error(reply)
        self.info = reply
        return reply

    def close(self) -> None:
        if self.proc is not None:
            self._kill()
            for pipe in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    pipe.close()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self._selector is not None:
            self._selector.close()
            self._selector = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def _kill(self) -> None:
        """Kill everything the sandbox started, once, and reap its first process."""
        assert self.proc is not None
        if not self._killed:
            self._killed = True
            if self.cgroup is not None:
                self.cgroup.kill()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                handle.seek(max(0, handle.tell() - chars))
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    # --- limits met ---

    def _oom_killed(self) -> bool:
        return self.cgroup is not None and self.cgroup.oom_kills() > 0

    def _limit_met(self) -> SandboxError | None:
        """The limit the sandbox's cgroup says was met, if any: it explains the failure best."""
        if self.cgroup is None:
            return None
        if self.cgroup.oom_kills():
            return SandboxError(
                "memory",
                f"memory limit ({self.limits.memory_mb:,} MiB) reached: the kernel stopped the "
                "generator",
                self.log_tail(),
            )
        if refused := self.cgroup.forks_refused():
            return SandboxError(
                "process_limit",
                f"process limit ({self.limits.max_processes:,} processes and threads) reached: "
                f"{refused:,} refused",
                self.log_tail(),
            )
        limit = self.limits.cpu_s
        if limit and self.cgroup.cpu_seconds() > limit:
            return SandboxError(
                "time_limit", f"CPU time limit ({limit:g} s) reached", self.log_tail()
            )
        return None

    def _error(self, reply: dict) -> SandboxError:
        """The error a reply reports, unless a limit explains it better."""
        found = self._limit_met()
        if found is not None:
            return found
        code, message = reply["code"], reply["message"]
        if code == "memory":
            message = f"memory limit ({self.limits.memory_mb:,} MiB) reached: {message}"
        return SandboxError(code, message, reply.get("traceback", ""))

    # --- talking to the runner ---

    def _read_reply(self, timeout: float, doing: str) -> dict:
        assert self.proc is not None and self._selector is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                # A process of the sandbox killed for memory meanwhile explains the wait best.
                if found := self._limit_met():
                    raise found
                raise SandboxError(
                    "time_limit",
                    f"stopped after {timeout:g} s {doing} (the time limit)",
                    self.log_tail(),
                )
            if self.on_wait is not None:
                self.on_wait()
            # A process of the sandbox killed for memory ends the call at once, whatever else
            # the call is doing (sleeping, waiting on it): the limit met is the answer, and it
            # does not depend on how soon the time limit comes on a loaded machine.
            if (self.limits.cpu_s or self._oom_killed()) and (found := self._limit_met()):
                self._kill()
                raise found
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
            if not isinstance(reply, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
            self.close()
            raise SandboxError(
                "protocol", "the generator process sent an unreadable reply"
            ) from None
        violations = reply.get("violations") or []
        if violations:
            # Attempts the isolation stopped: a generator that tries them is not accepted, even
            # when it carries on without.
            first = violations[0]
            self._kill()
            detail = "\n".join(v["message"] for v in violations)
            raise SandboxError(first["code"], first["message"], detail + "\n" + self.log_tail())
        return reply

    def _died(self, doing: str) -> None:
        assert self.proc is not None
        self._kill()  # what it left behind
        code = self.proc.returncode
        if code > 128:
            # bubblewrap passes a death by signal on as 128 + the signal, as a shell does.
            with contextlib.suppress(ValueError):
                code = -signal.Signals(code - 128)
        found = self._limit_met()
        if found is not None:
            found.message = f"{found.message} ({doing})"
            raise found
        if code < 0:
            name = signal.Signals(-code).name
            raise SandboxError("crash", f"the process died of {name} {doing}", self.log_tail())
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
            raise self._error(reply)
        if found := self._limit_met():
            # It carried on past a refused fork or thread: not how a generator may work.
            self._kill()
            raise found
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
                return _read_samples(handle, output_shape(self.spec, n), doing)
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

    def generate_from_texts(self, prompts: list[str], n: int, seeds: list[int]) -> np.ndarray:
        """`n` clips of each prompt in one call, prompt after prompt: [len(prompts) * n, ...]."""
        return self._request(
            {
                "op": "generate_from_texts",
                "prompts": list(prompts),
                "seeds": [int(seed) for seed in seeds],
                "per_prompt": n,
                "n": n * len(prompts),
            },
            f"generating {n} clips of each of {len(prompts)} prompts",
        )
