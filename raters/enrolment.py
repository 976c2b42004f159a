"""Who rates: participants and organizers by account, invited listeners by link, crowd workers from
the recruiting platform (with the run's completion code), consent and instructions."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from stimuli.models import Challenge, Team
from stimuli.submissions.selectors import team_of
from stimuli.submissions.teams import join

from . import selectors, sessions
from .errors import ListeningError
from .models import ListeningTest, Rater, Rating


def crowd_warning(challenge: Challenge) -> str:
    """What the organizer must know before handing out the crowd link ("" when all is set)."""
    if selectors.listening_test(challenge).completion_url:
        return ""
    return (
        "No completion URL is set: crowd workers will see the completion code on the last page "
        "but are not sent back to the recruiting platform. Set the study's completion URL "
        "before handing out the crowd link."
    )


def completion_code(test: ListeningTest) -> str:
    """The run's completion code: the recruiting platform's own when the completion URL carries
    one (Prolific issues it, and pays by it), else the test's."""
    given = dict(parse_qsl(urlsplit(test.completion_url).query)).get("cc", "")
    return given or test.completion_code


def completion_earned(rater: Rater) -> bool:
    """Whether a crowd worker gets the completion code: only for answers the server accepted.
    A worker given nothing to rate (a full test) is asked to return the study instead."""
    return Rating.objects.filter(trial__session__rater=rater).exists()


def completion_link(test: ListeningTest) -> str:
    """The completion URL, with the run's code added as `cc` when it carries none."""
    if not test.completion_url:
        return ""
    parts = urlsplit(test.completion_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "cc" for key, _ in query):
        return test.completion_url
    query.append(("cc", test.completion_code))
    return urlunsplit(parts._replace(query=urlencode(query)))


# --- Enrolment -----------------------------------------------------------------------------------


def _new_rater(
    challenge: Challenge,
    *,
    unless: Q | None = None,
    existing_ok: Callable[[Rater], Rater] = lambda rater: rater,
    **fields,
) -> Rater:
    """A rater with the next enrolment index (the test's row is locked while it is taken).

    With `unless`, the challenge's rater matching it is passed to `existing_ok` instead (which
    returns it or refuses), looked up under the lock: a link opened twice at once enrols one
    rater, and the second opening is held to the same rule as a later one.
    """
    with transaction.atomic():
        ListeningTest.objects.select_for_update(no_key=True).get(
            pk=selectors.listening_test(challenge).pk
        )
        if unless is not None:
            existing = Rater.objects.filter(unless, challenge=challenge).first()
            if existing is not None:
                return existing_ok(existing)
        last = Rater.objects.filter(challenge=challenge).aggregate(n=Max("index"))["n"]
        rater = Rater(
            challenge=challenge, index=(last or 0) + 1 if last is not None else 0, **fields
        )
        # The database's unique constraints answer races; full_clean's copy of them would turn
        # one into a ValidationError instead of the IntegrityError the callers handle.
        rater.full_clean(exclude=["user", "team"], validate_constraints=False)
        rater.save()
    return rater


def enrol_user(
    challenge: Challenge,
    user,
    *,
    team: Team | None = None,
    kind: str = Rater.Kind.PARTICIPANT,
    diversity_role: bool = False,
) -> Rater:
    """The user's rater in this challenge, created on first use. A member of a team rates as
    one: the team comes from the membership, the one record of which team a person is in."""
    if team is not None and team.challenge_id != challenge.pk:
        raise ListeningError("The team belongs to another challenge.")
    member_of = team_of(user, challenge)
    if team is not None and member_of is not None and member_of.pk != team.pk:
        raise ListeningError(f"{user} is a member of team {member_of.name}, not {team.name}.")
    team = team or member_of
    existing = Rater.objects.filter(challenge=challenge, user=user).first()
    if existing:
        return existing
    try:
        return _new_rater(
            challenge,
            unless=Q(user=user),
            user=user,
            team=team,
            kind=kind,
            diversity_role=diversity_role,
        )
    except IntegrityError:  # enrolled concurrently
        return Rater.objects.get(challenge=challenge, user=user)


def create_participant_account(
    challenge: Challenge, *, username: str, password: str, team: Team | None
) -> Rater:
    """A login for a member of a team (their ratings of their own team are removed at scoring):
    the account is made a member of the team, so its team pages and its ratings agree."""
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise ListeningError(f"The user name {username!r} is taken.")
    with transaction.atomic():
        user = User.objects.create_user(username=username, password=password)
        if team is not None:
            join(team, user)
        return enrol_user(challenge, user, team=team)


def enrol_organizer_for_diversity(challenge: Challenge, user) -> Rater:
    """An organizer who rates diversity only; one who rated quality and fit cannot."""
    rater = Rater.objects.filter(challenge=challenge, user=user).first()
    if rater is None:
        return enrol_user(challenge, user, kind=Rater.Kind.ORGANIZER, diversity_role=True)
    if rater.sessions.exists():
        raise ListeningError(
            "This account rated quality and fit, so it cannot rate diversity.", 409
        )
    if not rater.diversity_role:
        rater.diversity_role = True
        rater.save(update_fields=["diversity_role"])
    return rater


def invite(challenge: Challenge, *, label: str = "", team: Team | None = None) -> Rater:
    """An outside listener, who comes in through the link carrying `rater.access_key`."""
    return _new_rater(challenge, kind=Rater.Kind.INVITED, label=label[:120], team=team)


