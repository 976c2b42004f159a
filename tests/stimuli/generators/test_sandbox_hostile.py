"""Hostile generators against the sandbox, through the validator and through a generation job.

Each attack (tests/generator_fixtures/attacker.py) is made the plain way and, if it worked, the
generator carries on as a valid one: so every case asserts that validation and generation fail,
what the report says the attempt met, and, from outside, that nothing happened (the file not
written, the process alive, the datagram not received). The worker here runs as root with
PostgreSQL and Redis on the same host, the set-up the sandbox must survive.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from django.test import Client

from sandbox import isolation
from sandbox import process as sandbox_module
from sandbox.errors import SandboxError
from sandbox.process import Limits, Sandbox
from sandbox.source import GeneratorSource
from stimuli.generators import services as generators
from stimuli.generators.validate import validate_target
from stimuli.models import Generator, Job
from stimuli.services import create_challenge, create_system, create_team
from tests import ROOT_DIR

pytestmark = pytest.mark.sandbox

ROOT = ROOT_DIR
ATTACKER = "tests.generator_fixtures.attacker"
# Time limits roomy enough that, on a loaded machine, a memory or process limit is met well before
# them: only the two attacks that hang meet them.
LIMITS = {
    "load_timeout_s": 20,
    "call_timeout_s": 10,
    "memory_mb": 300,
    "max_processes": 256,
}
# The two attacks that hang meet nothing but a time limit: theirs are short, so that the suite
# does not wait out the roomy ones (the generator they run loads in well under a second).
HANG_LIMITS = {**LIMITS, "load_timeout_s": 6, "call_timeout_s": 3}
PG_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"


def limits_for(code) -> dict:
    """The sandbox's limits for an attack expected to end with `code`."""
    return HANG_LIMITS if code == "time_limit" else LIMITS


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def udp_listener():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.setblocking(False)
        yield listener


@pytest.fixture
def bystander():
    """A process of the worker's user outside the sandbox, for the generator to signal."""
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def attacks(media_root: Path, tmp_path: Path, udp_port: int, bystander_pid: int):
    """(name, configuration, expected code, words in the message, a check from outside)."""
    stored = media_root / "clips" / "secret.wav"
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(b"RIFF-a stored clip")
    outside = tmp_path / "escaped.txt"
    beside = ROOT / "tests" / "generator_fixtures" / "escaped.txt"
    settings_module = ROOT / "foley_platform" / "settings.py"
    return [
        ("postgresql socket", {"attack": "connect_unix", "path": PG_SOCKET}, "network",
         "network unavailable", None),
        ("postgresql tcp", {"attack": "connect_tcp", "host": "127.0.0.1", "port": 5432},
         "network", "127.0.0.1:5432", None),
        ("redis tcp", {"attack": "connect_tcp", "host": "127.0.0.1", "port": 6379},
         "network", "127.0.0.1:6379", None),
        ("udp to loopback", {"attack": "udp", "host": "127.0.0.1", "port": udp_port},
         "network", f"sendto 127.0.0.1:{udp_port}", None),
        # bubblewrap's first process, started with the stripped environment: readable where it
        # runs as the sandbox's user (a user namespace), not where it is root.
        ("/proc/1/environ",
         {"attack": "read", "path": "/proc/1/environ", "secret": "DJANGO_SETTINGS_MODULE"},
         ("exception", "not_visible"), ("holds none of the worker's secrets", "not readable"),
         None),
        ("parent's environ", {"attack": "read", "path": f"/proc/{os.getpid()}/environ"},
         "not_visible", "file outside its folder not visible", None),
        ("/etc/passwd", {"attack": "read", "path": "/etc/passwd"}, "not_visible",
         "/etc/passwd", None),
        ("media folder", {"attack": "read", "path": str(stored)}, "not_visible",
         str(stored), None),
        ("settings module", {"attack": "read", "path": str(settings_module)}, "not_visible",
         "settings.py", None),
        ("write outside", {"attack": "write", "path": str(outside)}, "not_visible",
         str(outside), lambda: not outside.exists()),
        ("write beside its code", {"attack": "write_beside_code"}, "write_outside",
         "read-only", lambda: not beside.exists()),
        ("signal a process outside", {"attack": "kill", "pid": bystander_pid}, "process",
         f"pid {bystander_pid}", None),
        ("memfd past the limit", {"attack": "memfd", "mb": 2 * LIMITS["memory_mb"]}, "memory",
         "memory limit (300 MiB) reached", None),
        ("fork bomb", {"attack": "fork_bomb", "count": 300}, "process_limit",
         "process limit (256 processes and threads) reached", None),
        ("allocate without bound", {"attack": "allocate"}, "memory",
         "memory limit (300 MiB) reached", None),
        ("sleep forever", {"attack": "sleep_forever"}, "time_limit", "3 s", None),
        ("ignore SIGTERM while loading", {"attack": "ignore_sigterm", "at": "load"},
         "time_limit", "6 s loading the model", None),
    ]  # fmt: skip


