"""A production start refuses unsafe settings; logins lock out after repeated failures; every
page carries a Content-Security-Policy; the API docs are for organizers; bodies over their path's
limit are refused before they are spooled; the proxy's rate limits hold in Django too."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.test import Client
from django.urls import reverse

from foley_platform import limits, safety
from tests import ROOT_DIR
from tests.stimuli.test_organizer_scope import routes, url_for

ROOT = ROOT_DIR
SAFE_KEY = "a-long-random-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"


def start_web(tmp_path, **env) -> subprocess.CompletedProcess:
    """Import the web process's WSGI application as gunicorn does, with DEBUG off."""
    environment = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": SAFE_KEY,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'start.sqlite3'}",
        "FOLEY_DATA_DIR": str(tmp_path),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-c", "import foley_platform.wsgi; print('started')"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    "env, named",
    [
        ({"SECRET_KEY": "change-me-to-a-long-random-string"}, "SECRET_KEY is the example value"),
        ({"ALLOWED_HOSTS": ""}, "ALLOWED_HOSTS is empty"),
        ({"SECRET_KEY": ""}, "SECRET_KEY must be set"),
    ],
)
def test_a_production_start_refuses_each_unsafe_setting(tmp_path, env, named):
    refused = start_web(tmp_path, **env)
    assert refused.returncode != 0 and "started" not in refused.stdout
    assert named in refused.stderr
    # The same start with safe settings comes up.
    assert start_web(tmp_path).stdout.strip() == "started"


def test_a_production_start_refuses_the_demo_password(db, settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    from stimuli.demo import ensure_organizer

    settings.DEBUG = False
    safety.refuse_unsafe_start()  # no account yet
    user = ensure_organizer()
    with pytest.raises(ImproperlyConfigured, match="'organizer' has the demo's published"):
        safety.refuse_unsafe_start()
    with pytest.raises(SystemCheckError, match=r"foley\.E001"):  # runserver's checks
        call_command("check")
    user.set_password("a-new-and-private-passphrase")
    user.save()
    safety.refuse_unsafe_start()
    settings.DEBUG = True
    user.set_password("foley-demo")
    user.save()
    safety.refuse_unsafe_start()  # the demo itself runs with DEBUG on


@pytest.mark.parametrize("url", ["/admin/login/", "/accounts/login/"])
def test_logins_lock_out_after_repeated_failures(db, settings, django_user_model, url):
    django_user_model.objects.create_user(
        "boss", password="the-right-passphrase", is_staff=True, is_superuser=True
    )
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        wrong = client.post(url, {"username": "boss", "password": "guess"})
        assert wrong.status_code == 200  # the form again, with its error
    locked = client.post(url, {"username": "boss", "password": "guess"})
    assert locked.status_code == 429
    # Locked out: even the right password does not log in now.
    right = client.post(url, {"username": "boss", "password": "the-right-passphrase"})
    assert right.status_code == 429 and "_auth_user_id" not in client.session
    # Another address is not locked out by these failures.
    other = Client(REMOTE_ADDR="10.1.2.3")
    assert (
        other.post(url, {"username": "boss", "password": "the-right-passphrase"}).status_code == 302
    )


def test_every_page_has_a_content_security_policy(organizer_client, challenge):
    client = Client()
    checked = 0
    for name, kwargs in routes().items():
        url = url_for(name, kwargs, challenge.slug)
        for who in (client, organizer_client):
            response = who.get(url)
            policy = response.get("Content-Security-Policy", "")
            assert "default-src 'self'" in policy and "object-src 'none'" in policy, url
            assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0], url
            checked += 1
    assert checked > 100
    # The one inline script runs by the response's nonce.
    page = organizer_client.get(reverse("stimuli:challenge", args=[challenge.slug]))
    nonce = page["Content-Security-Policy"].split("'nonce-")[1].split("'")[0]
    assert f'<script nonce="{nonce}">' in page.content.decode()


