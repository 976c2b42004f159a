"""Who sees a team's pages: its members, and no one else (not another team, not a rater, not
an anonymous visitor). Every team page and the teams' API ask `team_member_required` or
`IsTeamMember`; the test of the URL configuration holds every route of the teams to it."""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from rest_framework.permissions import BasePermission

from ..models import Challenge
from ..permissions import may_read, may_write
from . import selectors


def team_member_required(view):
    """A page of one team: anonymous visitors log in first; anyone else who is not a member of
    a team of this challenge gets 403. The view gets `request.team`."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args, slug: str, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        challenge = get_object_or_404(Challenge, slug=slug)
        membership = selectors.membership(request.user, challenge)
        if membership is None:
            raise PermissionDenied("These pages are for the members of a team of this challenge.")
        request.challenge = challenge
        request.team = membership.team
        return view(request, *args, slug=slug, **kwargs)

    wrapped.team_scoped = True
    return wrapped


class IsTeamMemberOrOrganizer(BasePermission):
    """The teams' API: members act for their own team; the challenge's organizers read every
    team's submissions and may change them (writes need owner or organizer)."""

    message = "This endpoint is for the members of a team of this challenge and its organizers."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        challenge = get_object_or_404(Challenge, slug=view.kwargs["challenge_slug"])
        view.challenge = challenge
        view.team = selectors.team_of(user, challenge)
        view.organizer = view.team is None and may_read(user, challenge)
        if view.team is not None:
            return True
        if view.organizer:
            if request.method not in ("GET", "HEAD", "OPTIONS") and not may_write(user, challenge):
                raise PermissionDenied("Viewers of this challenge cannot change it.")
            return True
        return False
