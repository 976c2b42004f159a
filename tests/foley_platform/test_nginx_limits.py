"""The shipped deploy/nginx.conf, run in a real nginx, limits what comes in: bodies per path
(413 before a byte reaches the web process or nginx's temporary folder) and request rates on
login, admin, join and crowd links (crowd enrolment per link too), player events and the
account forms that send e-mail."""

from __future__ import annotations

import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from foley_platform import limits
from tests.nginx_site import ROOT, nginx_binary, start_nginx, stop_nginx


class Upstream(BaseHTTPRequestHandler):
    """Stands in for gunicorn: answers 200 and counts what reached it, by path."""

    seen: Counter = Counter()

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        while length > 0:
            length -= len(self.rfile.read(min(length, 1 << 20)))
        Upstream.seen[self.path] += 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def proxy(tmp_path):
    if not nginx_binary():
        pytest.skip("nginx is not installed")
    Upstream.seen = Counter()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    folder = tmp_path / "nginx"
    process, url = start_nginx(
        f"127.0.0.1:{server.server_address[1]}",
        tmp_path / "media",
        tmp_path / "static",
        folder,
        rate_limited=True,
    )
    try:
        yield url, folder
    finally:
        stop_nginx(process)
        server.shutdown()


def client(address: str = "127.0.0.1") -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def test_bodies_are_small_but_on_the_upload_paths(proxy):
    url, folder = proxy
    body = b"\0" * (3 * 1024 * 1024)
    with client() as http:
        for path in ("/listen/demo/rate/", "/listen/demo/player/", "/accounts/login/", "/api/"):
            assert http.post(url + path, content=body).status_code == 413, path
        assert sum(Upstream.seen.values()) == 0
        # nginx refused on the declared length: nothing was written to its body folder.
        assert [p for p in (folder / "body").rglob("*") if p.is_file()] == []
        for path in (
            "/organize/demo/upload/",
            "/api/challenges/demo/uploads/",
            "/organize/demo/text-prompts/reference/",
            "/organize/demo/generators/systems/3/code/",
            "/api/challenges/demo/generators/",
            "/teams/demo/team/submit/",
            "/api/challenges/demo/submissions/",
        ):
            assert http.post(url + path, content=body).status_code == 200, path
            assert Upstream.seen[path] == 1


def burst(http: httpx.Client, url: str, n: int, method: str = "get") -> list[int]:
    return [getattr(http, method)(url).status_code for _ in range(n)]


@pytest.mark.parametrize(
    "path, method, allowed",
    [
        # 1 + burst at once; the zone's rate refills slowly enough not to matter here, but for
        # the fast ones (admin 5/s, player 20/s) a few more may pass while the burst is sent.
        ("/accounts/login/", "post", 11),
        ("/admin/login/", "post", 11),
        ("/admin/stimuli/", "get", 21),
        ("/listen/demo/join/some-key/", "get", 11),
        ("/listen/demo/crowd/some-key/", "get", 11),
        ("/listen/demo/player/", "post", 41),
        ("/accounts/password-reset/", "post", 11),
        ("/teams/demo/join/some-token/", "post", 11),
        ("/teams/demo/register/", "post", 11),
        ("/teams/demo/confirm/some-token/", "get", 11),
    ],
)
def test_request_rates_are_limited_per_client(proxy, path, method, allowed):
    url, _ = proxy
    with client() as http:
        got = burst(http, url + path, allowed + 60, method)
    assert got[:allowed] == [200] * allowed, got
    assert 429 in got
    assert Upstream.seen[path] < len(got)
    # Another client is not held back by the first.
    with client("127.0.0.2") as other:
        assert getattr(other, method)(url + path).status_code == 200


def test_a_crowd_link_enrols_at_a_limited_rate_across_clients(proxy):
    url, _ = proxy
    got = []
    for n in range(8):  # eight clients, each within its own limit of 11
        with client(f"127.0.1.{n + 1}") as http:
            got += burst(http, url + "/listen/demo/crowd/leaked/", 10)
    assert got[:61] == [200] * 61 and 429 in got[61:]
    with client("127.0.2.1") as http:  # another link is not held back
        assert http.get(url + "/listen/demo/crowd/another/").status_code == 200


def test_pages_and_sounds_are_not_rate_limited(proxy):
    url, _ = proxy
    with client() as http:
        assert burst(http, url + "/listen/demo/rate/", 80, "post") == [200] * 80


# --- The shipped configuration against Django's limits (no nginx needed) ---------------------

UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _size(value: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", value.lower()).groups()
    return int(number) * UNITS[unit]


def _body_limits() -> tuple[int, list[tuple[re.Pattern, int | None]]]:
    """deploy/nginx.conf's server-wide body limit and, per regular-expression location in its
    order, the limit it sets (None: the server's)."""
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    server = _size(re.search(r"^    client_max_body_size (\S+);", text, re.M).group(1))
    found = []
    for pattern, block in re.findall(r"^    location ~ (\S+) \{\n(.*?)^    \}", text, re.M | re.S):
        size = re.search(r"client_max_body_size (\S+);", block)
        found.append((re.compile(pattern), _size(size.group(1)) if size else None))
    return server, found


def _nginx_limit(path: str) -> int:
    server, locations = _body_limits()
    for pattern, size in locations:  # nginx takes the first regular expression that matches
        if pattern.search(path):
            return server if size is None else size
    return server


UPLOAD_URLS = {
    "stimuli:upload": "/organize/demo/upload/",
    "upload-list": "/api/challenges/demo/uploads/",
    "text_prompts:reference": "/organize/demo/text-prompts/reference/",
    "generators:code": "/organize/demo/generators/systems/3/code/",
    "generator-list": "/api/challenges/demo/generators/",
    "teams:submit": "/teams/demo/team/submit/",
    "team-submission-list": "/api/challenges/demo/submissions/",
}


def test_every_upload_path_has_djangos_limit_in_nginx(settings):
    """Each view that takes an upload gets, in nginx, exactly the body limit Django holds it to:
    a lower one would refuse in nginx what the platform accepts (a team's archive of real size),
    a higher one would buffer to disk what Django then refuses."""
    from django.urls import resolve

    assert set(UPLOAD_URLS) == set(limits.UPLOAD_VIEWS)
    for name, path in UPLOAD_URLS.items():
        assert resolve(path).view_name == name, path
        assert _nginx_limit(path) == limits.body_limit(name), (name, path)
    assert limits.body_limit("teams:submit") == settings.FOLEY_GENERATOR_MAX_BYTES + 1024**2
    # Everywhere else the small limit, the same in both.
    server, _ = _body_limits()
    assert server == settings.FOLEY_BODY_MAX_BYTES == limits.body_limit(None)
    for path in ("/teams/demo/team/", "/api/challenges/demo/submissions/1/", "/accounts/login/"):
        assert _nginx_limit(path) == server, path


def test_bodies_go_to_a_file_not_to_memory():
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    assert _size(re.search(r"client_body_buffer_size (\S+);", text).group(1)) <= 64 * 1024
    assert "proxy_request_buffering on;" in text and "client_body_in_single_buffer" not in text
