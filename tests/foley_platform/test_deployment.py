"""The production compose file: the services, queues, health checks and volumes it promises.

PyYAML comes with drf-spectacular. When a compose binary is installed, `config` validates the
file against the compose specification too.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from tests import ROOT_DIR

ROOT = ROOT_DIR


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_health_checks(compose):
    services = compose["services"]
    assert {"web", "worker-cpu", "worker-gpu", "db", "redis", "migrate"} <= set(services)
    for name in ("db", "redis", "web"):
        assert services[name]["healthcheck"]["test"], name
    for name in ("web", "worker-cpu", "worker-gpu"):
        depends = services[name]["depends_on"]
        assert depends["db"]["condition"] == "service_healthy"
        assert depends["redis"]["condition"] == "service_healthy"
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert services[name]["env_file"] == [".env"]


def test_only_the_proxy_on_the_host_reaches_the_web_process(compose):
    # The web process trusts X-Forwarded-Proto from its proxy: nothing else may reach it.
    for service in compose["services"].values():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), port


def test_one_scheduler_sends_the_periodic_tasks(compose):
    from django.conf import settings

    scheduler = compose["services"]["scheduler"]
    assert scheduler["command"][:4] == ["celery", "-A", "foley_platform", "beat"]
    assert "deploy" not in scheduler  # one beat process: two would send every task twice
    tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert tasks == {"stimuli.tasks.remind_deadlines"}


def test_queues_and_gpu_reservation(compose):
    services = compose["services"]
    assert "gunicorn" in services["web"]["command"]
    cpu, gpu = services["worker-cpu"]["command"], services["worker-gpu"]["command"]
    assert cpu[cpu.index("-Q") + 1] == "cpu"
    assert gpu[gpu.index("-Q") + 1] == "gpu"
    device = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]


def test_workers_can_build_sandboxes_and_run_unprivileged(compose):
    """Both workers start in the entrypoint that delegates a cgroup and drops to `foley` with no
    capabilities; bubblewrap gets the container settings it needs; the web process gets none."""
    entrypoint = (ROOT / "deploy" / "worker-entrypoint").read_text()
    assert "--bounding-set=-all" in entrypoint and "--no-new-privs" in entrypoint
    assert "--reuid=foley" in entrypoint and "FOLEY_SANDBOX_CGROUP" in entrypoint
    services = compose["services"]
    for name in ("worker-cpu", "worker-gpu"):
        worker = services[name]
        assert worker["entrypoint"] == ["/app/deploy/worker-entrypoint"]
        assert worker["cgroup"] == "private" and worker["cap_add"] == ["SYS_ADMIN"]
        assert {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"} <= set(
            worker["security_opt"]
        )
    assert "cap_add" not in services["web"] and "security_opt" not in services["web"]
    assert "bubblewrap" in (ROOT / "Dockerfile").read_text()


def test_database_asks_every_connection_for_a_password(compose):
    args = compose["services"]["db"]["environment"]["POSTGRES_INITDB_ARGS"]
    assert "--auth-host=scram-sha-256" in args and "--auth-local=scram-sha-256" in args
    url = next(
        line.split("=", 1)[1]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line.startswith("DATABASE_URL=")
    )
    assert "@db:5432/" in url and ":change-me@" in url  # over TCP, with a password


def test_volumes_persist_data(compose):
    services = compose["services"]
    assert set(compose["volumes"]) == {"pgdata", "redisdata", "media", "static"}
    assert "pgdata:/var/lib/postgresql/data" in services["db"]["volumes"]
    for name in ("web", "worker-cpu", "worker-gpu"):
        assert "media:/data/media" in services[name]["volumes"]


def test_nginx_in_front_serves_static_files_and_sounds_from_the_volumes(compose):
    services = compose["services"]
    proxy, web = services["proxy"], services["web"]
    assert "./deploy/nginx.conf:/etc/nginx/conf.d/default.conf:ro" in proxy["volumes"]
    # The main configuration too: the image's events block is too small for a crowd.
    assert "./deploy/nginx-main.conf:/etc/nginx/nginx.conf:ro" in proxy["volumes"]
    main = (ROOT / "deploy" / "nginx-main.conf").read_text()
    assert "multi_accept on;" in main and "include /etc/nginx/conf.d/*.conf;" in main
    assert {"media:/data/media:ro", "static:/data/static:ro"} <= set(proxy["volumes"])
    assert "ports" not in web and proxy["ports"] == ["127.0.0.1:8000:80"]
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    # Django redirects to the internal location nginx serves from the media volume.
    internal = web["environment"]["AUDIO_ACCEL_REDIRECT"]
    block = re.search(rf"location {re.escape(internal)} {{([^}}]*)}}", conf).group(1)
    assert "internal;" in block and "alias /data/media/;" in block
    assert web["environment"]["STATIC_ROOT"] == "/data/static" and "alias /data/static/;" in conf
    assert "collectstatic" in " ".join(services["migrate"]["command"])
    assert "server web:8000;" in conf
    # Sync workers, as many as WEB_CONCURRENCY says (docs/deployment.md, "Web workers"): no
    # threads, whose kept-alive upstream connections would need gunicorn's --keep-alive above
    # nginx's keepalive_timeout (or a POST sent on a closing connection gets a 502).
    command = web["command"]
    assert "--threads" not in command and "--workers" not in command
    assert web["environment"]["WEB_CONCURRENCY"] == "${WEB_CONCURRENCY:-5}"
    assert "keepalive_timeout 60s;" in conf


def test_env_example_names_what_the_settings_need():
    names = {
        line.split("=", 1)[0]
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    }
    assert {
        "SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "POSTGRES_PASSWORD", "FOLEY_SITE_URL"
    } <= names  # fmt: skip


def _compose_command() -> list[str] | None:
    """A compose of the compose specification (2.x). Debian 12's docker-compose is 1.29, which
    predates keys the file uses (`cgroup:`): scripts/check-image runs the services without it."""
    for command in (["docker", "compose"], ["docker-compose"]):
        if not shutil.which(command[0]):
            continue
        probe = subprocess.run(
            [*command, "version", "--short"], capture_output=True, text=True, check=False
        )
        if probe.returncode == 0 and not probe.stdout.strip().lstrip("v").startswith("1."):
            return command
    return None


@pytest.mark.skipif(_compose_command() is None, reason="no compose 2.x here (Debian 12 has 1.29)")
def test_compose_config_validates(tmp_path):
    for name in ("docker-compose.yml", "Dockerfile"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    done = subprocess.run(
        [*_compose_command(), "config", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_the_image_build_sets_no_key_production_would_refuse():
    """The Dockerfile's collectstatic runs with DEBUG off: a fixed short key would stop the build."""
    from foley_platform.safety import secret_key_problems

    keys = re.findall(r'SECRET_KEY=("\$\(.*?\)"|\S+)', (ROOT / "Dockerfile").read_text())
    assert keys
    for key in keys:
        assert key.startswith('"$(python -c') or secret_key_problems(key) == [], key