def test_api_docs_are_for_organizers_unless_opened(organizer_client, settings):
    client = Client()
    for url in ("/api/docs/", "/api/schema/"):
        assert client.get(url).status_code == 403
        assert organizer_client.get(url).status_code == 200
    docs = organizer_client.get("/api/docs/").content.decode()
    assert "<script src=" in docs and "?script" in docs  # its start-up script is a file
    settings.FOLEY_PUBLIC_API_DOCS = True
    assert client.get("/api/docs/").status_code == 200
    assert client.get("/api/schema/").status_code == 200


class RecordingHandler(FileUploadHandler):
    """Notes every file part Django starts to read from a body."""

    seen: list[str] = []

    def new_file(self, field_name, file_name, *args, **kwargs):
        RecordingHandler.seen.append(file_name)
        super().new_file(field_name, file_name, *args, **kwargs)

    def receive_data_chunk(self, raw_data, start):
        return raw_data

    def file_complete(self, file_size):
        return None


@pytest.fixture
def spool(settings, tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(folder)
    settings.FILE_UPLOAD_HANDLERS = [
        "tests.foley_platform.test_production.RecordingHandler",
        "django.core.files.uploadhandler.TemporaryFileUploadHandler",
    ]
    RecordingHandler.seen = []
    return folder


def hostile_post(client: Client, url: str, size: int):
    """An anonymous multipart POST with a self-made CSRF cookie, as in the attack."""
    client.cookies["csrftoken"] = "x" * 32
    body = SimpleUploadedFile("big.bin", b"\0" * size)
    return client.post(url, {"file": body, "csrfmiddlewaretoken": "x" * 32})


def test_an_oversized_body_is_refused_before_it_is_spooled(db, settings, spool):
    client = Client(enforce_csrf_checks=True)
    size = settings.FOLEY_BODY_MAX_BYTES + 1024 * 1024
    response = hostile_post(client, "/listen/any-challenge/rate/", size)
    assert response.status_code == 413
    assert RecordingHandler.seen == [] and list(spool.iterdir()) == []
    # Without the limit the same body is read (and spooled) before the view refuses it.
    settings.FOLEY_BODY_MAX_BYTES = 10 * size
    response = hostile_post(Client(enforce_csrf_checks=True), "/listen/any-challenge/rate/", size)
    assert response.status_code in (403, 404) and RecordingHandler.seen == ["big.bin"]


def test_an_upload_over_its_limit_is_refused_before_it_is_spooled(
    organizer_client, challenge, settings, spool
):
    settings.FOLEY_UPLOAD_MAX_BYTES = settings.FOLEY_BODY_MAX_BYTES
    size = settings.FOLEY_UPLOAD_MAX_BYTES + 2 * limits.MULTIPART_ROOM
    response = organizer_client.post(
        reverse("stimuli:upload", args=[challenge.slug]),
        {"role": "development", "file": SimpleUploadedFile("set.zip", b"\0" * size)},
    )
    assert response.status_code == 413
    assert RecordingHandler.seen == [] and list(spool.iterdir()) == []


def test_upload_paths_take_large_bodies_and_only_they(settings):
    assert limits.body_limit("stimuli:upload") > settings.FOLEY_UPLOAD_MAX_BYTES
    assert limits.body_limit("upload-list") > settings.FOLEY_UPLOAD_MAX_BYTES
    assert limits.body_limit("generators:code") > settings.FOLEY_GENERATOR_MAX_BYTES
    for name in ("raters:rate", "raters:player", "login", "stimuli:challenge", None):
        assert limits.body_limit(name) == settings.FOLEY_BODY_MAX_BYTES
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE <= settings.FOLEY_BODY_MAX_BYTES


@pytest.fixture
def frozen_window(monkeypatch):
    """Every request in the same rate window, whatever the machine's speed."""
    import django_ratelimit.core as core

    monkeypatch.setattr(core, "time", SimpleNamespace(time=lambda: 1_800_000_000.0))


def statuses(n: int, send) -> list[int]:
    return [send(i).status_code for i in range(n)]


@pytest.mark.parametrize(
    "url, allowed",
    [
        ("/listen/some-challenge/join/some-key/", 30),
        ("/listen/some-challenge/crowd/some-key/", 30),
        ("/listen/some-challenge/player/", 20),
    ],
)
def test_links_and_player_events_are_limited_per_client(
    db, rate_limits, frozen_window, url, allowed
):
    method = "post" if "player" in url else "get"
    one = Client()
    got = statuses(allowed + 1, lambda i: getattr(one, method)(url))
    assert 429 not in got[:allowed] and got[-1] == 429
    assert one.get(url).get("Retry-After")
    # Another client is not held back by this one.
    assert getattr(Client(REMOTE_ADDR="10.9.9.9"), method)(url).status_code != 429


def test_a_crowd_link_is_also_limited_across_clients(db, rate_limits, frozen_window):
    url = "/listen/some-challenge/crowd/leaked-key/"
    got = statuses(121, lambda i: Client(REMOTE_ADDR=f"10.0.{i // 200}.{i % 200}").get(url))
    assert 429 not in got[:120] and got[-1] == 429
    # Another link is not.
    assert Client().get("/listen/some-challenge/crowd/other-key/").status_code != 429


def test_login_and_admin_are_limited_per_client(db, rate_limits, frozen_window, monkeypatch):
    client = Client()
    got = statuses(
        11, lambda i: client.post("/accounts/login/", {"username": f"u{i}", "password": "x"})
    )
    assert 429 not in got[:10] and got[-1] == 429
    # The whole admin too (a smaller rate than shipped, to keep the test short).
    monkeypatch.setattr(limits, "ADMIN_LIMIT", limits.Limit("admin", "5/m"))
    admin = Client(REMOTE_ADDR="10.7.7.7")
    got = statuses(6, lambda i: admin.get("/admin/login/"))
    assert 429 not in got[:5] and got[-1] == 429


def test_the_client_is_the_address_the_trusted_proxy_saw(settings, rf):
    request = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 1.2.3.4", REMOTE_ADDR="172.18.0.5")
    assert limits.client_ip(request) == "172.18.0.5"  # no proxy trusted: the connection's
    settings.FOLEY_PROXY_HOPS = 1
    assert limits.client_ip(request) == "1.2.3.4"  # nginx's view; the rest is the client's claim


def test_the_policy_built_once_is_the_librarys_and_follows_the_settings(settings):
    """The site's CSP middleware writes django-csp's own headers; a plain response gets the
    policy built once, a page with a nonce its own, and a change of the policy is followed."""
    from csp.middleware import CSPMiddleware
    from django.http import HttpRequest, HttpResponse

    from foley_platform.middleware import ContentSecurityPolicy

    def headers(middleware_class, *, nonce: bool = False) -> dict[str, str]:
        middleware = middleware_class(lambda request: HttpResponse())
        request = HttpRequest()
        request.path_info = "/listen/x/player/"
        middleware.process_request(request)
        if nonce:
            str(request.csp_nonce)
        response = middleware.process_response(request, HttpResponse())
        return {k: v for k, v in response.items() if "Content-Security-Policy" in k}

    plain = headers(ContentSecurityPolicy)
    assert (
        plain == headers(CSPMiddleware) and "default-src 'self'" in plain["Content-Security-Policy"]
    )
    assert headers(ContentSecurityPolicy) == plain  # built once, the same again
    with_nonce = headers(ContentSecurityPolicy, nonce=True)["Content-Security-Policy"]
    assert "'nonce-" in with_nonce and "'nonce-" not in plain["Content-Security-Policy"]
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    assert headers(ContentSecurityPolicy) == headers(CSPMiddleware)
    assert headers(ContentSecurityPolicy)["Content-Security-Policy"] == "default-src 'none'"
