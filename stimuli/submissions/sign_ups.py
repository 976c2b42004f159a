"""Sign-up and self-registration that no one can use to learn which usernames or addresses have
accounts. The form checks only what says nothing about other accounts (the username's form, the
address's, the password's strength, the invitation link, the team's name) and always answers
the same: "a link was sent". Then, by e-mail to the address given:

- no account has the address: a link to confirm. Following it and typing the form's password
  again creates the account; only then, and only to the owner of the address, is a username
  taken said, with a field to choose another. The password is asked again so that no one can
  make an account in someone else's name whose password they know: the owner of an address who
  did not fill in the form cannot complete it, and whoever did cannot without the e-mail;
- an account has it: a note that someone tried to sign up with it, and where to log in or reset
  the password. Nothing is kept.

The password is hashed in both cases, so the time the answer takes tells nothing either."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password, make_password
from django.core.mail import EmailMessage
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from ..errors import Refused
from ..models import Challenge
from ..services import create_team, team_name_problems
from . import selectors, teams
from .models import PendingSignUp, TeamRegistration

logger = logging.getLogger(__name__)

LINK_HOURS = 24


def request_sign_up(token: str, *, username: str, email: str, password: str) -> None:
    """An invitation link's form: refused only for what says nothing about other accounts."""
    invitation = teams.open_invitation(token)
    if problems := teams.account_problems(username, email, password):
        raise Refused(problems)
    pending = PendingSignUp(
        kind=PendingSignUp.Kind.JOIN,
        challenge=invitation.team.challenge,
        invitation=invitation,
        username=username.strip(),
        email=email.strip(),
    )
    _send_link(pending, password, team_name=invitation.team.name)


def request_registration(
    challenge: Challenge,
    *,
    team_name: str,
    affiliation: str,
    username: str,
    email: str,
    password: str,
) -> None:
    """The self-registration form, answered like `request_sign_up`. A team's name is checked
    here: it is no account's, and teams are listed by name on the results."""
    if not selectors.schedule(challenge).self_registration:
        raise Refused("Teams of this challenge are registered by its organizers.")
    problems = teams.account_problems(username, email, password)
    problems += [p.replace("name: ", "team: ", 1) for p in team_name_problems(challenge, team_name)]
    if problems:
        raise Refused(problems)
    pending = PendingSignUp(
        kind=PendingSignUp.Kind.REGISTER,
        challenge=challenge,
        team_name=team_name,
        affiliation=affiliation,
        username=username.strip(),
        email=email.strip(),
    )
    _send_link(pending, password, team_name=team_name)


def _send_link(pending: PendingSignUp, password: str, *, team_name: str) -> None:
    pending.password = make_password(password)  # in either case below: the time is the same
    now = timezone.now()
    PendingSignUp.objects.filter(expires_at__lte=now).delete()  # the links no one followed
    context = {
        "challenge": pending.challenge,
        "team_name": team_name,
        "register": pending.kind == PendingSignUp.Kind.REGISTER,
        "site_url": settings.FOLEY_SITE_URL,
        "hours": LINK_HOURS,
    }
    if get_user_model().objects.filter(email__iexact=pending.email).exists():
        context["reset_url"] = settings.FOLEY_SITE_URL + reverse("password_reset")
        context["login_url"] = settings.FOLEY_SITE_URL + reverse("login")
        _mail(pending.email, "someone_tried", context)
        return
    pending.expires_at = now + dt.timedelta(hours=LINK_HOURS)
    pending.save()
    context["confirm_url"] = confirm_url(pending)
    _mail(pending.email, "confirm", context)


def confirm_url(pending: PendingSignUp) -> str:
    path = reverse("teams:confirm", args=[pending.challenge.slug, pending.token])
    return settings.FOLEY_SITE_URL + path


def _mail(to: str, template: str, context: dict) -> None:
    subject, _, body = render_to_string(f"submissions/email/{template}.txt", context).partition(
        "\n"
    )
    try:
        EmailMessage(subject.strip(), body.strip() + "\n", settings.DEFAULT_FROM_EMAIL, [to]).send()
    except Exception:  # the answer must not differ: the person can ask again
        logger.exception("sign-up e-mail not sent")


def open_pending(slug: str, token: str) -> PendingSignUp:
    """A confirmation link's sign-up; refused, saying why, when unknown or too old."""
    pending = (
        PendingSignUp.objects.select_related("challenge", "invitation__team")
        .filter(token=token, challenge__slug=slug)
        .first()
    )
    if pending is None or pending.expires_at <= timezone.now():
        raise Refused(
            f"This confirmation link is not valid: it was used already, or it is older than "
            f"{LINK_HOURS} hours. Fill in the form again for a new one.",
            status=410,
        )
    return pending


def confirm(slug: str, token: str, *, password: str, username: str = "", team_name: str = ""):
    """The account the link was sent for, made now if `password` is the form's; a username or
    team name taken since the form (or before it: the form did not say) may be changed here.
    Every problem at once, and nothing stored unless all is well."""
    open_pending(slug, token)
    User = get_user_model()
    with transaction.atomic():
        pending = PendingSignUp.objects.select_for_update().get(token=token)
        username = username.strip() or pending.username
        team_name = team_name.strip() or pending.team_name
        problems = []
        if not check_password(password, pending.password):
            problems.append("password: type the password you chose in the form")
        problems += teams.account_problems(username, pending.email, None)
        problems += teams.taken_problems(username, pending.email)
        if pending.kind == PendingSignUp.Kind.REGISTER:
            if not selectors.schedule(pending.challenge).self_registration:
                problems.append("Teams of this challenge are registered by its organizers now.")
            problems += [
                p.replace("name: ", "team: ", 1)
                for p in team_name_problems(pending.challenge, team_name)
            ]
        if problems:
            raise Refused(problems)
        user = User(username=username, email=pending.email, password=pending.password)
        user.save()
        if pending.kind == PendingSignUp.Kind.JOIN:
            invitation = teams.use_invitation(pending.invitation.token)
            teams.join(invitation.team, user)
        else:
            team = create_team(pending.challenge, name=team_name, affiliation=pending.affiliation)
            TeamRegistration.objects.create(team=team, requested_by=user)
            teams.join(team, user)
        pending.delete()
    return user
