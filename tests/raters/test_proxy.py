"""Sounds sent by the web server in front: Django checks the rater's token, records the byte
range asked for and answers with X-Accel-Redirect; nginx (deploy/nginx.conf, run here for real)
sends the bytes with ranges and the same headers for every sound."""

from __future__ import annotations

import os

import httpx
import pytest
from django.conf import settings as django_settings
from django.test import Client

from raters import enrolment, preparation, selectors, sessions
from raters.delivery import delivered_audio
from raters.models import Trial
from stimuli import storage
from tests.conftest import wait_until
from tests.listening_setup import build_listening_challenge, get_sound
from tests.nginx_site import nginx_binary, start_nginx, stop_nginx

PREFIX = "/_sounds/"


def _rater_with_session(challenge, client: Client | None = None):
    rater = enrolment.invite(challenge, label="proxy")
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    session = sessions.next_session(rater).session
    return rater, session


def _accel_trial(settings, slug: str):
    """Sounds sent by nginx, a rater's browser at the trials: (challenge, client, first trial)."""
    settings.AUDIO_ACCEL_REDIRECT = PREFIX
    challenge = build_listening_challenge(slug=slug, listened_fraction=0.0)
    preparation.set_open(challenge, True)
    rater, session = _rater_with_session(challenge)
    client = Client()
    client.get(f"/listen/{challenge.slug}/join/{rater.access_key}/")
    return challenge, client, session.trials.order_by("position").first()


@pytest.mark.django_db(transaction=True)
def test_the_wsgi_application_takes_receipts_straight_to_their_view(settings):
    """gunicorn's application hands nginx's receipts to their view past the middleware; every
    other path goes through Django as before, and without nginx in front there is no such path."""
    from django.test import RequestFactory

    from foley_platform.wsgi import application

    challenge, client, first = _accel_trial(settings, "receipts")
    asked = client.get(f"/listen/{challenge.slug}/audio/{first.token}/", HTTP_RANGE="bytes=0-")
    size = int(asked["Content-Range"].rsplit("/", 1)[1]) if asked.has_header("Content-Range") else 0
    size = size or delivered_audio(first.audio, selectors.listening_test(challenge)).size_bytes

    def call(path: str, **headers) -> tuple[str, dict, bytes]:
        seen = {}

        def start_response(status, response_headers):
            seen["status"], seen["headers"] = status, dict(response_headers)

        environ = RequestFactory().get(path, **headers).environ
        body = b"".join(application(environ, start_response))
        return seen["status"], seen["headers"], body

    receipt = {
        "HTTP_X_FOLEY_RECEIPT": asked["X-Foley-Receipt"],
        "HTTP_X_FOLEY_COMPLETION": "OK",
        "HTTP_X_FOLEY_BYTES_SENT": str(size),
    }
    status, headers, body = call("/_sounds/delivered/", **receipt)
    assert status == "204 No Content" and body == b""
    assert "Content-Security-Policy" not in headers  # not through the middleware
    first.refresh_from_db()
    assert first.delivered_ranges == [[0, size]] and first.delivered_at is not None
    # Any other path is Django's, with its middleware.
    status, headers, _ = call(f"/listen/{challenge.slug}/")
    assert status == "200 OK" and "Content-Security-Policy" in headers  # how to join
    settings.AUDIO_ACCEL_REDIRECT = ""
    assert call("/_sounds/delivered/", **receipt)[0] == "404 Not Found"


@pytest.mark.django_db
def test_django_answers_with_an_internal_redirect_and_the_same_headers(settings):
    challenge, client, first = _accel_trial(settings, "accel")
    session = first.session
    # Asking for a range records nothing: only nginx's receipt, once it sent the bytes, does.
    url = f"/listen/{challenge.slug}/audio/{first.token}/"
    asked = client.get(url, HTTP_RANGE="bytes=0-1")
    assert asked["X-Accel-Redirect"]
    first.refresh_from_db()
    assert first.delivered_ranges == [] and first.served_at is None

    def report(receipt: str, completion: str = "OK", sent: str = "2") -> None:
        reply = client.get(
            "/_sounds/delivered/",
            HTTP_X_FOLEY_RECEIPT=receipt,
            HTTP_X_FOLEY_COMPLETION=completion,
            HTTP_X_FOLEY_BYTES_SENT=sent,
        )
        assert reply.status_code == 204

    receipt = asked["X-Foley-Receipt"]
    report(receipt, completion="")  # the browser went away before the end
    report(receipt, sent="1")  # fewer bytes than the range
    report(receipt[:-2] + "xx")  # not signed by the platform
    first.refresh_from_db()
    assert first.delivered_ranges == []
    report(receipt)
    first.refresh_from_db()
    assert first.delivered_ranges == [[0, 2]] and first.delivered_at is None
    test = selectors.listening_test(challenge)
    headers = set()
    for trial in session.trials.select_related("audio"):
        response = get_sound(client, f"/listen/{challenge.slug}/audio/{trial.token}/")
        audio = delivered_audio(trial.audio, test)
        assert response.status_code == 200 and response.content == b""
        assert response["X-Accel-Redirect"] == PREFIX + audio.file
        assert (django_settings.MEDIA_ROOT / audio.file).is_file()
        headers.add(
            tuple(
                sorted(
                    (k, v)
                    for k, v in response.headers.items()
                    if k not in ("X-Accel-Redirect", "X-Foley-Receipt")
                )
            )
        )
        report(response["X-Foley-Receipt"], sent=str(audio.size_bytes))
        trial.refresh_from_db()
        # What the browser was sent (the whole file) counts as delivered.
        assert trial.delivered_ranges == [[0, audio.size_bytes]] and trial.delivered_at
    assert len(headers) == 1
    names = dict(next(iter(headers)))
    assert names["Content-Type"] == "audio/wav"
    assert names["Cache-Control"] == "private, max-age=86400"
    assert not {"ETag", "Last-Modified", "Content-Disposition"} & set(names)
    url = f"/listen/{challenge.slug}/audio/{first.token}/"
    refused = client.get(url, HTTP_RANGE="bytes=999999-")
    assert refused.status_code == 416 and not refused.has_header("X-Accel-Redirect")
    # Another rater's token gets nothing, redirect included.
    other, _ = _rater_with_session(challenge)
    stranger = Client()
    stranger.get(f"/listen/{challenge.slug}/join/{other.access_key}/")
    response = stranger.get(url)
    assert response.status_code == 404 and not response.has_header("X-Accel-Redirect")


