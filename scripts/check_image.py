"""Prove the production image: build the Dockerfile, run docker-compose.yml's services, fetch the
login page through nginx, log in, run one job through the worker, tear everything down.

Run by `scripts/check-image` (see there and docs/deployment.md, "The production image,
proven"). The services are started from docker-compose.yml's own definitions: each service's
image, command, entrypoint, user, environment, volumes, ports, network address, capabilities,
security options and health check become a `docker run`, in the order of its `depends_on`,
waiting on each condition as compose does. That keeps the check working where no compose that
reads this file is installed (Debian 12's docker-compose 1.29 refuses `cgroup:`), and a key this
translation does not know stops the check instead of being dropped
(tests/foley_platform/test_check_image.py holds the two to each other).
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import io
import json
import os
import random
import re
import secrets
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import wave
import zipfile
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
STANDINS = ROOT / "scripts" / "standins"
PROJECT = "foleycheck"
# The services the check runs: all of compose's but the GPU worker, which needs an NVIDIA GPU
# (its definition is the CPU worker's but for the image, the queue and the device).
SERVICES = ("db", "redis", "migrate", "web", "proxy", "worker-cpu", "scheduler")
# What compose keys become in `docker run`; anything else in a service the check runs stops it.
TRANSLATED = {
    "image", "command", "entrypoint", "user", "env_file", "environment", "volumes", "ports",
    "networks", "cap_add", "security_opt", "cgroup", "healthcheck",
}  # fmt: skip
# Keys the check honours otherwise: the image is built once, first; `depends_on` is the order of
# starting and what is waited on; a restart policy would hide a crash the check must see.
HANDLED = {"build", "depends_on", "restart"}
STANDIN_FOR = {"python": "python", "postgres": "postgres", "redis": "redis", "nginx": "nginx"}
DEBIAN_STANDIN = "foley-standin/debian:bookworm"
LOCAL_CA = "/usr/local/share/ca-certificates"
TORCH = "torch==2.13.0"
ORGANIZER = "check-organizer"
CHALLENGE = "image-check"
CLIENT = "203.0.113.7"  # what the TLS proxy in front would append to X-Forwarded-For


# --- compose's definitions as `docker run` ------------------------------------------------------


def load_compose(root: Path = ROOT) -> dict:
    return yaml.safe_load((root / "docker-compose.yml").read_text())


def read_env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            values[name.strip()] = value
    return values


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's `${NAME}`, `${NAME:-default}` and `$$` (a literal dollar)."""

    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name, default = match.group(1), match.group(3)
        if env.get(name):
            return env[name]
        return default if default is not None else ""

    return re.sub(r"\$\$|\$\{(\w+)(:-([^}]*))?\}", one, value)


def unknown_keys(service: dict) -> set[str]:
    return set(service) - TRANSLATED - HANDLED


def container_name(name: str, project: str = PROJECT) -> str:
    return f"{project}-{name}"


def run_args(
    name: str,
    compose: dict,
    *,
    env: dict[str, str],
    env_file: Path,
    root: Path = ROOT,
    project: str = PROJECT,
) -> list[str]:
    """`docker run` arguments (after `run`) that start compose's service `name` as compose would."""
    service = compose["services"][name]
    unknown = unknown_keys(service)
    if unknown:
        raise SystemExit(f"{name}: compose keys the check does not translate: {sorted(unknown)}")
    args = ["--detach", "--name", container_name(name, project), "--hostname", name]
    args += ["--label", f"org.foley.check={project}"]
    args += ["--network", f"{project}_default", "--network-alias", name]
    for network, settings in (service.get("networks") or {}).items():
        if network != "default":
            raise SystemExit(f"{name}: only the default network is translated, not {network}")
        if settings and settings.get("ipv4_address"):
            args += ["--ip", settings["ipv4_address"]]
    for _ in service.get("env_file", []):
        args += ["--env-file", str(env_file)]
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    for key, value in environment.items():
        args += ["--env", f"{key}={interpolate(str(value), env)}"]
    for volume in service.get("volumes", []):
        source, rest = volume.split(":", 1)
        source = str((root / source).resolve()) if source.startswith(".") else f"{project}_{source}"
        args += ["--volume", f"{source}:{rest}"]
    for port in service.get("ports", []):
        args += ["--publish", str(port)]
    if "user" in service:
        args += ["--user", str(service["user"])]
    for cap in service.get("cap_add", []):
        args += ["--cap-add", cap]
    for option in service.get("security_opt", []):
        args += ["--security-opt", option]
    if "cgroup" in service:
        args += ["--cgroupns", service["cgroup"]]
    health = service.get("healthcheck")
    if health:
        test = health["test"]
        kind, rest = test[0], test[1:]
        command = rest[0] if kind == "CMD-SHELL" else shlex.join(rest)
        args += ["--health-cmd", interpolate(command, env)]
        for key in ("interval", "timeout", "retries", "start_period"):
            if key in health:
                args += [f"--health-{key.replace('_', '-')}", str(health[key])]
    command = list(service.get("command") or [])
    entrypoint = service.get("entrypoint")
    if entrypoint:
        entrypoint = [entrypoint] if isinstance(entrypoint, str) else list(entrypoint)
        args += ["--entrypoint", entrypoint[0]]
        command = entrypoint[1:] + command
    args.append(service["image"])
    return args + [interpolate(str(part), env) for part in command]


