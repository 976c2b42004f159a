"""Team accounts: organizers create teams and invitation links, people sign up from a link or
register a team for the organizers to approve. Membership is the one record of which team a
person is in."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.validators import ASCIIUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from ..errors import Conflict, Refused
from ..models import Challenge, System, Team
from ..names import name_key
from ..services import create_team, team_name_problems
from . import selectors
from .models import TeamInvitation, TeamMembership, TeamRegistration

INVITATION_DAYS = 14
INVITATION_USES = 5
MAX_INVITATION_USES = 50


def create_invitation(
    team: Team, *, days: int = INVITATION_DAYS, uses: int = INVITATION_USES, by=None
) -> TeamInvitation:
    """A link that makes at most `uses` people members of `team`, for `days` days."""
    problems = []
    if not 1 <= days <= 365:
        problems.append("days: an invitation lasts 1 to 365 days")
    if not 1 <= uses <= MAX_INVITATION_USES:
        problems.append(f"uses: an invitation is for 1 to {MAX_INVITATION_USES} people")
    if problems:
        raise Refused(problems)
    return TeamInvitation.objects.create(
        team=team,
        expires_at=timezone.now() + dt.timedelta(days=days),
        max_uses=uses,
        created_by=by if by is not None and by.is_authenticated else None,
    )


def create_team_with_invitation(
    challenge: Challenge, *, name: str, affiliation: str = "", by=None
) -> TeamInvitation:
    with transaction.atomic():
        try:
            team = create_team(challenge, name=name, affiliation=affiliation)
        except ValidationError as exc:
            raise Refused([f"{k}: {m}" for k, ms in exc.message_dict.items() for m in ms]) from None
        return create_invitation(team, by=by)


def revoke_invitation(invitation: TeamInvitation, *, by) -> TeamInvitation:
    """The link stops working at once; the members it made stay members."""
    TeamInvitation.objects.filter(pk=invitation.pk, revoked=False).update(
        revoked=True, revoked_at=timezone.now(), revoked_by=by
    )
    invitation.refresh_from_db()
    return invitation


def invitation_url(invitation: TeamInvitation) -> str:
    """The link to share, at the site's configured address (not the Host of the request that
    shows it)."""
    path = reverse("teams:join", args=[invitation.team.challenge.slug, invitation.token])
    return settings.FOLEY_SITE_URL + path


def live_invitations(team: Team):
    """The team's links that still work, newest first."""
    return team.invitations.filter(
        revoked=False, expires_at__gt=timezone.now(), uses__lt=F("max_uses")
    ).order_by("-created_at")


def _refuse_dead(invitation: TeamInvitation | None) -> None:
    # A page that says why, so the person asks for a new link rather than trying again. 410:
    # the link existed and will not work again.
    if invitation is None:
        raise Refused(
            "This invitation link is not valid. Ask your team's organizer for a new one.",
            status=404,
        )
    if invitation.revoked:
        raise Refused(
            "This invitation link was withdrawn by the organizers. Ask them for a new one.",
            status=410,
        )
    if invitation.expires_at <= timezone.now():
        raise Refused(
            "This invitation link has expired. Ask the organizers for a new one.", status=410
        )
    if invitation.uses >= invitation.max_uses:
        raise Refused(
            f"This invitation link has been used by the {invitation.max_uses} people it was "
            "for. Ask the organizers for a new one.",
            status=410,
        )


def open_invitation(token: str) -> TeamInvitation:
    """The invitation of a link; refused, saying why, when it is unknown, revoked, expired or
    used up."""
    invitation = (
        TeamInvitation.objects.select_related("team__challenge").filter(token=token).first()
    )
    _refuse_dead(invitation)
    return invitation


def use_invitation(token: str) -> TeamInvitation:
    """Take one use of the link, in the caller's transaction: the row is locked, so two people
    signing up at once cannot both take its last use."""
    invitation = (
        TeamInvitation.objects.select_for_update(of=("self",))
        .select_related("team__challenge")
        .filter(token=token)
        .first()
    )
    _refuse_dead(invitation)
    TeamInvitation.objects.filter(pk=invitation.pk).update(uses=F("uses") + 1)
    invitation.uses += 1
    return invitation


def account_problems(username: str, email: str, password: str | None) -> list[str]:
    """Every problem of a new account's details that says nothing about other accounts: the
    username's form, the address's, the password's strength (None: a password checked before
    and kept as its hash)."""
    problems = []
    User = get_user_model()
    if not username.strip():
        problems.append("username: choose a user name")
    else:
        # ASCII only: a username in letters of another script could pass for someone's.
        try:
            ASCIIUsernameValidator()(username)
        except ValidationError as exc:
            problems.extend(f"username: {m}" for m in exc.messages)
    try:
        validate_email(email)
    except ValidationError:
        problems.append("e-mail: enter a valid e-mail address (it is where password resets go)")
    if password is not None:
        try:
            password_validation.validate_password(password, User(username=username, email=email))
        except ValidationError as exc:
            problems.extend(f"password: {m}" for m in exc.messages)
    return problems


