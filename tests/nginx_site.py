"""deploy/nginx.conf run for real on loopback, in front of a given web process: for the proxy
tests and the listening-load benchmark."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def nginx_binary() -> str:
    """The nginx executable, or "" when it is not installed."""
    found = shutil.which("nginx") or "/usr/sbin/nginx"
    return found if Path(found).exists() else ""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_nginx(
    upstream: str,
    media: Path,
    static: Path,
    folder: Path,
    *,
    workers: int | str = 1,
    rate_limited: bool = False,
) -> tuple[subprocess.Popen, str]:
    """deploy/nginx.conf with `upstream` (host:port) for web, `media` and `static` for the
    volumes, listening on a free loopback port; returns the process and its base URL once it
    accepts connections. Stop it by its PID (`stop_nginx`).

    Every simulated browser comes from loopback, so loopback is exempt from the request-rate
    limits unless `rate_limited` (the tests of those limits)."""
    port = free_port()
    server = (
        (ROOT / "deploy" / "nginx.conf")
        .read_text()
        .replace("server web:8000;", f"server {upstream};")
        .replace("listen 80;", f"listen 127.0.0.1:{port};")
        .replace("/data/media/", f"{media}/")
        .replace("/data/static/", f"{static}/")
    )
    if not rate_limited:
        server = server.replace(
            "geo $limit_exempt { default 0; }", "geo $limit_exempt { default 0; 127.0.0.1 1; }"
        )
    folder.mkdir(parents=True, exist_ok=True)
    temp = "".join(
        f"    {kind}_temp_path {folder}/{name};\n"
        for kind, name in (
            ("client_body", "body"),
            ("proxy", "proxy"),
            ("fastcgi", "fastcgi"),
            ("uwsgi", "uwsgi"),
            ("scgi", "scgi"),
        )
    )
    # deploy/nginx-main.conf as shipped, with this folder's paths, and the site in it. As root,
    # the workers read private temporary folders as root.
    main = (
        (ROOT / "deploy" / "nginx-main.conf")
        .read_text()
        .replace("user nginx;", "user root;" if os.geteuid() == 0 else "")
        .replace("worker_processes auto;", f"worker_processes {workers};")
        .replace("/var/log/nginx/", f"{folder}/")
        .replace("pid /var/run/nginx.pid;", f"pid {folder}/nginx.pid;")
        .replace("include /etc/nginx/conf.d/*.conf;", temp + server)
    )
    (folder / "nginx.conf").write_text("daemon off;\n" + main)
    process = subprocess.Popen(
        [nginx_binary(), "-p", str(folder), "-c", str(folder / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while True:  # until its port accepts connections, or it exits
        if process.poll() is not None:
            raise RuntimeError(f"nginx did not start: {process.stderr.read().decode()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("nginx did not open its port in 30 s") from None
            time.sleep(0.05)


def stop_nginx(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
