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


def run_production(tmp_path, command: list[str], **env) -> subprocess.CompletedProcess:
    """`command` in the repository with DEBUG off and otherwise safe settings, changed by `env`."""
    environment = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": SAFE_KEY,
        "ALLOWED_HOSTS": "foley.example.org",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'start.sqlite3'}",
        "FOLEY_DATA_DIR": str(tmp_path),
        **env,
    }
    return subprocess.run(
        command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def start_web(tmp_path, **env) -> subprocess.CompletedProcess:
    """Import the web process's WSGI application as gunicorn does, with DEBUG off."""
    return run_production(
        tmp_path, [sys.executable, "-c", "import foley_platform.wsgi; print('started')"], **env
    )


WEAK = "SECRET_KEY is weak: "


@pytest.mark.parametrize(
    "env, named",
    [
        ({"SECRET_KEY": "change-me-to-a-long-random-string"}, ["SECRET_KEY is the example value"]),
        (
            {"SECRET_KEY": "a"},
            [WEAK + "length 1 (at least 50), 1 distinct characters (at least 5)"],
        ),
        ({"SECRET_KEY": "ab" * 40}, [WEAK + "2 distinct characters (at least 5)"]),
        ({"SECRET_KEY": "django-insecure-" + SAFE_KEY}, [WEAK + "Django's example prefix"]),
        ({"ALLOWED_HOSTS": ""}, ["ALLOWED_HOSTS is empty"]),
        ({"ALLOWED_HOSTS": "*"}, ["ALLOWED_HOSTS has the wildcard '*'"]),
        ({"ALLOWED_HOSTS": "foley.example.org,*.example.org"}, ["wildcard '*.example.org'"]),
        ({"SECRET_KEY": ""}, ["SECRET_KEY must be set"]),
        # Every unsafe setting of one start, named at once.
        (
            {"SECRET_KEY": "a", "ALLOWED_HOSTS": "*"},
            [WEAK + "length 1", "ALLOWED_HOSTS has the wildcard '*'", "check --deploy"],
        ),
    ],
)
def test_a_production_start_refuses_each_unsafe_setting(tmp_path, env, named):
    refused = start_web(tmp_path, **env)
    assert refused.returncode != 0 and "started" not in refused.stdout
    line = refused.stderr.strip().splitlines()[-1]  # the error, below its traceback
    assert line.startswith("django.core.exceptions.ImproperlyConfigured: "), refused.stderr
    for name in named:
        assert name in line, line
    # The same start with safe settings comes up.
    assert start_web(tmp_path).stdout.strip() == "started"


def test_a_subdomain_pattern_is_not_a_wildcard():
    assert (
        safety.unsafe_settings(
            debug=False, secret_key=SAFE_KEY, allowed_hosts=[".example.org", "foley.example.org"]
        )
        == []
    )
    assert safety.unsafe_settings(debug=True, secret_key="a", allowed_hosts=["*"]) == []


def demo_accounts():
    """The demo's organizer and its two teams' members, each with the password the demo
    prints."""
    from django.contrib.auth import get_user_model

    from stimuli.demo import ensure_organizer
    from stimuli.submissions.demo import MEMBER_PASSWORD

    users = get_user_model().objects
    return [
        ensure_organizer(),
        users.create_user("ada", "ada@example.org", MEMBER_PASSWORD),
        users.create_user("ben", "ben@example.org", MEMBER_PASSWORD),
    ]


def test_a_production_start_refuses_the_demo_passwords(db, settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    from foley_platform import celery

    settings.DEBUG = False
    safety.refuse_unsafe_start()  # no account yet
    celery.refuse_unsafe_start()
    organizer, ada, ben = demo_accounts()
    with pytest.raises(ImproperlyConfigured) as refused:
        safety.refuse_unsafe_start()
    for name in ("organizer", "ada", "ben"):  # every account, at once
        assert f"the account '{name}' has the demo's published password" in str(refused.value)
    with pytest.raises(SystemCheckError, match=r"foley\.E001"):  # runserver's checks
        call_command("check")
    with pytest.raises(SystemExit, match="the account 'ada'"):  # a worker's start
        celery.refuse_unsafe_start()
    for user in (organizer, ada):
        user.set_password("a-new-and-private-passphrase")
        user.save()
    with pytest.raises(ImproperlyConfigured, match="'ben'") as refused:
        safety.refuse_unsafe_start()
    assert "'ada'" not in str(refused.value)
    ben.is_active = False
    ben.save()
    safety.refuse_unsafe_start()
    celery.refuse_unsafe_start()
    settings.DEBUG = True
    organizer.set_password("foley-demo")
    organizer.save()
    safety.refuse_unsafe_start()  # the demo itself runs with DEBUG on


def test_a_staff_account_on_a_demo_password_is_refused_too(db, settings, django_user_model):
    from stimuli.submissions.demo import MEMBER_PASSWORD

    settings.DEBUG = False
    django_user_model.objects.create_user("boss", password=MEMBER_PASSWORD, is_staff=True)
    django_user_model.objects.create_user("rater", password=MEMBER_PASSWORD)  # not tried
    assert safety.demo_passwords_in_use() == [
        "the account 'boss' has the demo's published password: change it "
        "(manage.py changepassword) or deactivate the account"
    ]


def test_the_checks_name_every_problem_at_once(db, settings):
    from django.core import checks

    settings.DEBUG = False
    settings.SECRET_KEY = "a"
    settings.ALLOWED_HOSTS = ["*"]
    demo_accounts()
    found = [(m.id, m.level) for m in checks.run_checks(tags=[checks.Tags.security])]
    ours = sorted(f for f in found if f[0].startswith("foley."))
    assert ours == [("foley.E001", checks.ERROR)] * 3 + [
        ("foley.E002", checks.ERROR),
        ("foley.E003", checks.ERROR),
        ("foley.W004", checks.WARNING),  # the default site address, plain HTTP
    ]
    settings.DEBUG = True
    assert not [m for m in checks.run_checks(tags=[checks.Tags.security]) if "foley" in m.id]


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_check_deploy_the_web_process_and_a_worker_refuse_the_demo_accounts(tmp_path, settings):
    """The real start commands, on the test database that holds the demo's accounts."""
    from tests.conftest import _database_url

    # Hashed as production hashes (the tests' fast hasher is not among production's).
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    demo_accounts()
    database = {"DATABASE_URL": _database_url()}
    accounts = [f"the account '{name}' has the demo's published" for name in ("ada", "ben")]

    # `manage.py check --deploy`: every problem at once, the unsafe settings among them.
    checked = run_production(
        tmp_path,
        [sys.executable, "manage.py", "check", "--deploy"],
        SECRET_KEY="a",
        ALLOWED_HOSTS="*",
        **database,
    )
    assert checked.returncode != 0
    for text in [*accounts, "foley.E001", "foley.E002", WEAK + "length 1", "foley.E003"]:
        assert text in checked.stderr, checked.stderr

    # The web process, with safe settings: refused for the accounts.
    served = start_web(tmp_path, **database)
    assert served.returncode != 0 and "started" not in served.stdout
    assert all(text in served.stderr for text in accounts), served.stderr

    # A worker: it stops before it reads a task.
    worker = run_production(
        tmp_path,
        [sys.executable, "-m", "celery", "-A", "foley_platform", "worker", "-P", "solo"],
        CELERY_BROKER_URL="redis://127.0.0.1:1/0",  # never reached
        **database,
    )
    assert worker.returncode != 0
    assert all(text in worker.stderr for text in accounts), worker.stderr


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
    assert limits.client_ip(request) == "172.18.0.5"  # not a proxy's address: its own
    settings.FOLEY_PROXY_ADDRESSES = ["172.18.0.5"]
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


def test_the_site_address_of_e_mails_links_is_checked():
    problems = safety.site_url_problems("http://localhost:8000", ["foley.example.org"])
    assert len(problems) == 2 and "plain HTTP" in problems[0] and "ALLOWED_HOSTS" in problems[1]
    assert safety.site_url_problems("https://foley.example.org", ["foley.example.org"]) == []
    assert safety.site_url_problems("https://a.example.org", [".example.org"]) == []
