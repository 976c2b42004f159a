"""scripts/check-image runs docker-compose.yml's own services: every service it starts becomes a
`docker run` with compose's image, command, entrypoint, user, environment, volumes, ports,
address, capabilities, security options and health check, and a compose key it cannot translate
stops it. These tests need no Docker; the check itself does (docs/deployment.md)."""

from __future__ import annotations

import importlib.util
import shlex
from pathlib import Path

import pytest

from tests import ROOT_DIR

spec = importlib.util.spec_from_file_location("check_image", ROOT_DIR / "scripts/check_image.py")
check_image = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_image)

ENV_FILE = Path("/run/check/.env")


@pytest.fixture(scope="module")
def compose() -> dict:
    return check_image.load_compose(ROOT_DIR)


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return check_image.read_env_file(ROOT_DIR / ".env.example")


def runs(name: str, compose: dict, env: dict) -> list[str]:
    return check_image.run_args(name, compose, env=env, env_file=ENV_FILE, root=ROOT_DIR)


def options(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == flag]


def test_the_check_runs_every_service_but_the_gpu_worker(compose):
    assert set(compose["services"]) - set(check_image.SERVICES) == {"worker-gpu"}
    # The GPU worker is the CPU worker's definition but for the image, queue and device.
    gpu, cpu = compose["services"]["worker-gpu"], compose["services"]["worker-cpu"]
    for key in ("entrypoint", "user", "cap_add", "security_opt", "cgroup", "volumes", "env_file"):
        assert gpu[key] == cpu[key], key


@pytest.mark.parametrize("name", check_image.SERVICES)
def test_each_service_runs_as_compose_defines_it(name, compose, env):
    service = compose["services"][name]
    assert check_image.unknown_keys(service) == set()
    args = runs(name, compose, env)
    image_at = args.index(service["image"])
    command = list(service.get("entrypoint") or [])[1:] + list(service.get("command") or [])
    assert args[image_at + 1 :] == [check_image.interpolate(str(c), env) for c in command]
    if service.get("entrypoint"):
        assert options(args, "--entrypoint") == [service["entrypoint"][0]]
    assert options(args, "--network-alias") == [name]  # how the others reach it: db, redis, web
    assert options(args, "--cap-add") == service.get("cap_add", [])
    assert options(args, "--security-opt") == service.get("security_opt", [])
    assert options(args, "--cgroupns") == ([service["cgroup"]] if "cgroup" in service else [])
    assert options(args, "--user") == ([service["user"]] if "user" in service else [])
    assert options(args, "--publish") == service.get("ports", [])
    assert options(args, "--env-file") == [str(ENV_FILE)] * len(service.get("env_file", []))
    environment = service.get("environment") or {}
    assert options(args, "--env") == [
        f"{key}={check_image.interpolate(str(value), env)}" for key, value in environment.items()
    ]
    volumes = options(args, "--volume")
    assert len(volumes) == len(service.get("volumes", []))
    for given, ran in zip(service.get("volumes", []), volumes, strict=True):
        source, target = given.split(":", 1)
        assert ran.endswith(":" + target)
        if source.startswith("./"):
            assert Path(ran.split(":")[0]) == (ROOT_DIR / source).resolve()
            assert Path(ran.split(":")[0]).exists()
        else:
            assert ran.startswith(f"{check_image.PROJECT}_{source}:")
            assert source in compose["volumes"]
    address = ((service.get("networks") or {}).get("default") or {}).get("ipv4_address")
    assert options(args, "--ip") == ([address] if address else [])
    if "healthcheck" in service:
        test = service["healthcheck"]["test"]
        expected = test[1] if test[0] == "CMD-SHELL" else shlex.join(test[1:])
        assert options(args, "--health-cmd") == [expected.replace("$$", "$")]


def test_compose_values_are_interpolated_as_compose_does(compose, env):
    web = runs("web", compose, env)
    assert "WEB_CONCURRENCY=5" in options(web, "--env")
    assert check_image.interpolate("${X:-7}", {"X": "3"}) == "3"
    assert check_image.interpolate("${X:-7} $$X", {}) == "7 $X"
    db = runs("db", compose, env)
    assert options(db, "--health-cmd") == ["pg_isready -U $POSTGRES_USER -d $POSTGRES_DB"]


def test_the_order_waits_as_depends_on_says(compose):
    order = check_image.start_order(compose)
    assert set(order) == set(check_image.SERVICES)
    for name in order:
        for dependency in compose["services"][name].get("depends_on") or {}:
            assert order.index(dependency) < order.index(name), (dependency, name)


def test_a_key_the_check_does_not_translate_stops_it(compose, env):
    changed = {**compose, "services": {**compose["services"]}}
    changed["services"]["web"] = {**compose["services"]["web"], "ulimits": {"nofile": 65536}}
    with pytest.raises(SystemExit, match="ulimits"):
        runs("web", changed, env)


def test_the_base_images_have_stand_ins(compose):
    """What the check builds where Docker Hub is out of reach: every base the Dockerfile and the
    services name, from a Dockerfile under scripts/standins/."""
    bases = set(check_image.dockerfile_bases(ROOT_DIR)) | check_image.images_used(compose)
    bases -= {"foley:latest"}
    assert bases == {"python:3.11-slim-bookworm", "postgres:16", "redis:7", "nginx:1.27"}
    for tag in bases:
        kind = tag.split(":")[0]
        dockerfile = ROOT_DIR / "scripts/standins" / check_image.STANDIN_FOR[kind] / "Dockerfile"
        text = dockerfile.read_text()
        assert text.startswith(f"# Stand-in for {tag} ")
        assert "FROM foley-standin/debian:bookworm" in text
        assert "LABEL org.foley.standin=1" in text


def test_the_env_it_writes_is_env_example_with_fresh_secrets(tmp_path):
    path, values = check_image.write_env(tmp_path)
    example = check_image.read_env_file(ROOT_DIR / ".env.example")
    assert set(values) == set(example)
    assert values["SECRET_KEY"] != example["SECRET_KEY"] and len(values["SECRET_KEY"]) >= 50
    assert values["POSTGRES_PASSWORD"] in values["DATABASE_URL"]
    assert values["FOLEY_PROXY_HOPS"] == example["FOLEY_PROXY_HOPS"]
    assert path.stat().st_mode & 0o077 == 0
