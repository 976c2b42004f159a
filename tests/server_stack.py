"""The production web stack run for real on loopback: gunicorn (DEBUG=0) as a child process on
a given database, for the adversary suite and the listening-load benchmark (nginx in front:
tests/nginx_site.py)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.nginx_site import free_port

ROOT = Path(__file__).resolve().parent.parent


def site_environment(database_url: str, scratch: Path) -> dict[str, str]:
    """The web process's settings: production (DEBUG=0) on plain HTTP on loopback."""
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "FOLEY_DATA_DIR": str(scratch),
        "MEDIA_ROOT": str(scratch / "media"),
        "SECRET_KEY": "benchmark-only-key-0123456789-abcdefghijklmnopqrstuvwxyz",
        "DEBUG": "0",
        "STATIC_MANIFEST": "0",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "foley_platform.settings",
        # Every simulated browser comes from loopback: per-client rate limits would throttle a
        # crowd as one client, and would hide what the listening checks themselves refuse
        # (nginx's are lifted for loopback by tests/nginx_site.py).
        "FOLEY_RATE_LIMITS_ENABLED": "0",
    }


def start_gunicorn(env: dict[str, str], options: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "foley_platform.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--timeout",
        "120",
        *shlex.split(options),
    ]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:  # until it answers (or exits)
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/accounts/login/", timeout=5) as response:
                if response.status == 200:
                    return process, url
        except OSError:  # refused, reset, timed out, or an HTTP error status
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("gunicorn did not answer in 120 s")
        time.sleep(0.2)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