def start_order(compose: dict, selected: tuple[str, ...] = SERVICES) -> list[str]:
    """The selected services, each after everything it depends on."""
    services = compose["services"]
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in path:
            raise SystemExit(f"depends_on loops: {' -> '.join((*path, name))}")
        for dependency in services[name].get("depends_on") or {}:
            if dependency not in selected:
                raise SystemExit(f"{name} depends on {dependency}, which the check does not run")
            visit(dependency, (*path, name))
        order.append(name)

    for name in selected:
        visit(name, ())
    return order


def images_used(compose: dict, selected: tuple[str, ...] = SERVICES) -> set[str]:
    return {compose["services"][name]["image"] for name in selected}


def dockerfile_bases(root: Path = ROOT) -> list[str]:
    return re.findall(r"^FROM\s+(\S+)", (root / "Dockerfile").read_text(), flags=re.M)


# --- the run -------------------------------------------------------------------------------------

STARTED = time.monotonic()
TIMINGS: list[tuple[str, float]] = []


@contextlib.contextmanager
def step(title: str) -> Iterator[None]:
    print(f"\n==> {title}", flush=True)
    began = time.monotonic()
    yield
    took = time.monotonic() - began
    TIMINGS.append((title, took))
    print(f"    {title}: {took:.1f} s (at {time.monotonic() - STARTED:.0f} s)", flush=True)


def sh(*args: str, check: bool = True, capture: bool = False, **kwargs) -> str:
    done = subprocess.run(args, check=False, text=True, capture_output=capture, **kwargs)
    if check and done.returncode != 0:
        detail = (done.stderr or "").strip()[-2000:] if capture else ""
        raise SystemExit(f"failed ({done.returncode}): {shlex.join(args)}\n{detail}")
    return (done.stdout or "") if capture else ""


def docker(*args: str, check: bool = True, capture: bool = False, **kwargs) -> str:
    return sh("docker", *args, check=check, capture=capture, **kwargs)


def docker_ok(*args: str) -> bool:
    return subprocess.run(["docker", *args], capture_output=True, check=False).returncode == 0


def ensure_daemon(log: Path) -> None:
    if docker_ok("info"):
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise SystemExit("no Docker daemon and no dockerd to start (Debian: apt install docker.io)")
    arguments = os.environ.get(
        "FOLEY_DOCKERD_ARGS", "--storage-driver=vfs --iptables=false --bridge=none"
    ).split()
    print(f"    starting {dockerd} {' '.join(arguments)} (log: {log})")
    with open(log, "ab") as out:
        subprocess.Popen([dockerd, *arguments], stdout=out, stderr=out, start_new_session=True)
    for _ in range(60):
        if docker_ok("info"):
            return
        time.sleep(1)
    raise SystemExit(f"dockerd did not come up; see {log}")


def forwarding_dropped() -> bool:
    """Bridged packets pass the host's iptables FORWARD chain (br_netfilter); a Docker daemon
    run with iptables once leaves its policy DROP, and one run without adds no rule to let the
    check's network through: its containers would not reach one another."""
    bridged = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
    if not bridged.exists() or bridged.read_text().strip() != "1" or not shutil.which("iptables"):
        return False
    rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True)
    return (
        rules.returncode == 0
        and "-P FORWARD DROP" in rules.stdout
        and "-j DOCKER" not in rules.stdout
    )


