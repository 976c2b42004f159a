"""The validator and the sandbox on the baseline and on generators broken in every listed way."""

from __future__ import annotations

import contextlib
import io
import json
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from sandbox.errors import SandboxError
from sandbox.process import Limits, Sandbox, output_shape
from sandbox.source import GeneratorSource
from stimuli.audio import ClipSpec
from stimuli.generators import baseline
from stimuli.generators.contract import CATEGORIES, derive_seed, resolve_category
from stimuli.generators.validate import validate_target
from tests import ROOT_DIR, TESTS_DIR

pytestmark = pytest.mark.sandbox

FIXTURES = "tests.generator_fixtures"
FIXTURE_DIR = TESTS_DIR / "generator_fixtures"
# Short limits keep the hang and memory cases quick; real systems get the settings' limits.
LIMITS = Limits(load_timeout_s=60, call_timeout_s=4, memory_mb=600)
# Two categories are enough to show a per-category problem and keep the runs short.
CATS = ["rain", "gunshot"]


# The memory case must end on memory whatever the machine's load: with the short call limit a
# loaded machine met the time limit first, so it gets a call limit far beyond its allocations' time.
MEMORY_LIMITS = Limits(load_timeout_s=60, call_timeout_s=600, memory_mb=600)


def check(name: str, limits: Limits = LIMITS, **kwargs):
    return validate_target(f"{FIXTURES}.{name}", limits=limits, categories=CATS, **kwargs)


def codes(report) -> list[str]:
    return [p.code for p in report.problems]


def test_baseline_is_valid_for_all_seven_categories():
    report = validate_target("stimuli.generators.baseline", limits=LIMITS)
    assert report.ok, report.problems
    assert report.clips_checked == 2 * len(CATEGORIES)
    assert report.has_text
    assert "the same seed gives the same audio" in report.checks


@pytest.mark.parametrize("name", ["good", "good_int16"])
def test_good_fixtures_are_valid(name):
    report = check(name)
    assert report.ok, report.problems


@pytest.mark.parametrize(
    ("name", "code", "words"),
    [
        ("missing_function", "missing_function", "no generate function"),
        ("wrong_shape", "wrong_shape", "expected [2, 88200]"),
        ("wrong_rate", "wrong_sample_rate", "16,000 Hz"),
        ("nan_output", "not_finite", "NaN or infinite"),
        ("out_of_range", "out_of_range", "must lie in -1..1"),
        ("raises", "exception", "KeyError: 'decoder'"),
        ("sleeper", "time_limit", "time limit"),
        ("memory_hog", "memory", "memory limit"),
        ("network", "network", "example.com"),
        ("writes_outside", "write_outside", "outside its folder"),
        ("crash", "crash", "SIGSEGV"),
    ],
)
def test_broken_fixture_is_reported(name, code, words):
    report = check(name, MEMORY_LIMITS if code == "memory" else LIMITS)
    assert not report.ok
    assert code in codes(report), report.problems
    problem = next(p for p in report.problems if p.code == code)
    assert words in problem.message
    assert report.summary().startswith("Invalid generator")


def test_per_category_problem_names_every_category():
    report = check("raises")
    assert report.problems[0].message.startswith("rain, gunshot: generate raised KeyError")
    assert "raises.py" in report.problems[0].detail  # the traceback's tail


def test_wrong_rate_reports_rate_and_length():
    assert set(codes(check("wrong_rate"))) == {"wrong_sample_rate", "wrong_shape"}


def test_write_outside_leaves_no_file():
    report = check("writes_outside")
    assert "escaped.txt" in report.problems[0].message
    assert not (FIXTURE_DIR / "escaped.txt").exists()


@pytest.fixture
def probe():
    with Sandbox(GeneratorSource.from_module(f"{FIXTURES}.probe"), limits=LIMITS) as sandbox:
        yield sandbox


