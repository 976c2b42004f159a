"""Who may do what: organizers run challenges; everyone else only rates or reads what is public."""

from __future__ import annotations

from django.contrib.auth.decorators import user_passes_test
from django.http import HttpRequest
from rest_framework.permissions import BasePermission

ORGANIZERS_GROUP = "organizers"


def is_organizer(user) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    if user.is_superuser:
        return True
    cached = getattr(user, "_is_organizer", None)
    if cached is None:
        cached = user.groups.filter(name=ORGANIZERS_GROUP).exists()
        user._is_organizer = cached
    return cached


# Pages: anyone who is not an organizer is sent to the login page.
organizer_required = user_passes_test(is_organizer)


class IsOrganizer(BasePermission):
    message = "Only organizers can use this endpoint."

    def has_permission(self, request, view) -> bool:
        return is_organizer(request.user)


def roles(request: HttpRequest) -> dict:
    """Template context: what the navigation may show."""
    return {"is_organizer": is_organizer(getattr(request, "user", None))}