def have_image(tag: str) -> bool:
    return docker_ok("image", "inspect", tag)


def ensure_base_images(tags: set[str], cache: Path, *, pull_timeout: int) -> dict[str, str]:
    """Each base image present, pulled, or else built as a stand-in; says which for each."""
    how: dict[str, str] = {}
    registry = True
    for tag in sorted(tags):
        if have_image(tag):
            standin = docker(
                "image", "inspect", "--format",
                '{{ index .Config.Labels "org.foley.standin" }}', tag, capture=True,
            ).strip()  # fmt: skip
            how[tag] = "stand-in, built before" if standin == "1" else "present"
            continue
        if registry:
            pulled = subprocess.run(
                ["timeout", str(pull_timeout), "docker", "pull", "-q", tag],
                capture_output=True,
                check=False,
            )
            if pulled.returncode == 0:
                how[tag] = "pulled"
                continue
            registry = False  # unreachable: no further tries
            print(f"    cannot pull {tag}: building stand-ins from Debian's packages")
        kind = tag.split("/")[-1].split(":")[0]
        if kind not in STANDIN_FOR:
            raise SystemExit(f"no stand-in for {tag}; pull it or load it (docker load)")
        ensure_debian(cache)
        with tempfile.TemporaryDirectory() as context:
            shutil.copytree(STANDINS / STANDIN_FOR[kind], context, dirs_exist_ok=True)
            # The authorities this host added (a proxy that re-signs TLS, as pip here trusts):
            # the python stand-in trusts them too, or the build's pip cannot reach PyPI.
            local = Path(context) / "local-ca"
            local.mkdir()
            for cert in Path(LOCAL_CA).glob("*.crt"):
                shutil.copy(cert, local / cert.name)
            docker("build", "--network", "host", "-t", tag, context, capture=True)
        how[tag] = "stand-in, built now"
    return how


def ensure_debian(cache: Path) -> None:
    if have_image(DEBIAN_STANDIN):
        return
    if shutil.which("debootstrap") is None:
        raise SystemExit("debootstrap is needed for the stand-in base (apt install debootstrap)")
    mirror = os.environ.get("FOLEY_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    rootfs = cache / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    sh("debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror, capture=True)
    security = mirror.replace("/debian", "/debian-security")
    (rootfs / "etc/apt/sources.list").write_text(
        f"deb {mirror} bookworm main\ndeb {mirror} bookworm-updates main\n"
        f"deb {security} bookworm-security main\n"
    )
    shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True)
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        ["docker", "import", "--change", 'CMD ["bash"]', "-", DEBIAN_STANDIN],
        stdin=tar.stdout,
        check=True,
    )
    tar.wait()
    shutil.rmtree(rootfs)


