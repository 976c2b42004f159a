"""Wiring for pages that Django answers without a template of the site's own."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from raters import listening

# A request's arrival is believed no earlier than this before it is answered.
ARRIVAL_WINDOW = timedelta(seconds=30)


def method_not_allowed_page(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """A 405 page inside the site's layout instead of an empty body.

    Django's `require_POST` answers a visit to a form's address with a bare 405 and has no
    handler to style it (as handler404 does); the API's 405s carry their JSON and stay as they are.
    """

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if response.status_code != 405 or response.content or request.method == "HEAD":
            return response
        allowed = response.get("Allow", "")
        parent = request.path.rstrip("/").rsplit("/", 1)[0] + "/"
        page = render(request, "405.html", {"allowed": allowed, "back": parent}, status=405)
        page["Allow"] = allowed
        return page

    return middleware


def request_arrival(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """When the request reached the web server in front (nginx's `X-Request-Start: t=<msec>`,
    set by deploy/nginx.conf over anything a browser sends), for the listening checks: a busy
    moment queues requests in front of the workers, and the wall time between a player's
    events is the time between the browser's sends, not between their turns. Read only where
    settings.PROXY_REQUEST_START says that server is there; kept within the last 30 s."""

    def middleware(request: HttpRequest) -> HttpResponse:
        arrived = _arrival(request) if settings.PROXY_REQUEST_START else None
        token = listening.ARRIVED.set(arrived)
        try:
            return get_response(request)
        finally:
            listening.ARRIVED.reset(token)

    return middleware


def _arrival(request: HttpRequest) -> datetime | None:
    value = request.headers.get("X-Request-Start", "")
    try:
        seconds = float(value.removeprefix("t="))
    except ValueError:
        return None
    moment = timezone.now()
    try:
        arrived = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return min(moment, max(arrived, moment - ARRIVAL_WINDOW))
