"""What a request says of itself is believed only from the proxies in front
(FOLEY_PROXY_ADDRESSES): a browser that reaches the web process directly cannot name another
client address (to dodge a login lockout), stamp its own arrival time (to buy the listening
checks' time), read a delivery receipt or redeem one (to count a sound it never got as
delivered)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.test import Client, RequestFactory
from django.utils import timezone

from foley_platform import limits
from raters import listening
from tests.raters.test_proxy import _accel_trial

BROWSER = "198.51.100.7"  # a documentation address: not a proxy's
NGINX = "172.28.0.10"


def test_x_forwarded_for_counts_only_from_a_proxy(settings, rf):
    settings.FOLEY_PROXY_ADDRESSES = [NGINX, "10.9.0.0/16"]
    settings.FOLEY_PROXY_HOPS = 1
    claimed = "6.6.6.6, 1.2.3.4"
    # Straight from a browser: its own address, whatever it claims.
    assert limits.client_ip(rf.get("/", HTTP_X_FORWARDED_FOR=claimed, REMOTE_ADDR=BROWSER)) == (
        BROWSER
    )
    # Through nginx: the address nginx saw; what came before it is the browser's claim.
    assert limits.client_ip(rf.get("/", HTTP_X_FORWARDED_FOR=claimed, REMOTE_ADDR=NGINX)) == (
        "1.2.3.4"
    )
    assert limits.client_ip(rf.get("/", REMOTE_ADDR=NGINX)) == NGINX  # nothing forwarded
    # Two proxies (a TLS proxy before nginx): each hop read only from a proxy's address.
    settings.FOLEY_PROXY_HOPS = 2
    tls = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 1.2.3.4, 10.9.0.5", REMOTE_ADDR=NGINX)
    assert limits.client_ip(tls) == "1.2.3.4"
    # The entry before nginx's is not a proxy's: the chain stops there, the claim is not read.
    direct = rf.get("/", HTTP_X_FORWARDED_FOR="6.6.6.6, 1.2.3.4", REMOTE_ADDR=NGINX)
    assert limits.client_ip(direct) == "1.2.3.4"
    # An IPv4 proxy seen on an IPv6 socket is the same proxy.
    assert limits.is_proxy_address(f"::ffff:{NGINX}") and not limits.is_proxy_address("junk")


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_a_forged_x_forwarded_for_does_not_dodge_the_login_lockout(
    db, settings, django_user_model, url
):
    settings.FOLEY_PROXY_HOPS = 1  # as behind nginx, but this client is not nginx
    settings.FOLEY_PROXY_ADDRESSES = [NGINX]
    django_user_model.objects.create_user("boss", password="the-right-passphrase", is_staff=True)
    browser = Client(REMOTE_ADDR=BROWSER)
    got = []
    for n in range(settings.AXES_FAILURE_LIMIT + 1):
        forged = f"203.0.113.{n + 1}"  # a new address claimed on every try
        reply = browser.post(
            url, {"username": "boss", "password": "guess"}, HTTP_X_FORWARDED_FOR=forged
        )
        got.append(reply.status_code)
    assert got[-1] == 429, got
    # Through nginx, clients are told apart: another one is not locked out by these failures,
    # and the one that failed is locked out whatever it claims before nginx.
    through = Client(REMOTE_ADDR=NGINX)
    right = {"username": "boss", "password": "the-right-passphrase"}
    assert through.post(url, right, HTTP_X_FORWARDED_FOR="192.0.2.44").status_code == 302
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        through.post(
            url, {"username": "boss", "password": "x"}, HTTP_X_FORWARDED_FOR="9.9.9.9, 192.0.2.45"
        )
    again = Client(REMOTE_ADDR=NGINX).post(url, right, HTTP_X_FORWARDED_FOR="8.8.8.8, 192.0.2.45")
    assert again.status_code == 429


def test_a_forged_request_start_from_a_browser_is_ignored(settings):
    from foley_platform.middleware import request_arrival

    settings.PROXY_REQUEST_START = True
    settings.FOLEY_PROXY_ADDRESSES = [NGINX]
    seen = []
    handler = request_arrival(lambda request: seen.append(listening.now()))
    moment = timezone.now()
    stamp = f"t={moment.timestamp() - 29:.3f}"  # 29 s of credit, if it were believed
    handler(RequestFactory().get("/", HTTP_X_REQUEST_START=stamp, REMOTE_ADDR=BROWSER))
    assert seen[-1] >= moment
    handler(RequestFactory().get("/", HTTP_X_REQUEST_START=stamp, REMOTE_ADDR=NGINX))
    assert moment - seen[-1] >= timedelta(seconds=28)


def _call_wsgi(path: str, **environ) -> tuple[str, dict]:
    from foley_platform.wsgi import application

    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    b"".join(application(RequestFactory().get(path, **environ).environ, start_response))
    return seen["status"], seen["headers"]


@pytest.mark.django_db(transaction=True)
def test_receipts_are_neither_shown_to_nor_taken_from_a_browser(settings):
    challenge, client, first = _accel_trial(settings, f"trust-{uuid.uuid4().hex[:6]}")
    settings.FOLEY_PROXY_ADDRESSES = [NGINX]
    url = f"/listen/{challenge.slug}/audio/{first.token}/"
    # The rater's browser straight at the web process: the sound's bytes from Django, with
    # neither an internal redirect nor a receipt.
    client.defaults["REMOTE_ADDR"] = BROWSER
    direct = client.get(url, HTTP_RANGE="bytes=0-1")
    assert direct.status_code == 206 and b"".join(direct.streaming_content) == b"RI"
    assert not direct.has_header("X-Foley-Receipt") and not direct.has_header("X-Accel-Redirect")
    # Through nginx: a receipt, which only nginx may hand back.
    client.defaults["REMOTE_ADDR"] = NGINX
    asked = client.get(url, HTTP_RANGE="bytes=0-9")
    receipt = asked["X-Foley-Receipt"]
    redeem = {
        "HTTP_X_FOLEY_RECEIPT": receipt,
        "HTTP_X_FOLEY_COMPLETION": "OK",
        "HTTP_X_FOLEY_BYTES_SENT": "10",
    }
    # A browser that got hold of a receipt redeems nothing, through Django or the WSGI shortcut.
    assert Client(REMOTE_ADDR=BROWSER).get("/_sounds/delivered/", **redeem).status_code == 404
    assert _call_wsgi("/_sounds/delivered/", REMOTE_ADDR=BROWSER, **redeem)[0] == "404 Not Found"
    first.refresh_from_db()
    assert first.delivered_ranges == [[0, 2]]  # only what Django itself sent
    assert _call_wsgi("/_sounds/delivered/", REMOTE_ADDR=NGINX, **redeem)[0] == "204 No Content"
    first.refresh_from_db()
    assert first.delivered_ranges == [[0, 10]]