CROWD_RETURN = (
    "You have not been enrolled and nothing was recorded. Please return your submission on the "
    "recruiting platform (on Prolific: open the study and choose to return it) so that your "
    "place is freed; returning is not held against you."
)


# Arrivals not yet at work (no example heard) are admitted, within a short window, up to this
# many times the sessions still needed, and never fewer than ADMIT_AT_LEAST: a burst of
# throw-away participant ids is turned away without touching the places, which only listening
# holds (sessions.holding_places), and the window passes in minutes.
ADMISSION_WINDOW = timedelta(minutes=2)
ADMIT_PER_PLACE = 2
ADMIT_AT_LEAST = 10


def network_of(address: str) -> str:
    """The network an address belongs to (IPv4 /24, IPv6 /64): one household, office or
    hosting block, where a farm's addresses cluster. "" for no address."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return ""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    prefix = 24 if ip.version == 4 else 64
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def crowd_refusal(challenge: Challenge, test: ListeningTest, *, network: str = "") -> str:
    """Why a new crowd worker cannot start now ("" when they can): a closed test, one where
    every sound already has the ratings it needs, a burst of arrivals that have not begun
    listening, or a network that brought its share of participant ids already — each refused
    at the link, before consent."""
    if not test.is_open:
        return f"This study is closed. {CROWD_RETURN}"
    need = sessions.category_need(challenge)
    if not any(n > 0 for n in need.values()):
        return f"This study is full: every sound has the ratings it needs. {CROWD_RETURN}"
    crowd = Rater.objects.filter(challenge=challenge, kind=Rater.Kind.CROWD)
    limit = settings.FOLEY_CROWD_IDS_PER_NETWORK
    if network and limit and crowd.filter(network=network).count() >= limit:
        return (
            f"This study has taken as many participants from your network as it can ({limit}). "
            f"{CROWD_RETURN}"
        )
    arriving = (
        crowd.filter(created_at__gte=timezone.now() - ADMISSION_WINDOW, finished_at__isnull=True)
        .exclude(sessions__familiarized_at__isnull=False)
        .count()
    )
    if arriving >= max(ADMIT_AT_LEAST, ADMIT_PER_PLACE * sum(need.values())):
        minutes = int(ADMISSION_WINDOW.total_seconds() // 60)
        return (
            "Many people are starting this study right now. Nothing was recorded: please open "
            f"the study's link again in {minutes} minutes."
        )
    return ""


def enrol_crowd(
    challenge: Challenge,
    crowd_key: str,
    *,
    participant_id: str,
    study_id: str = "",
    session_id: str = "",
    address: str = "",
    user=None,
) -> Rater:
    """A crowd worker arriving from the recruiting platform (e.g. Prolific's PROLIFIC_PID) from
    `address` (the client's, as the proxy saw it). A worker logged in to an account of a team
    of the challenge rates as that team's member: their ratings of it are self-ratings."""
    test = selectors.listening_test(challenge)
    if crowd_key != test.crowd_key:
        raise ListeningError("This link is not valid.", 404)
    participant_id = participant_id.strip()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", participant_id):
        raise ListeningError("The link lacks a valid participant id (PROLIFIC_PID).")
    session_id = session_id.strip()[:64]

    def returning(existing: Rater) -> Rater:
        # The link is the same for every worker, so a participant id alone would let anyone
        # who learns one open that worker's session. From another browser, a worker comes back
        # with the recruiting platform's session id of their first visit too. Two openings at
        # once are held to this rule as well: the one that lost the race is a returning one.
        if existing.crowd_session_id and session_id == existing.crowd_session_id:
            return existing
        raise ListeningError(
            "This participant has started the test already. Please reopen the study's link "
            "from the recruiting platform, in the browser you began in.",
            409,
        )

    existing = Rater.objects.filter(challenge=challenge, participant_id=participant_id).first()
    if existing:
        return returning(existing)
    if test.crowd_study_id and study_id.strip() != test.crowd_study_id:
        raise ListeningError(
            "This link belongs to another study than the one it was opened from. Please open "
            f"the study's link from the recruiting platform. {CROWD_RETURN}",
            409,
        )
    network = network_of(address)
    team = team_of(user, challenge) if user is not None and user.is_authenticated else None
    # Before any row: the worker was never here.
    if refusal := crowd_refusal(challenge, test, network=network):
        raise ListeningError(refusal, 409)
    try:
        return _new_rater(
            challenge,
            unless=Q(participant_id=participant_id),
            existing_ok=returning,
            kind=Rater.Kind.CROWD,
            participant_id=participant_id,
            study_id=study_id.strip()[:64],
            crowd_session_id=session_id,
            network=network,
            team=team,
        )
    except IntegrityError:  # the (challenge, participant id) constraint decided the race
        return returning(Rater.objects.get(challenge=challenge, participant_id=participant_id))


def record_consent(rater: Rater) -> None:
    if rater.consented_at is None:
        Rater.objects.filter(pk=rater.pk, consented_at__isnull=True).update(
            consented_at=timezone.now()
        )
        rater.refresh_from_db()


def record_instructions(rater: Rater) -> None:
    if rater.consented_at is None:
        raise ListeningError("Consent comes first.", 409)
    if rater.instructed_at is None:
        Rater.objects.filter(pk=rater.pk, instructed_at__isnull=True).update(
            instructed_at=timezone.now()
        )
        rater.refresh_from_db()
