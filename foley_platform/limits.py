"""Limits on what comes in, for deployments with or without the proxy in front (deploy/nginx.conf
holds the same limits for nginx).

- Bodies: a request whose declared length is over its path's limit is answered 413 before any
  middleware or view reads it, so nothing is spooled to the temporary folder. Only the upload
  paths take large bodies.
- Rates: per client (its address, through FOLEY_PROXY_HOPS proxies) on login, the admin, join
  and crowd links, player events and the account forms (password reset, a team's sign-up and
  registration); crowd enrolment also per link, so a leaked link cannot enrol without end; the
  account forms also per e-mail address they would write to, so no one can flood a mailbox
  from many addresses. Counted in the cache (shared between processes when CACHE_URL is set).
- The proxies: what a request says of its client, its arrival or a sound sent is believed only
  when it comes from FOLEY_PROXY_ADDRESSES (`from_proxy`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_ratelimit.core import is_ratelimited

# The views that take an upload, by URL name: the organizer page and API for clip sets, a
# generator's code, the text-prompt reference set.
UPLOAD_VIEWS = {
    "stimuli:upload": "FOLEY_UPLOAD_MAX_BYTES",
    "upload-list": "FOLEY_UPLOAD_MAX_BYTES",
    "text_prompts:reference": "FOLEY_UPLOAD_MAX_BYTES",
    "generators:code": "FOLEY_GENERATOR_MAX_BYTES",
    "generator-list": "FOLEY_GENERATOR_MAX_BYTES",
    "teams:submit": "FOLEY_GENERATOR_MAX_BYTES",
    "team-submission-list": "FOLEY_GENERATOR_MAX_BYTES",
}
# Room for a multipart body's headers and form fields beside the file itself.
MULTIPART_ROOM = 1024 * 1024


@lru_cache(maxsize=8)
def _networks(
    addresses: tuple[str, ...],
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(a.strip(), strict=False) for a in addresses if a.strip())


def is_proxy_address(address: str) -> bool:
    """Whether `address` is one of settings.FOLEY_PROXY_ADDRESSES (addresses or networks)."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in _networks(tuple(settings.FOLEY_PROXY_ADDRESSES)))


def from_proxy(request: HttpRequest) -> bool:
    """Whether the request's connection comes from a proxy in front: only then are the headers
    it sets (X-Forwarded-For, X-Request-Start, the delivery receipt) its own, not a browser's."""
    return is_proxy_address(request.META.get("REMOTE_ADDR", ""))


def client_ip(request: HttpRequest) -> str:
    """The client's address: the connection's, or the one the trusted proxies saw.

    X-Forwarded-For is read from its end, one address per proxy (FOLEY_PROXY_HOPS at most), and
    only while the address in hand is a proxy's: a browser that reaches the web process directly
    names no address but its own, and an entry a proxy did not write is never reached."""
    address = request.META.get("REMOTE_ADDR", "")
    forwarded = [a.strip() for a in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")]
    forwarded = [a for a in forwarded if a]
    for _ in range(settings.FOLEY_PROXY_HOPS):
        if not forwarded or not is_proxy_address(address):
            break
        address = forwarded.pop()  # what that proxy saw; the rest is what came to it
    return address


def body_limit(view_name: str | None) -> int:
    setting = UPLOAD_VIEWS.get(view_name or "")
    if setting is None:
        return settings.FOLEY_BODY_MAX_BYTES
    return getattr(settings, setting) + MULTIPART_ROOM


def _too_large(limit: int) -> HttpResponse:
    return HttpResponse(
        f"Request body too large: at most {limit} bytes here.",
        status=413,
        content_type="text/plain; charset=utf-8",
    )


class BodyLimitMiddleware:
    """413 for a body over its path's limit, before anything reads it (the view is resolved
    here, ahead of the middleware that would parse a form)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return HttpResponse("Bad Content-Length.", status=400)
        if length > settings.FOLEY_BODY_MAX_BYTES:
            from django.urls import Resolver404, resolve

            try:
                name = resolve(request.path_info).view_name
            except Resolver404:
                name = None
            limit = body_limit(name)
            if length > limit:
                return _too_large(limit)
        return self.get_response(request)


@dataclass(frozen=True)
class Limit:
    group: str
    rate: str  # django-ratelimit's: count/period, e.g. "10/m", "20/s"
    # "client"; "link": the crowd link's key in the URL; "email": the e-mail address the form
    # posts (a request without one is not counted under it)
    key: str = "client"
    methods: tuple[str, ...] = ()  # all when empty


ACCOUNT_FORMS = Limit("accounts", "10/m", methods=("POST",))
MAIL = Limit("mail", "3/h", key="email", methods=("POST",))
# By URL name; nginx's zones (deploy/nginx.conf) match these.
RATE_LIMITS: dict[str, tuple[Limit, ...]] = {
    "login": (Limit("login", "10/m", methods=("POST",)),),
    "admin:login": (Limit("login", "10/m", methods=("POST",)),),
    "raters:join": (Limit("links", "30/m"),),
    "raters:crowd": (Limit("links", "30/m"), Limit("enrol", "120/m", key="link")),
    "raters:player": (Limit("player", "20/s"),),
    # The forms that send an e-mail: a few tries a minute from one client, and a few e-mails an
    # hour to one address whoever asks (the group is shared: reset, sign-up and registration
    # together). The answer is the same whether or not the address has an account.
    "password_reset": (ACCOUNT_FORMS, MAIL),
    "teams:join": (Limit("links", "30/m"), ACCOUNT_FORMS, MAIL),
    "teams:register": (ACCOUNT_FORMS, MAIL),
    "teams:confirm": (Limit("links", "30/m"),),
}
ADMIN_LIMIT = Limit("admin", "300/m")


def posted_email(request: HttpRequest) -> str:
    """The e-mail address a form posts, as one mailbox: trimmed, lower case."""
    return request.POST.get("email", "").strip().lower()


def _key(limit: Limit):
    if limit.key == "link":
        return lambda group, request: request.resolver_match.kwargs.get("key", "")
    if limit.key == "email":
        return lambda group, request: posted_email(request)
    return lambda group, request: client_ip(request)


RETRY_AFTER = {"s": "1", "m": "60", "h": "3600", "d": "86400"}


def _limits(request: HttpRequest) -> tuple[Limit, ...]:
    match = request.resolver_match
    found = RATE_LIMITS.get(match.view_name, ()) if match else ()
    if request.path_info.startswith("/admin/"):
        found = (*found, ADMIN_LIMIT)
    return found


class RateLimitMiddleware:
    """429 with Retry-After once a client (or a crowd link) is over its limit. Every request
    carries its client's address as `client_ip`, read once here through the trusted proxies,
    for the views below this layer (crowd enrolment counts participants per network), and
    `via_proxy`, whether it came through a proxy in front (`from_proxy`: the sounds' views)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.client_ip = client_ip(request)
        request.via_proxy = from_proxy(request)
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view, args, kwargs):
        if not settings.FOLEY_RATE_LIMITS_ENABLED:
            return None
        for limit in _limits(request):
            if limit.methods and request.method not in limit.methods:
                continue
            if limit.key == "email" and not posted_email(request):
                continue
            if is_ratelimited(
                request, group=limit.group, key=_key(limit), rate=limit.rate, increment=True
            ):
                response = HttpResponse(
                    "Too many requests: wait a moment and try again.",
                    status=429,
                    content_type="text/plain; charset=utf-8",
                )
                response["Retry-After"] = RETRY_AFTER[limit.rate[-1]]
                return response
        return None
