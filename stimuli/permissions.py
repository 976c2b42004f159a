"""Who may do what: organizers run challenges; everyone else only rates or reads what is public."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.decorators import user_passes_test
from django.core.exceptions import PermissionDenied
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


def organizer_or_403(view):
    """Downloads: anyone who is not an organizer gets 403, not a login page saved as the file."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if not is_organizer(request.user):
            raise PermissionDenied("Only organizers can download this.")
        return view(request, *args, **kwargs)

    return wrapper


class IsOrganizer(BasePermission):
    message = "Only organizers can use this endpoint."

    def has_permission(self, request, view) -> bool:
        return is_organizer(request.user)


def roles(request: HttpRequest) -> dict:
    """Template context: what the navigation may show."""
    return {"is_organizer": is_organizer(getattr(request, "user", None))}