def test_the_web_process_trusts_only_nginx_and_one_hop(compose):
    """The client address, arrival stamp and delivery receipts are believed from nginx's fixed
    address only, and .env.example counts the one proxy that appends to X-Forwarded-For."""
    import ipaddress

    services = compose["services"]
    nginx = services["proxy"]["networks"]["default"]["ipv4_address"]
    subnet = compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
    assert ipaddress.ip_address(nginx) in ipaddress.ip_network(subnet)
    env = dict(
        line.split("=", 1)
        for line in (ROOT / ".env.example").read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert env["FOLEY_PROXY_ADDRESSES"] == nginx and env["FOLEY_PROXY_HOPS"] == "1"
    assert "FOLEY_PROXY_ADDRESSES" not in services["web"]["environment"]  # .env's holds
    # nginx keeps the receipt from the browser and sets the arrival stamp over the browser's.
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "proxy_hide_header X-Foley-Receipt;" in conf
    assert 'proxy_set_header X-Request-Start "t=${msec}";' in conf
    assert "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;" in conf


def test_nginx_takes_the_client_from_the_tls_proxy_on_the_host_only(compose):
    """Behind a TLS proxy on the host every connection reaches nginx from the compose network's
    gateway: nginx believes that one address's X-Forwarded-For, and only its last entry, so its
    limits count clients, not the gateway, and the web process still reads one hop."""
    import ipaddress

    subnet = ipaddress.ip_network(compose["networks"]["default"]["ipam"]["config"][0]["subnet"])
    gateway = next(subnet.hosts())
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert re.findall(r"^\s*set_real_ip_from\s+(\S+);", conf, flags=re.M) == [f"{gateway}"]
    assert "real_ip_header X-Forwarded-For;" in conf
    assert not re.search(r"^\s*real_ip_recursive\s+on", conf, flags=re.M)
    nginx = compose["services"]["proxy"]["networks"]["default"]["ipv4_address"]
    assert nginx != str(gateway)
