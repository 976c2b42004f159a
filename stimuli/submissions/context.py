"""Template context: the signed-in person's team pages, for the navigation."""

from __future__ import annotations

from django.http import HttpRequest

from .selectors import memberships_of


def team_links(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"team_links": []}
    return {"team_links": list(memberships_of(user))}
