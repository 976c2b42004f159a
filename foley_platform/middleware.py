"""Wiring for pages that Django answers without a template of the site's own."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from csp.constants import HEADER, HEADER_REPORT_ONLY
from csp.middleware import CheckableLazyObject, CSPMiddleware
from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.core.signals import setting_changed
from django.db import close_old_connections
from django.dispatch import receiver
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotFound
from django.shortcuts import render
from django.utils import timezone

from foley_platform.limits import from_proxy
from raters import delivery, listening
from raters import views as raters_views

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
    settings.PROXY_REQUEST_START says that server is there, and only from it (`from_proxy`): a
    browser's own stamp would buy it time; kept within the last 30 s."""

    def middleware(request: HttpRequest) -> HttpResponse:
        trusted = settings.PROXY_REQUEST_START and from_proxy(request)
        arrived = _arrival(request) if trusted else None
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


# What a response may carry to get a policy of its own (django-csp's decorators).
_OWN_POLICY = tuple(
    f"_csp_{what}{ro}" for what in ("config", "update", "replace", "exempt") for ro in ("", "_ro")
)


class ContentSecurityPolicy(CSPMiddleware):
    """django-csp's middleware, with the headers of a response that uses no nonce and asks for no
    policy of its own built once per process (and again when the settings change).

    The library builds both headers anew for every response: at crowd scale, where every
    answer, sound and player event is a response, that was a twentieth of the web process's
    time, spent making the same string. Anything else goes the library's way."""

    _plain: dict[str, str] | None = None

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if (
            (settings.DEBUG and response.status_code in (404, 500))
            or getattr(request, "_csp_nonce", None) is not None
            or any(hasattr(response, name) for name in _OWN_POLICY)
            or HEADER in response
            or HEADER_REPORT_ONLY in response
        ):
            return super().process_response(request, response)
        plain = ContentSecurityPolicy._plain
        if plain is None:
            # The library's own headers for a plain response at the site's root.
            probe = HttpRequest()
            probe.path_info = "/"
            made = super().process_response(probe, HttpResponse())
            plain = {h: made[h] for h in (HEADER, HEADER_REPORT_ONLY) if h in made}
            ContentSecurityPolicy._plain = plain
        excluded = _excluded(request.path_info)
        for header, value in plain.items():
            if header not in excluded:
                response[header] = value
        # As the library does: a nonce asked for after the header was written raises.
        request.csp_nonce = CheckableLazyObject(self._csp_nonce_post_response)
        return response


def _excluded(path: str) -> set[str]:
    """The headers whose policy excludes `path` (its EXCLUDE_URL_PREFIXES)."""
    excluded = set()
    for header, name in (
        (HEADER, "CONTENT_SECURITY_POLICY"),
        (HEADER_REPORT_ONLY, "CONTENT_SECURITY_POLICY_REPORT_ONLY"),
    ):
        prefixes = (getattr(settings, name, None) or {}).get("EXCLUDE_URL_PREFIXES") or ()
        if path.startswith(tuple(prefixes)):
            excluded.add(header)
    return excluded


@receiver(setting_changed)
def _policy_changed(setting: str, **kwargs) -> None:
    if setting.startswith("CONTENT_SECURITY_POLICY") or setting == "DEBUG":
        ContentSecurityPolicy._plain = None


def receipts_first(application: Callable) -> Callable:
    """The WSGI application, with nginx's delivery receipts (deploy/nginx.conf's post_action)
    handed straight to their view: no browser sends them (the path is internal to nginx, the
    receipt signed by this process), so the middleware has nothing to do for them, and at crowd
    scale they are one request in six. The database connection is looked after as around any
    request."""

    def receipts(environ: dict, start_response: Callable):
        if environ.get("PATH_INFO") != delivery.RECEIPT_PATH:
            return application(environ, start_response)
        close_old_connections()
        try:
            request = WSGIRequest(environ)
            request.via_proxy = from_proxy(request)  # as RateLimitMiddleware marks the others
            response = raters_views.delivered(request)
        except Http404:
            response = HttpResponseNotFound()
        finally:
            close_old_connections()
        status = f"{response.status_code} {response.reason_phrase}"
        start_response(status, [*response.items(), ("Content-Length", str(len(response.content)))])
        return [response.content]

    return receipts
