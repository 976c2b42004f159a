"""The adversary suite: bots that read the platform's code attack the real server stack
(gunicorn with production settings on the test database, nginx with deploy/nginx.conf in front
where it is installed), and each test also shows that an honest user still gets through.

The servers read the audio files the tests store, so every test of the suite shares one media
folder (audio is content-addressed: one file per sound whatever stores it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.db import connection

from tests.adversary.bots import Browser
from tests.nginx_site import nginx_binary, start_nginx, stop_nginx
from tests.server_stack import site_environment, start_gunicorn, stop

SOUNDS = "/_sounds/"


@pytest.fixture(scope="session")
def shared_media(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("adversary") / "media"
    folder.mkdir()
    return folder


@pytest.fixture
def media_root(settings, shared_media):
    """The servers' media folder, for every test of the suite."""
    settings.MEDIA_ROOT = shared_media
    return shared_media


def _database_url() -> str:
    db = connection.settings_dict
    user = db.get("USER") or "postgres"
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


def _nginx_or_skip() -> bool:
    if nginx_binary():
        return True
    if os.environ.get("FOLEY_REQUIRE_SERVICES") == "1":
        pytest.fail("nginx is required (FOLEY_REQUIRE_SERVICES=1); apt-get install nginx")
    pytest.skip("nginx is not installed (apt-get install nginx)")


def _start(kind: str, folder: Path, media: Path):
    if connection.vendor != "postgresql":
        pytest.skip("the adversary suite runs the real stack on PostgreSQL")
    env = site_environment(_database_url(), folder)
    env["MEDIA_ROOT"] = str(media)
    if kind == "nginx":
        _nginx_or_skip()
        env["AUDIO_ACCEL_REDIRECT"] = SOUNDS
        env["PROXY_REQUEST_START"] = "1"
        env["FOLEY_PROXY_HOPS"] = "1"  # one nginx in front: the client is its $remote_addr
    process, url = start_gunicorn(env, "--workers 2", folder / "gunicorn.log")
    proxy = None
    if kind == "nginx":
        static = folder / "static"
        static.mkdir(exist_ok=True)
        try:
            proxy, url = start_nginx(url.split("//", 1)[1], media, static, folder / "nginx")
        except Exception:
            stop(process)
            raise
    return process, proxy, url


@pytest.fixture(scope="module", params=["gunicorn", "nginx"])
def stack(request, django_db_setup, django_db_blocker, tmp_path_factory, shared_media):
    """The production stack: gunicorn alone (it sends the sounds), or behind nginx (nginx sends
    them and reports back). Its base URL."""
    with django_db_blocker.unblock():
        process, proxy, url = _start(request.param, tmp_path_factory.mktemp("stack"), shared_media)
    yield url
    if proxy is not None:
        stop_nginx(proxy)
    stop(process)


@pytest.fixture(scope="module")
def site(django_db_setup, django_db_blocker, tmp_path_factory, shared_media):
    """The production stack as deployed (nginx in front), for attacks on what the pages do."""
    with django_db_blocker.unblock():
        process, proxy, url = _start("nginx", tmp_path_factory.mktemp("site"), shared_media)
    yield url
    stop_nginx(proxy)
    stop(process)


@pytest.fixture
def browser_at(request):
    """A bot's or an honest user's browser on a stack: `browser_at(url, slug)`."""
    opened = []

    def open_(url: str, slug: str, address: str = "") -> Browser:
        browser = Browser(url, slug, address)
        opened.append(browser)
        return browser

    yield open_
    for browser in opened:
        browser.close()
