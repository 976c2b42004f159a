"""Who may do what: organizers run the challenges they are named on; everyone else only rates or
reads what is public.

A challenge's roles (`ChallengeRole`): its owner and organizers change it, a viewer only reads
it; site staff organize every challenge. Every organizer page, API endpoint, download and job
asks the one question `check_challenge` answers, with "write" meaning any method other than
GET, HEAD and OPTIONS, so a viewer can open every page but change nothing.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from rest_framework.permissions import SAFE_METHODS, BasePermission

from .models import Challenge, ChallengeRole

ORGANIZERS_GROUP = "organizers"
WRITERS = (ChallengeRole.Role.OWNER, ChallengeRole.Role.ORGANIZER)


def _active(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def is_site_staff(user) -> bool:
    """Staff organize every challenge of the site."""
    return _active(user) and (user.is_superuser or user.is_staff)


def may_create_challenges(user) -> bool:
    """Staff and members of the organizers group; the creator becomes the challenge's owner."""
    if not _active(user):
        return False
    if is_site_staff(user):
        return True
    cached = getattr(user, "_in_organizers_group", None)
    if cached is None:
        cached = user.groups.filter(name=ORGANIZERS_GROUP).exists()
        user._in_organizers_group = cached
    return cached


def is_organizer(user) -> bool:
    """Whether the organizer pages are for this user at all: they may create a challenge or are
    named on one. What they may see there is decided per challenge."""
    if may_create_challenges(user):
        return True
    if not _active(user):
        return False
    cached = getattr(user, "_has_challenge_role", None)
    if cached is None:
        cached = ChallengeRole.objects.filter(user=user).exists()
        user._has_challenge_role = cached
    return cached


def challenge_role(user, challenge: Challenge) -> str | None:
    """The user's role on the challenge (site staff: owner), or None."""
    if not _active(user):
        return None
    if is_site_staff(user):
        return ChallengeRole.Role.OWNER
    cache = user.__dict__.setdefault("_challenge_roles", {})
    if challenge.pk not in cache:
        cache[challenge.pk] = (
            ChallengeRole.objects.filter(user=user, challenge=challenge)
            .values_list("role", flat=True)
            .first()
        )
    return cache[challenge.pk]


def may_read(user, challenge: Challenge) -> bool:
    return challenge_role(user, challenge) is not None


def may_write(user, challenge: Challenge) -> bool:
    return challenge_role(user, challenge) in WRITERS


def may_delete(user, challenge: Challenge) -> bool:
    return challenge_role(user, challenge) == ChallengeRole.Role.OWNER


def check_challenge(user, challenge: Challenge, *, write: bool) -> None:
    """The one permission check of the organizer side: PermissionDenied unless the user may
    read (or, with `write`, change) this challenge."""
    if not (may_write if write else may_read)(user, challenge):
        raise PermissionDenied(
            "You do not organize this challenge."
            if not may_read(user, challenge)
            else "Viewers of this challenge cannot change it."
        )


def readable_challenges(user):
    """The challenges the user organizes or views."""
    if is_site_staff(user):
        return Challenge.objects.all()
    if not _active(user):
        return Challenge.objects.none()
    return Challenge.objects.filter(roles__user=user)


def is_write(request: HttpRequest) -> bool:
    return request.method not in SAFE_METHODS


def name_owner(challenge: Challenge, user) -> None:
    """The creator of a challenge owns it (staff need no row: they organize every challenge)."""
    if _active(user) and not is_site_staff(user):
        ChallengeRole.objects.get_or_create(
            challenge=challenge, user=user, defaults={"role": ChallengeRole.Role.OWNER}
        )
        user.__dict__.pop("_challenge_roles", None)


def organizer_required(view):
    """Pages that are not about one challenge (the list of challenges, a job, an audio file):
    organizers only; the view scopes what it shows with `check_challenge` or
    `readable_challenges`."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs):
        if not is_organizer(request.user):
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapped


def challenge_organizer_required(view):
    """Pages under a challenge's slug: the user's role on that challenge decides, writes (any
    method but GET, HEAD, OPTIONS) needing owner or organizer."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, slug: str, **kwargs):
        if not is_organizer(request.user):
            return redirect_to_login(request.get_full_path())
        challenge = get_object_or_404(Challenge, slug=slug)
        check_challenge(request.user, challenge, write=is_write(request))
        return view(request, *args, slug=slug, **kwargs)

    return wrapped


def challenge_organizer_or_403(view):
    """Downloads under a challenge's slug: as `challenge_organizer_required`, but anyone else
    gets 403, not a login page a browser would save as the file."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, slug: str, **kwargs):
        if not is_organizer(request.user):
            raise PermissionDenied("Only the challenge's organizers can download this.")
        challenge = get_object_or_404(Challenge, slug=slug)
        check_challenge(request.user, challenge, write=is_write(request))
        return view(request, *args, slug=slug, **kwargs)

    return wrapped


class IsOrganizer(BasePermission):
    """The API's default: organizers only, and under /challenges/<slug>/ only those the user
    organizes (viewers read)."""

    message = "Only organizers can use this endpoint."

    def has_permission(self, request, view) -> bool:
        if not is_organizer(request.user):
            return False
        kwargs = getattr(view, "kwargs", {})
        # Nested endpoints name their challenge as challenge_slug, a challenge's own as slug.
        slug = kwargs.get("challenge_slug") or kwargs.get("slug")
        if slug is not None:
            challenge = get_object_or_404(Challenge, slug=slug)
            check_challenge(request.user, challenge, write=is_write(request))
        return True

    def has_object_permission(self, request, view, obj) -> bool:
        deleting = isinstance(obj, Challenge) and request.method == "DELETE"
        if deleting and not may_delete(request.user, obj):
            raise PermissionDenied("Only the challenge's owner can delete it.")
        return True


class ApiDocsPermission(BasePermission):
    """The API's schema and docs: organizers only, unless FOLEY_PUBLIC_API_DOCS opens them."""

    message = "The API documentation is for organizers."

    def has_permission(self, request, view) -> bool:
        from django.conf import settings

        return settings.FOLEY_PUBLIC_API_DOCS or is_organizer(request.user)


def roles(request: HttpRequest) -> dict:
    """Template context: what the navigation may show."""
    return {"is_organizer": is_organizer(getattr(request, "user", None))}