# --- Against a real nginx --------------------------------------------------------------------------


def _nginx_or_skip() -> None:
    if nginx_binary():
        return
    if os.environ.get("FOLEY_REQUIRE_SERVICES") == "1":
        pytest.fail("nginx is required (FOLEY_REQUIRE_SERVICES=1); apt-get install nginx")
    pytest.skip("nginx is not installed (apt-get install nginx)")


@pytest.fixture
def nginx(live_server, tmp_path, settings):
    """deploy/nginx.conf in front of the live server, on a free port; stopped by its PID."""
    _nginx_or_skip()
    settings.AUDIO_ACCEL_REDIRECT = PREFIX
    settings.SESSION_COOKIE_SECURE = False  # plain HTTP on loopback: no TLS proxy here
    static = tmp_path / "static"
    static.mkdir()
    (static / "probe.txt").write_text("static from nginx")
    upstream = live_server.url.split("//", 1)[1]
    process, url = start_nginx(upstream, settings.MEDIA_ROOT, static, tmp_path / "nginx")
    yield url
    stop_nginx(process)


def test_nginx_sends_every_sound_with_ranges_and_identical_headers(nginx, transactional_db):
    challenge = build_listening_challenge(slug="proxied", listened_fraction=0.0)
    preparation.set_open(challenge, True)
    rater, session = _rater_with_session(challenge)
    test = selectors.listening_test(challenge)
    with httpx.Client(base_url=nginx, follow_redirects=False) as browser:
        assert browser.get("/static/probe.txt").text == "static from nginx"
        assert browser.get(f"/listen/{challenge.slug}/join/{rater.access_key}/").status_code == 302
        headers, sizes = set(), set()
        trials = list(session.trials.select_related("audio"))
        assert {t.role for t in trials} >= {"trial", "anchor_hq_goodfit", "anchor_lq_poorfit"}
        for trial in trials:
            url = f"/listen/{challenge.slug}/audio/{trial.token}/"
            response = browser.get(url)
            audio = delivered_audio(trial.audio, test)
            whole = storage.read_audio(audio.file)
            assert response.status_code == 200 and response.content == whole
            sizes.add(len(response.content))
            headers.add(
                tuple(
                    sorted(
                        (k.lower(), v)
                        for k, v in response.headers.items()
                        if k.lower() not in ("date", "set-cookie")
                    )
                )
            )
            part = browser.get(url, headers={"Range": "bytes=100-199"})
            assert part.status_code == 206 and part.content == whole[100:200]
            assert part.headers["content-range"] == f"bytes 100-199/{len(whole)}"
            assert browser.get(url, headers={"Range": "bytes=-10"}).content == whole[-10:]
        assert len(sizes) == 1 and len(headers) == 1  # stimuli and anchors alike
        sent = dict(next(iter(headers)))
        assert sent["content-type"] == "audio/wav"
        assert sent["cache-control"] == "private, max-age=86400"
        assert sent["accept-ranges"] == "bytes"
        assert not {"etag", "last-modified", "content-disposition", "expires"} & set(sent)
        # The whole file was sent, so the server counts the sound as delivered once nginx
        # hands back its receipt (after the bytes left); the receipt never reaches the browser.
        wait_until(
            lambda: not Trial.objects.filter(session=session, delivered_at__isnull=True).exists(),
            "every sound recorded as delivered",
        )
        assert "x-foley-receipt" not in sent
        # The internal location cannot be asked for directly, nor a sound without a token.
        audio = delivered_audio(trials[0].audio, test)
        assert browser.get(PREFIX + audio.file).status_code == 404
        assert browser.get(f"/listen/{challenge.slug}/audio/nothing/").status_code == 404