def _needs_host_service(name: str) -> None:
    """An attack on a service proves something only where the service runs here."""
    if name == "postgresql socket" and not Path(PG_SOCKET).exists():
        pytest.skip(f"no PostgreSQL socket at {PG_SOCKET} on this machine")
    if name.endswith(" tcp"):
        port = 5432 if name.startswith("postgresql") else 6379
        if not _listening(port):
            pytest.skip(f"nothing listens on 127.0.0.1:{port} here")


ATTACK_NAMES = [row[0] for row in attacks(Path("/m"), Path("/t"), 0, 0)]


def _case(name, media_root, tmp_path, udp_listener, bystander):
    port = udp_listener.getsockname()[1]
    rows = attacks(media_root, tmp_path, port, bystander.pid)
    return next(row for row in rows if row[0] == name)


def _after(name, check, udp_listener, bystander) -> None:
    """What must hold outside the sandbox after the attack."""
    if check is not None:
        assert check(), f"{name}: the attempt left a trace outside"
    assert bystander.poll() is None, "the process outside was signalled"
    with pytest.raises(BlockingIOError):
        udp_listener.recv(100)  # nothing crossed to the host's loopback


def _expected(code, words, found_code: str, found_message: str) -> None:
    codes = code if isinstance(code, tuple) else (code,)
    assert found_code in codes, (found_code, found_message)
    phrases = words if isinstance(words, tuple) else (words,)
    assert any(phrase in found_message for phrase in phrases), found_message


@pytest.fixture(params=["user namespace", "root without user namespaces"])
def isolation_mode(request, monkeypatch):
    """Both ways the sandbox is built: as uid 65534 of a user namespace (the usual way, and the
    only one for an unprivileged worker), and, on a root worker whose host allows no user
    namespaces, bubblewrap's other namespaces with the runner dropped to uid 65534 by setpriv."""
    if request.param != "user namespace":
        if os.geteuid() != 0:
            pytest.skip("only a root worker builds sandboxes without user namespaces")
        found = isolation.probe()
        monkeypatch.setattr(sandbox_module, "probe", lambda: replace(found, user_namespace=False))
    return request.param


@pytest.mark.parametrize("name", ATTACK_NAMES)
def test_hostile_generator_fails_validation(
    name, isolation_mode, media_root, tmp_path, udp_listener, bystander
):
    _needs_host_service(name)
    _name, config, code, words, check = _case(name, media_root, tmp_path, udp_listener, bystander)
    config_file = tmp_path / "attack.json"
    config_file.write_text(json.dumps(config))
    report = validate_target(
        ATTACKER, limits=Limits(**limits_for(code)), categories=["rain"], config=str(config_file)
    )
    assert not report.ok, f"{name}: the attack worked"
    first = report.problems[0]
    _expected(code, words, first.code, first.message)
    assert report.summary().startswith("Invalid generator")
    assert "bubblewrap" in report.enforcement["tool"]
    _after(name, check, udp_listener, bystander)


@pytest.fixture
def challenge(db, settings):
    settings.FOLEY_SANDBOX_LIMITS = LIMITS
    return create_challenge(
        name="Hostile", slug="hostile", clip_duration_s=1.0, categories=[("rain", "Rain")]
    )


def _generator_system(challenge, name: str, module: str, config: dict | None = None):
    team = challenge.teams.first() or create_team(challenge, name="Team")
    system = create_system(team=team, track=challenge.tracks.first(), name=name)
    generators.set_generator(system, module=module, config=config, validate=False)
    # As if it had passed validation and turned hostile afterwards.
    Generator.objects.filter(system=system).update(state=Generator.State.VALID)
    return system


@pytest.mark.parametrize("name", ATTACK_NAMES)
def test_hostile_generator_fails_its_generation_job(
    name, challenge, settings, media_root, tmp_path, udp_listener, bystander
):
    _needs_host_service(name)
    _name, config, code, words, check = _case(name, media_root, tmp_path, udp_listener, bystander)
    settings.FOLEY_SANDBOX_LIMITS = limits_for(code)
    system = _generator_system(challenge, "Hostile", ATTACKER, config)
    job = generators.generate_now(system, 2, 0, batch_size=2)
    assert job.state == Job.State.FAILED, f"{name}: the attack worked"
    found_code = job.error[1 : job.error.index("]")]
    _expected(code, words, found_code, job.error)
    assert system.clips.count() == 0
    assert "sandbox tool: bubblewrap" in job.log
    _after(name, check, udp_listener, bystander)


