"""Wiring for pages that Django answers without a template of the site's own."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


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