def torch_index(cache: Path) -> Path:
    """A package index of the CPU build of torch and its dependencies, for the Dockerfile's
    TORCH_INDEX_URL, from what pip on this machine finds (its own find-links and indexes)."""
    index = cache / "torch-index"
    wheels = cache / "torch-wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    if not list(wheels.glob("torch-*.whl")):
        sh(sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d",
           str(wheels), TORCH)  # fmt: skip
    torch_wheels = list(wheels.glob("torch-*.whl"))
    if not torch_wheels or not all("+cpu" in wheel.name for wheel in torch_wheels):
        raise SystemExit(f"not the CPU build of torch: {[w.name for w in torch_wheels]}")
    shutil.rmtree(index, ignore_errors=True)
    for wheel in wheels.glob("*.whl"):
        project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
        (index / project).mkdir(parents=True, exist_ok=True)
        (index / project / wheel.name).symlink_to(wheel)
    return index


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(  # noqa: E731
        *a, directory=str(directory), **k
    )
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    # A fixed port: the URL is a build argument, part of the build cache's key for every step
    # after it; a new port per run would rebuild torch's layer each time.
    port = int(os.environ.get("FOLEY_CHECK_INDEX_PORT", "48765"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def write_env(directory: Path) -> tuple[Path, dict[str, str]]:
    """.env.example with fresh secrets, for this host's name: what an operator's .env holds."""
    password = secrets.token_hex(16)
    values = {
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "localhost",
        "CSRF_TRUSTED_ORIGINS": "https://localhost",
        "FOLEY_SITE_URL": "https://localhost",
        "POSTGRES_PASSWORD": password,
        "DATABASE_URL": f"postgres://foley:{password}@db:5432/foley",
    }
    lines = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        name = line.split("=", 1)[0]
        lines.append(f"{name}={values[name]}" if name in values and "=" in line else line)
    path = directory / ".env"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path, read_env_file(path)


def state(name: str) -> dict:
    return json.loads(docker("inspect", "--format", "{{json .State}}", name, capture=True))


def wait_for(name: str, condition: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = state(name)
        if condition == "service_completed_successfully" and current["Status"] == "exited":
            if current["ExitCode"] != 0:
                docker("logs", "--tail", "50", name, check=False)
                raise SystemExit(f"{name} exited with {current['ExitCode']}")
            return
        if condition == "service_healthy" and current.get("Health", {}).get("Status") == "healthy":
            return
        if condition == "service_started" and current["Status"] == "running":
            return
        if current["Status"] == "exited" and condition != "service_completed_successfully":
            docker("logs", "--tail", "50", name, check=False)
            raise SystemExit(f"{name} exited with {current['ExitCode']}")
        time.sleep(1)
    docker("logs", "--tail", "50", name, check=False)
    raise SystemExit(f"{name}: not {condition} after {timeout:.0f} s")


def up(compose: dict, env_file: Path, env: dict[str, str]) -> None:
    docker("network", "create", "--label", f"org.foley.check={PROJECT}", "--subnet",
           compose["networks"]["default"]["ipam"]["config"][0]["subnet"], f"{PROJECT}_default",
           capture=True)  # fmt: skip
    for volume in compose["volumes"]:
        docker("volume", "create", "--label", f"org.foley.check={PROJECT}",
               f"{PROJECT}_{volume}", capture=True)  # fmt: skip
    for name in start_order(compose):
        with step(f"start {name}"):
            for dependency, rule in (compose["services"][name].get("depends_on") or {}).items():
                wait_for(container_name(dependency), rule["condition"])
            docker("run", *run_args(name, compose, env=env, env_file=env_file), capture=True)
    wait_for(container_name("web"), "service_healthy")


def down() -> None:
    label = f"label=org.foley.check={PROJECT}"
    containers = docker("ps", "-aq", "--filter", label, capture=True).split()
    if containers:
        docker("rm", "-f", "-v", *containers, capture=True)
    networks = docker("network", "ls", "-q", "--filter", label, capture=True).split()
    if networks:
        docker("network", "rm", *networks, capture=True)
    volumes = docker("volume", "ls", "-q", "--filter", label, capture=True).split()
    if volumes:
        docker("volume", "rm", *volumes, capture=True)


def manage(code: str) -> str:
    return docker("exec", container_name("web"), "python", "manage.py", "shell", "-v0", "-c", code,
                  capture=True)  # fmt: skip


class Browser:
    """Requests as the TLS proxy in front of nginx passes them on: HTTPS said in
    X-Forwarded-Proto, the client's address appended to X-Forwarded-For. Cookies by hand, since
    the session's are Secure and this hop is plain HTTP."""

    def __init__(self, base: str, host: str = "localhost"):
        self.base, self.host, self.cookies = base, host, {}
        self.opener = urllib.request.build_opener(NoRedirect)

    def request(
        self, method: str, path: str, body: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, dict, bytes]:
        headers = {
            "Host": self.host,
            "X-Forwarded-Proto": "https",
            "X-Forwarded-For": CLIENT,
            "Origin": f"https://{self.host}",
            "Referer": f"https://{self.host}{path}",
            **(headers or {}),
        }
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        request = urllib.request.Request(
            self.base + path, data=body, method=method, headers=headers
        )
        try:
            response = self.opener.open(request, timeout=120)
        except urllib.error.HTTPError as error:
            response = error
        for header in response.headers.get_all("Set-Cookie") or []:
            name, value = header.split(";", 1)[0].split("=", 1)
            self.cookies[name.strip()] = value
        return response.status, dict(response.headers), response.read()

    def form(self, path: str, fields: dict) -> tuple[int, dict, bytes]:
        body = urllib.parse.urlencode(fields).encode()
        return self.request(
            "POST", path, body, {"Content-Type": "application/x-www-form-urlencoded"}
        )


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def title(html: bytes) -> str:
    found = re.search(rb"<title>(.*?)</title>", html, flags=re.S)
    return " ".join(found.group(1).decode().split()) if found else "(no title)"


def noise_wav(seed: int, seconds: float = 4.0, rate: int = 22_050) -> bytes:
    """A clip of the challenge's default spec (4 s, 22,050 Hz, mono, 16-bit), distinct per seed."""
    generator = random.Random(seed)
    frames = round(seconds * rate)
    samples = [int(3000 * generator.gauss(0, 1)) for _ in range(frames)]
    samples = [max(-32768, min(32767, s)) for s in samples]
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(struct.pack(f"<{frames}h", *samples))
    return buffer.getvalue()


def multipart(fields: dict[str, str], name: str, filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = secrets.token_hex(16)
    parts = []
    for key, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
        "Content-Type: application/zip\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def exercise(base: str) -> dict:
    """The login page through nginx, a login, a static file, and one import job through the
    CPU worker; what each answered."""
    found: dict = {}
    password = secrets.token_urlsafe(24)
    with step("create an organizer and a challenge (manage.py shell in the web container)"):
        token = (
            manage(
                "from django.contrib.auth import get_user_model; "
                "from rest_framework.authtoken.models import Token; "
                "from stimuli.services import create_challenge; "
                f"u = get_user_model().objects.create_user({ORGANIZER!r}, password={password!r}, "
                "is_staff=True); "
                f"create_challenge(name='Image check', slug={CHALLENGE!r}, owner=u); "
                "print(Token.objects.create(user=u).key)"
            )
            .strip()
            .splitlines()[-1]
        )
    browser = Browser(base)
    with step("fetch the login page through nginx"):
        status, headers, html = browser.request("GET", "/accounts/login/")
        found["login_page"] = f"{status} {title(html)!r}, {len(html):,} bytes"
        print(f"    GET /accounts/login/: {found['login_page']}")
        assert status == 200, status
        stylesheet = re.search(rb'href="(/static/[^"]+\.css)"', html)
    if stylesheet:
        with step("fetch a static file (nginx, from the static volume)"):
            status, headers, body = browser.request("GET", stylesheet.group(1).decode())
            found["static"] = f"{status}, {len(body):,} bytes, {headers.get('Cache-Control')}"
            print(f"    GET {stylesheet.group(1).decode()}: {found['static']}")
            assert status == 200, status
    with step("log in and fetch the organizer's page"):
        csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1).decode()
        status, headers, _ = browser.form(
            "/accounts/login/",
            {"username": ORGANIZER, "password": password, "csrfmiddlewaretoken": csrf},
        )
        assert status == 302, f"login answered {status}"
        status, _, html = browser.request("GET", "/organize/")
        found["organizer_page"] = f"{status} {title(html)!r}"
        print(f"    POST /accounts/login/: 302 to {headers.get('Location')}; "
              f"GET /organize/: {found['organizer_page']}")  # fmt: skip
        assert status == 200 and CHALLENGE.encode() in html, status
    with step("the client's address as the web process saw it (a failed login, django-axes)"):
        stranger = Browser(base)
        _, _, html = stranger.request("GET", "/accounts/login/")
        csrf = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1).decode()
        stranger.form("/accounts/login/", {"username": ORGANIZER, "password": "wrong",
                                           "csrfmiddlewaretoken": csrf})  # fmt: skip
        seen = manage(
            "from axes.models import AccessAttempt; "
            "print(','.join(a.ip_address for a in AccessAttempt.objects.all()))"
        ).strip()
        found["client_address"] = seen
        print(f"    X-Forwarded-For {CLIENT} from the TLS proxy's side: recorded as {seen}")
        assert seen == CLIENT, seen
    with step("an import job through the CPU worker (API upload, polled until done)"):
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
            for i, category in enumerate(("rain", "gunshot")):
                for n in range(2):
                    out.writestr(f"{category}/{n}.wav", noise_wav(100 * i + n))
        body, content_type = multipart(
            {"role": "development"}, "file", "development.zip", archive.getvalue()
        )
        api = Browser(base)
        auth = {"Authorization": f"Token {token}", "Content-Type": content_type}
        began = time.monotonic()
        status, _, answer = api.request("POST", f"/api/challenges/{CHALLENGE}/uploads/", body, auth)
        assert status == 202, (status, answer[:500])
        job = json.loads(answer)
        print(f"    POST .../uploads/ ({len(body):,} bytes): 202, job {job['id']} {job['state']}")
        while job["state"] not in ("succeeded", "failed"):
            if time.monotonic() - began > 300:
                raise SystemExit(f"job {job['id']} still {job['state']} after 300 s")
            time.sleep(0.5)
            status, _, answer = api.request(
                "GET", f"/api/challenges/{CHALLENGE}/jobs/{job['id']}/", headers=auth
            )
            job = json.loads(answer)
        took = time.monotonic() - began
        result = job.get("result") or {}
        found["job"] = (
            f"{job['kind']} job {job['state']} in {took:.1f} s from the POST "
            f"(the worker's part: {job.get('started_at')} to {job.get('finished_at')}), "
            f"{result.get('created_clips')} clips created"
        )
        print(f"    {found['job']}")
        assert job["state"] == "succeeded" and result.get("created_clips") == 4, job
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-cache", action="store_true", help="build without the build cache")
    parser.add_argument("--keep", action="store_true", help="leave the services running")
    parser.add_argument("--pull-timeout", type=int, default=30)
    options = parser.parse_args()
    cache = Path(os.environ.get("FOLEY_CHECK_CACHE", Path.home() / ".cache/foley-check-image"))
    cache.mkdir(parents=True, exist_ok=True)
    compose = load_compose()
    for name in SERVICES:  # before anything slow: a key the check cannot translate
        unknown = unknown_keys(compose["services"][name])
        if unknown:
            raise SystemExit(
                f"{name}: compose keys the check does not translate: {sorted(unknown)}"
            )
    load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the start: {load_at_start}; "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    with step("Docker daemon"):
        ensure_daemon(cache / "dockerd.log")
        print("    " + docker("version", "--format", "server {{.Server.Version}}", capture=True))
    with step("base images"):
        bases = set(dockerfile_bases()) | images_used(compose) - {"foley:latest"}
        how = ensure_base_images(bases, cache, pull_timeout=options.pull_timeout)
        for tag, said in sorted(how.items()):
            print(f"    {tag}: {said}")
    with step("torch's CPU build as a package index"):
        index = torch_index(cache)
    build_kind = "without the cache" if options.no_cache else "with the build cache"
    with serve(index) as url, step(f"build foley:latest ({build_kind})"):
        # The build's RUN steps reach the index on this host's loopback: host network.
        build = ["docker", "build", "--network", "host", "--build-arg",
                 f"TORCH_INDEX_URL={url}", "-t", "foley:latest", str(ROOT)]  # fmt: skip
        if options.no_cache:
            build.insert(2, "--no-cache")
        steps = cached = 0
        with subprocess.Popen(
            build, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as run:
            for line in run.stdout:
                print(line, end="", flush=True)
                steps += line.startswith("Step ")
                cached += line.strip() == "---> Using cache"
        if run.returncode != 0:
            raise SystemExit(f"the build failed ({run.returncode})")
        build_kind = f"{build_kind}: {cached} of {steps} steps from the cache"
    size = int(docker("image", "inspect", "--format", "{{.Size}}", "foley:latest", capture=True))
    print(f"    foley:latest: {size / 2**30:.2f} GiB")
    down()  # what an interrupted run left
    if forwarding_dropped():
        raise SystemExit(
            "iptables' FORWARD policy is DROP with no Docker rules: the services could not reach "
            "one another. Restart dockerd with its iptables rules, or allow forwarding between "
            "containers of one bridge (iptables -I FORWARD -i br+ -o br+ -j ACCEPT)."
        )
    try:
        with tempfile.TemporaryDirectory() as directory:
            env_file, env = write_env(Path(directory))
            up(compose, env_file, env)
            port = compose["services"]["proxy"]["ports"][0].rsplit(":", 1)[0].split(":")[-1]
            found = exercise(f"http://127.0.0.1:{port}")
    finally:
        if not options.keep:
            with step("tear down (containers, network, volumes)"):
                down()
    print("\nSummary")
    print(
        f"  build: {build_kind}; base images: {', '.join(f'{k} {v}' for k, v in sorted(how.items()))}"
    )
    for title_, took in TIMINGS:
        print(f"  {took:7.1f} s  {title_}")
    for key, value in found.items():
        print(f"  {key}: {value}")
    total = time.monotonic() - STARTED
    print(f"  total {total:.0f} s; load average at the start {load_at_start}, at the end: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    main()