def test_environment_is_stripped_and_cwd_is_scratch(probe, monkeypatch):
    with pytest.raises(SandboxError) as caught:
        probe.generate("env", 1, 0)
    env = caught.value.message
    for secret in ("DATABASE_URL", "SECRET_KEY", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"):
        assert secret not in env
    assert "CWD /sandbox/scratch" in env


def test_settings_are_not_there_and_c_writes_are_refused(probe, tmp_path):
    settings_file = ROOT_DIR / "foley_platform" / "settings.py"
    with pytest.raises(SandboxError) as caught:
        probe.generate(f"read:{settings_file}", 1, 0)
    assert caught.value.code == "not_visible" and str(settings_file) in caught.value.message
    outside = tmp_path / "c-write.txt"
    with pytest.raises(SandboxError, match="fopen refused"):
        probe.generate(f"cwrite:{outside}", 1, 0)
    assert not outside.exists()
    # Inside its own folder the same C call works.
    assert probe.generate("cwrite:ok.txt", 1, 0).shape == (1, 88200)
    assert (probe.scratch / "ok.txt").exists()


def _zip(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def test_zip_archive_with_weights(tmp_path):
    module = (FIXTURE_DIR / "_common.py").read_text() + (
        "\n\ndef load_model(path):\n"
        "    import json, os\n"
        "    cfg = json.load(open(os.path.join(path, 'weights.json')))\n"
        "    return Model(duration_s=cfg['duration_s'])\n\n"
        "def generate(model, category, n, seed):\n"
        "    return tones(model, category, n, seed)\n"
    )
    archive = tmp_path / "system.zip"
    archive.write_bytes(_zip({"mygen.py": module, "weights.json": json.dumps({"duration_s": 4})}))
    report = validate_target(str(archive), limits=LIMITS, categories=CATS)
    assert report.ok, report.problems
    assert report.module == "mygen"


def test_archive_with_two_modules_or_escaping_names_is_rejected(tmp_path):
    two = tmp_path / "two.zip"
    two.write_bytes(_zip({"a.py": "", "b.py": ""}))
    report = validate_target(str(two), limits=LIMITS)
    assert codes(report) == ["archive"] and "exactly one" in report.problems[0].message
    evil = tmp_path / "evil.zip"
    evil.write_bytes(_zip({"../../escape.py": ""}))
    report = validate_target(str(evil), limits=LIMITS)
    assert codes(report) == ["archive"] and "outside" in report.problems[0].message
    notzip = tmp_path / "gen.whl"
    notzip.write_text("not a wheel")
    assert codes(validate_target(str(notzip), limits=LIMITS)) == ["archive"]


def test_wheel_is_accepted(tmp_path):
    module = (FIXTURE_DIR / "_common.py").read_text() + (
        "\n\ndef load_model(path):\n    return Model()\n\n"
        "def generate(model, category, n, seed):\n    return tones(model, category, n, seed)\n"
    )
    wheel = tmp_path / "wheelgen-1.0-py3-none-any.whl"
    wheel.write_bytes(
        _zip(
            {
                "wheelgen/__init__.py": module,
                "wheelgen-1.0.dist-info/METADATA": "Name: wheelgen\nVersion: 1.0\n",
            }
        )
    )
    report = validate_target(str(wheel), limits=LIMITS, categories=CATS)
    assert report.ok, report.problems
    assert report.module == "wheelgen"


def test_command_exit_status(capsys):
    call_command("validate_generator", "stimuli.generators.baseline", "--clips", "1")
    assert "Valid generator" in capsys.readouterr().out
    with pytest.raises(CommandError, match="Invalid generator"):
        call_command("validate_generator", f"{FIXTURES}.nan_output", "--clips", "1")
    assert "[not_finite]" in capsys.readouterr().out
    with pytest.raises(CommandError, match=r"cannot find module no\.such\.module"):
        call_command("validate_generator", "no.such.module")


def test_baseline_is_deterministic_and_independent_of_batch_size():
    model = baseline.load_model(None)
    a = baseline.generate(model, "rain", 4, 7)
    b = baseline.generate(model, "Rain", 2, 7)
    assert a.dtype == np.float32 and a.shape == (4, 88200)
    np.testing.assert_array_equal(a[:2], b)
    assert not np.array_equal(a, baseline.generate(model, "rain", 4, 8))
    assert not np.array_equal(a[0], a[1])


def test_baseline_config_variants(tmp_path):
    config = tmp_path / "bright.toml"
    config.write_text("brightness = 1.0\ndensity = 2.0\nsample_rate = 16000\nduration_s = 2.0\n")
    model = baseline.load_model(config)
    assert model.sample_rate == 16000 and model.brightness == 1.0
    clips = baseline.generate(model, "Moving motor vehicle", 1, 0)
    assert clips.shape == (1, 32000)
    (tmp_path / "bad.json").write_text('{"loudness": 3}')
    with pytest.raises(ValueError, match="unknown baseline settings: loudness"):
        baseline.load_model(tmp_path / "bad.json")


def test_category_names_and_seeds():
    assert resolve_category("Sneeze/cough") == "sneeze_cough"
    assert resolve_category("Dog bark") == "dog_bark"
    assert resolve_category("footsteps") == "footstep"
    assert resolve_category("violin") is None
    assert derive_seed(0, "rain", 60) == derive_seed(0, "rain", 60)
    assert derive_seed(0, "rain", 60) != derive_seed(0, "rain", 61)
    assert output_shape(ClipSpec(sample_rate=16000, duration_s=2.0, channels=2), 3) == (3, 2, 32000)


def test_ignoring_the_seed_is_a_warning():
    report = check("unseeded")
    assert report.ok  # valid output; a GPU model may not be bit-exact either
    assert [w.code for w in report.warnings] == ["not_deterministic"]
    assert "resumed job" in report.warnings[0].message


def test_standalone_entry_point_for_authors(capsys):
    from stimuli.generators.validate import main

    assert main(["stimuli.generators.baseline", "--sample-rate", "16000", "--clips", "1"]) == 0
    assert "Valid generator" in capsys.readouterr().out
    assert main([f"{FIXTURES}.wrong_rate", "--clips", "1"]) == 1
    assert "[wrong_sample_rate]" in capsys.readouterr().out


def test_c_level_connection_to_local_services_is_cut(probe):
    """Below Python: a raw connect() to the machine's PostgreSQL or Redis port fails."""
    import socket

    for port in (5432, 6379):
        with socket.socket() as outside:
            outside.settimeout(1)
            if outside.connect_ex(("127.0.0.1", port)) != 0:
                continue  # nothing listens here; nothing to prove with this port
        with pytest.raises(SandboxError, match="connect refused"):
            probe.generate(f"cconnect:127.0.0.1:{port}", 1, 0)


def test_other_programs_may_run_inside(probe):
    # Children inherit the namespaces, the cgroup and the seccomp filter.
    assert probe.generate("spawn", 1, 0).shape == (1, 88200)


def test_moving_a_file_out_of_the_folder_is_refused(tmp_path):
    target = tmp_path / "moved.txt"
    source = GeneratorSource.from_module(f"{FIXTURES}.probe")
    with Sandbox(source, limits=LIMITS) as sandbox, pytest.raises(SandboxError) as caught:
        sandbox.generate(f"move:{target}", 1, 0)
    assert caught.value.code == "not_visible" and str(target) in caught.value.message
    assert not target.exists()


# --- the worker's secrets, daemons, oversized output and archives ---------------------------

SNOOP_WORKER = """
import os, sys
from sandbox.errors import SandboxError
from sandbox.process import Limits, Sandbox
from sandbox.source import GeneratorSource

how, workdir = sys.argv[1:3]
sandbox = Sandbox(
    GeneratorSource.from_module("tests.generator_fixtures.snoop"),
    limits=Limits(load_timeout_s=60, call_timeout_s=30),
    workdir=workdir,
)
with sandbox:
    try:
        sandbox.generate(f"{how}:{os.getpid()}", 1, 0)
        print("refused: none")
    except SandboxError as exc:
        print(f"refused: {exc.code}")
"""

SECRET = "postgres://foley:hunter2@db.internal/foley"


@pytest.mark.parametrize("how", ["python", "c"])
def test_worker_environment_is_out_of_reach_in_the_sandbox(tmp_path, how):
    """The snooping generator reads every /proc/<pid>/environ it can find, from Python and from
    C, run from a worker process that holds a secret in its environment (/proc shows the
    environment a process started with, so the worker is a fresh process, not this test).

    In its own PID namespace it finds bubblewrap's first process (PID 1, started with the
    sandbox's stripped environment) and itself; the worker is not there.
    """
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", SNOOP_WORKER, how, str(tmp_path)],
        env={**os.environ, "FOLEY_WORKER_SECRET": SECRET},
        cwd=ROOT_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    stolen = (tmp_path / "scratch" / "stolen.bin").read_bytes()
    assert b"FOLEY_SAMPLE_RATE=" in stolen  # its own /proc/self stays readable
    assert SECRET.encode() not in stolen and b"FOLEY_WORKER_SECRET" not in stolen
    assert b"DATABASE_URL" not in stolen
    assert stolen.startswith(b"pid 2\n")  # the second process of its own namespace
    assert done.stdout.strip() == "refused: none"  # nothing to refuse: nothing else to read


def _beats(path: Path, wait: float = 10.0) -> str:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if text := path.read_text():
                return text
        time.sleep(0.05)
    raise AssertionError(f"no heartbeat in {path}")


def _working_in(folder: Path) -> list[int]:
    """The processes whose working folder is `folder` (compared by inode: a sandboxed process
    sees it under another path)."""
    want = folder.stat()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                seen = (entry / "cwd").stat()
                if (seen.st_dev, seen.st_ino) == (want.st_dev, want.st_ino):
                    found.append(int(entry.name))
    return found


def test_a_daemon_left_by_the_generator_dies_with_the_sandbox(tmp_path):
    """A grandchild in a session of its own (fork, setsid, fork) is outside the runner's process
    group; closing the sandbox still stops it (its cgroup and its PID namespace)."""
    source = GeneratorSource.from_module(f"{FIXTURES}.daemon")
    scratch = tmp_path / "scratch"
    heartbeat = scratch / "heartbeat"
    with Sandbox(source, limits=LIMITS, workdir=tmp_path) as sandbox:
        assert sandbox.generate("beat", 1, 0).shape == (1, 88200)
        first = _beats(heartbeat)
        deadline = time.monotonic() + 10
        while _beats(heartbeat) == first:  # the daemon is alive and beating
            assert time.monotonic() < deadline, "the daemon never beat again"
            time.sleep(0.01)
        assert _working_in(scratch)  # it is there to be found
    assert _working_in(scratch) == []  # closing the sandbox took it


def test_memory_limit_counts_a_daemon_in_a_session_of_its_own(tmp_path):
    source = GeneratorSource.from_module(f"{FIXTURES}.daemon")
    sandbox = Sandbox(source, limits=MEMORY_LIMITS, workdir=tmp_path)
    with sandbox, pytest.raises(SandboxError) as caught:
        sandbox.generate("hog", 1, 0)  # the call sleeps 60 s while its daemon grows
    # Ended by the daemon's kill: a call that ran to its end would return its clips, and the time
    # limit (600 s) would say so.
    assert caught.value.code == "memory", caught.value
    assert "memory limit (600 MiB) reached" in caught.value.message


def test_oversized_output_is_refused_from_its_header_without_loading_it():
    """The output declares 1 GiB; the sandbox reads the .npy header, compares it with the clips
    it asked for and refuses, without allocating the gigabyte."""
    import tracemalloc

    source = GeneratorSource.from_module(f"{FIXTURES}.huge_output")
    with Sandbox(source, limits=LIMITS) as sandbox:
        tracemalloc.start()  # numpy reports its array buffers to tracemalloc
        try:
            with pytest.raises(SandboxError) as caught:
                sandbox.generate("rain", 2, 0)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert caught.value.code == "wrong_shape"
    assert "[2, 134217728]" in caught.value.message and "[2, 88200]" in caught.value.message
    assert peak < 50 * 1024**2, f"{peak:,} bytes allocated to refuse it"


def test_a_job_refuses_a_model_whose_rate_is_not_the_challenges_when_it_runs():
    """Both generation paths (category clips, clips from judges' prompts) start the submitted
    code through one checked start: validation passed once proves nothing about the next run,
    so a model reporting another sample rate is refused there, with the rate in the message."""
    from stimuli.generators.services import GenerationError, start_checked

    lines: list[str] = []
    source = GeneratorSource.from_module(f"{FIXTURES}.wrong_rate")
    sandbox = Sandbox(source, limits=LIMITS)
    try:
        with pytest.raises(GenerationError) as caught:
            start_checked(sandbox, ClipSpec(sample_rate=22_050, duration_s=4.0), lines.append)
    finally:
        sandbox.close()
    assert "model.sample_rate is 16000; the challenge needs 22050 Hz" in str(caught.value)
    assert lines and lines[0].startswith("loaded ")
