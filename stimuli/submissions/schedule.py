"""Setting a challenge's dates and limits, and extending one team's deadline. Both change what
the deadline checks decide, so both run under the challenge lock those checks take."""

from __future__ import annotations

import datetime as dt
import itertools
from zoneinfo import ZoneInfo, available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from ..errors import Refused
from ..models import Challenge, Team
from .models import ChallengeSchedule, DeadlineExtension

ORDER = (
    "registration_opens",
    "development_opens",
    "submission_deadline",
    "evaluation_opens",
    "listening_opens",
    "results_published",
)


def lock_challenge(challenge_id: int) -> Challenge:
    """The challenge row, locked as every phase change locks it (see stimuli/phases.py)."""
    return Challenge.objects.select_for_update(no_key=True).get(pk=challenge_id)


def set_schedule(challenge: Challenge, **fields) -> ChallengeSchedule:
    """Set the challenge's dates (aware datetimes, or naive ones meaning the challenge's time
    zone) and limits; every problem is named at once and nothing is stored on a refusal."""
    problems = []
    zone = fields.get("time_zone")
    with transaction.atomic():
        lock_challenge(challenge.pk)
        schedule, _ = ChallengeSchedule.objects.get_or_create(challenge=challenge)
        if zone is not None and zone not in available_timezones():
            problems.append(f"time_zone: {zone!r} is not a time zone (like Europe/Paris)")
            fields.pop("time_zone")
        tz = ZoneInfo(fields.get("time_zone", schedule.time_zone))
        for name, value in fields.items():
            if not hasattr(schedule, name) or name in ("id", "challenge", "challenge_id"):
                problems.append(f"{name}: not a setting of the schedule")
                continue
            if isinstance(value, dt.datetime) and value.tzinfo is None:
                value = value.replace(tzinfo=tz)
            setattr(schedule, name, value)
        dates = [(n, getattr(schedule, n)) for n in ORDER if getattr(schedule, n) is not None]
        for (first, a), (second, b) in itertools.pairwise(dates):
            if a > b:
                problems.append(f"{second}: comes before {first}")
        # The web server in front and Django refuse a larger body before it is read
        # (deploy/nginx.conf, foley_platform/limits.py): a larger limit would promise what no
        # upload can reach.
        ceiling = settings.FOLEY_GENERATOR_MAX_BYTES
        if schedule.archive_max_bytes > ceiling:
            problems.append(
                f"archive_max_bytes: at most {ceiling:,} bytes on this site "
                "(FOLEY_GENERATOR_MAX_BYTES)"
            )
        try:
            schedule.full_clean()
        except ValidationError as exc:
            problems.extend(f"{k}: {m}" for k, ms in exc.message_dict.items() for m in ms)
        if problems:
            raise Refused(problems)
        schedule.save()
    return schedule


def extend_deadline(team: Team, *, until: dt.datetime, reason: str, by) -> DeadlineExtension:
    """A later deadline for one team, with the reason recorded for the other teams to trust."""
    if not reason.strip():
        raise Refused("reason: say why this team gets more time; the reason is recorded")
    if until.tzinfo is None:
        raise Refused("until: give the time with its time zone")
    with transaction.atomic():
        lock_challenge(team.challenge_id)
        return DeadlineExtension.objects.create(
            team=team, deadline=until, reason=reason.strip(), granted_by=by
        )