def taken_problems(username: str, email: str) -> list[str]:
    """Which of the details another account has. Told only to the owner of the address (after
    the e-mail link, stimuli/submissions/sign_ups.py) or to trusted callers, never to a form."""
    User = get_user_model()
    problems = []
    # Case aside, "0rganizer" or "organlzer" would pass for "organizer": names that share a
    # skeleton (stimuli/names.py) are one. Read only when an account is about to be made.
    key = name_key(username)
    if User.objects.filter(username__iexact=username.strip()).exists() or any(
        name_key(other) == key for other in User.objects.values_list("username", flat=True)
    ):
        problems.append(f"username: {username!r} is taken: choose another")
    if email and User.objects.filter(email__iexact=email.strip()).exists():
        problems.append(
            "e-mail: an account with this address exists: log in (or reset its password), "
            "then follow the invitation link"
        )
    return problems


def _check_account(username: str, email: str, password: str) -> list[str]:
    problems = account_problems(username, email, password)
    return problems + [p for p in taken_problems(username, email) if p not in problems]


def join(team: Team, user) -> TeamMembership:
    """Make `user` a member of `team`; refused if they are in another team of the challenge."""
    existing = selectors.membership(user, team.challenge)
    if existing is not None:
        if existing.team_id == team.pk:
            return existing
        raise Conflict(
            f"You are already a member of team {existing.team.name} in this challenge; "
            "a person belongs to one team."
        )
    try:
        with transaction.atomic():
            return TeamMembership.objects.create(
                challenge_id=team.challenge_id, team=team, user=user
            )
    except IntegrityError:  # joined another team at the same moment
        raise Conflict("You are already a member of a team in this challenge.") from None


def sign_up(token: str, *, username: str, email: str, password: str):
    """A new account from an invitation link, a member of the invitation's team; it takes one of
    the link's uses. For trusted callers (the demo, fixtures): it says what is taken. The pages
    go through sign_ups.request_sign_up, which does not."""
    open_invitation(token)
    if problems := _check_account(username, email, password):
        raise Refused(problems)
    User = get_user_model()
    with transaction.atomic():
        invitation = use_invitation(token)
        user = User.objects.create_user(username=username, email=email, password=password)
        join(invitation.team, user)
    return user


def accept_invitation(token: str, user) -> TeamMembership:
    """A signed-in person joins the invitation's team (a use of the link, unless they are in
    the team already)."""
    team = open_invitation(token).team
    existing = selectors.membership(user, team.challenge)
    if existing is not None:
        return join(team, user)  # the member it is, or the refusal of another team's
    with transaction.atomic():
        return join(use_invitation(token).team, user)


def register_team(
    challenge: Challenge,
    *,
    team_name: str,
    affiliation: str,
    username: str,
    email: str,
    password: str,
):
    """Self-registration: a team waiting for approval and its first member's account. For
    trusted callers, like `sign_up`; the page goes through sign_ups.request_registration."""
    if not selectors.schedule(challenge).self_registration:
        raise Refused("Teams of this challenge are registered by its organizers.")
    problems = _check_account(username, email, password)
    problems += [p.replace("name: ", "team: ", 1) for p in team_name_problems(challenge, team_name)]
    if problems:
        raise Refused(problems)
    User = get_user_model()
    with transaction.atomic():
        user = User.objects.create_user(username=username, email=email, password=password)
        team = create_team(challenge, name=team_name, affiliation=affiliation)
        TeamRegistration.objects.create(team=team, requested_by=user)
        join(team, user)
    return user


def decide_registration(team: Team, *, approve: bool, by, reason: str = "") -> TeamRegistration:
    with transaction.atomic():
        registration = TeamRegistration.objects.select_for_update(no_key=True).get(team=team)
        if not approve and not reason.strip():
            raise Refused("Say why the team is refused; the team sees the reason.")
        registration.state = (
            TeamRegistration.State.APPROVED if approve else TeamRegistration.State.REFUSED
        )
        registration.reason = reason.strip()
        registration.decided_by = by
        registration.decided_at = timezone.now()
        registration.save()
    return registration


def set_release_audio(team: Team, system_ids: list[str]) -> list[System]:
    """The team's consent to its systems' listening-test audio going into the data release:
    exactly the systems in `system_ids` release theirs, the team's others do not. An id that is
    not one of the team's systems (another team's or none) is refused with nothing changed; the
    same words for both, so that the answer does not say whether another team's system exists."""
    problems, chosen = [], set()
    for raw in system_ids:
        try:
            chosen.add(int(raw))
        except (TypeError, ValueError):
            problems.append(f"system {raw!r}: not a system of your team")
    with transaction.atomic():
        systems = list(System.objects.select_for_update().filter(team=team).order_by("pk"))
        own = {s.pk for s in systems}
        problems += [f"system {pk}: not a system of your team" for pk in sorted(chosen - own)]
        if problems:
            raise Refused(problems)
        for system in systems:
            if system.release_audio != (system.pk in chosen):
                system.release_audio = system.pk in chosen
                system.save(update_fields=["release_audio"])
    return systems