@pytest.mark.parametrize(
    "module", ["stimuli.generators.baseline", "tests.generator_fixtures.torch_tones"]
)
def test_valid_generators_still_pass(module, isolation_mode, challenge, settings):
    roomy = {**LIMITS, "load_timeout_s": 120, "call_timeout_s": 60}  # torch loads slowly
    settings.FOLEY_SANDBOX_LIMITS = roomy
    report = validate_target(module, limits=Limits(**roomy))
    assert report.ok, report.problems
    system = _generator_system(challenge, module.rsplit(".", 1)[1], module)
    job = generators.generate_now(system, 3, 0)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert system.clips.count() == 3


def test_cpu_time_limit_counts_the_whole_sandbox(tmp_path):
    config = tmp_path / "attack.json"
    config.write_text(json.dumps({"attack": "spin"}))
    source = GeneratorSource.from_module(ATTACKER, model_path=str(config))
    limits = Limits(**{**LIMITS, "call_timeout_s": 120, "cpu_s": 1.0})
    with Sandbox(source, limits=limits) as sandbox, pytest.raises(SandboxError) as caught:
        sandbox.generate("rain", 1, 0)
    assert caught.value.code == "time_limit"
    assert "CPU time limit (1 s) reached" in caught.value.message


# --- fail closed ---------------------------------------------------------------------------------


@pytest.fixture
def fresh_probe():
    isolation.probe.cache_clear()
    yield
    isolation.probe.cache_clear()


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("FOLEY_SANDBOX_BWRAP", "/nonexistent/bwrap", "bubblewrap is not installed"),
        ("FOLEY_SANDBOX_CGROUP", "/cgroup.procs/sandbox", "no writable cgroup"),
    ],
)
def test_without_isolation_submitted_code_is_refused(
    variable, value, words, monkeypatch, fresh_probe, challenge
):
    monkeypatch.setenv(variable, value)
    missing = isolation.probe().missing
    assert len(missing) == 1 and words in missing[0]

    source = GeneratorSource.from_module("stimuli.generators.baseline")
    with pytest.raises(SandboxError) as caught:
        Sandbox(source, limits=Limits(**LIMITS)).start()
    assert caught.value.code == "isolation_unavailable"
    assert words in caught.value.message and "trusted" in caught.value.message

    report = validate_target("stimuli.generators.baseline", limits=Limits(**LIMITS))
    assert [p.code for p in report.problems] == ["isolation_unavailable"]

    system = _generator_system(challenge, "Untrusted", "stimuli.generators.baseline")
    job = generators.generate_now(system, 2, 0)
    assert job.state == Job.State.FAILED and job.error.startswith("[isolation_unavailable]")
    assert words in job.error and system.clips.count() == 0

    # An organizer's explicit trust runs it, and the log says it ran without isolation.
    generators.set_trusted(system.generator, True)
    job = generators.generate_now(system, 2, 0)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert "sandbox isolation: none (trusted generator, run as a plain process)" in job.log
    assert words in job.log


def test_trust_is_an_organizers_word_and_cleared_with_new_code(challenge, organizer):
    system = _generator_system(challenge, "Team code", "stimuli.generators.baseline")
    client = Client()
    client.force_login(organizer)
    url = f"/api/challenges/{challenge.slug}/generators/{system.pk}/trust/"
    answer = client.post(url, {"trusted": True}, content_type="application/json")
    assert answer.status_code == 200 and answer.json()["trusted"] is True
    page = client.get(f"/organize/{challenge.slug}/generators/")
    assert b'data-trusted="1"' in page.content
    # The page's button withdraws it.
    client.post(f"/organize/{challenge.slug}/generators/systems/{system.pk}/trust/")
    assert Generator.objects.get(system=system).trusted is False
    client.post(
        f"/organize/{challenge.slug}/generators/systems/{system.pk}/trust/", {"trusted": "on"}
    )
    assert Generator.objects.get(system=system).trusted is True
    # New code is not trusted because the old code was.
    generators.set_generator(system, module="tests.generator_fixtures.good", validate=False)
    assert Generator.objects.get(system=system).trusted is False
    assert (
        client.post(url, {"trusted": "maybe"}, content_type="application/json").status_code == 400
    )
    client.logout()
    assert client.post(url, {"trusted": True}, content_type="application/json").status_code in (
        401,
        403,
    )
