"""The demo's submission weeks: a challenge in its development phase, beside the organizer-run
demo challenge, with two teams whose members can sign in: one with a valid generator
submission (the baseline), one with a failing one (the baseline with a broken `generate`)."""

from __future__ import annotations

import datetime as dt
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from ..models import Challenge, Team
from ..permissions import name_owner
from ..services import create_challenge
from . import schedule, teams
from .baseline_archive import baseline_archive
from .models import Submission
from .services import Metadata, submit

TEAMS_DEMO_SLUG = "teams-demo"
MEMBER_PASSWORD = "foley-team-demo"
# The baseline with `generate` replaced by one whose clips are 100 samples long: refused.
BROKEN = (
    "\n\ndef generate(model, category, n, seed):\n    return np.zeros((n, 100), dtype=np.float32)\n"
)
DEMO_TEAMS = (
    ("Procedural Sounds", "ada", "Baseline", ""),
    ("Broken Tape", "ben", "Short takes", BROKEN),
)


@dataclass
class TeamsDemo:
    challenge: Challenge
    members: list[tuple[str, str, str]] = field(default_factory=list)  # team, user, password
    submissions: list[Submission] = field(default_factory=list)


def seed_teams_demo(organizer=None) -> TeamsDemo:
    """Create the demo's teams challenge once; later calls reset the members' passwords."""
    challenge = Challenge.objects.filter(slug=TEAMS_DEMO_SLUG).first()
    created = challenge is None
    if created:
        challenge = create_challenge(
            name="Teams demo (development phase)", slug=TEAMS_DEMO_SLUG, clip_duration_s=1.0
        )
        now = timezone.now()
        schedule.set_schedule(
            challenge,
            registration_opens=now - dt.timedelta(days=14),
            development_opens=now - dt.timedelta(days=7),
            submission_deadline=now + dt.timedelta(days=21),
            evaluation_opens=now + dt.timedelta(days=28),
            self_registration=True,
            evaluation_clips_per_category=100,
        )
        _development_set(challenge)
    if organizer is not None:
        name_owner(challenge, organizer)
    demo = TeamsDemo(challenge)
    User = get_user_model()
    for team_name, username, system, suffix in DEMO_TEAMS:
        team = Team.objects.filter(challenge=challenge, name=team_name).first()
        if team is None:
            invitation = teams.create_team_with_invitation(challenge, name=team_name)
            user = teams.sign_up(
                invitation.token,
                username=username,
                email=f"{username}@example.org",
                password=MEMBER_PASSWORD,
            )
            team = invitation.team
            archive = SimpleUploadedFile(
                f"{system.lower().replace(' ', '-')}.zip", baseline_archive(code_suffix=suffix)
            )
            meta = Metadata(
                system=system,
                track="A",
                licence="MIT",
                description="The platform's procedural baseline."
                if not suffix
                else "The baseline with a generate() that returns clips 100 samples long.",
            )
            demo.submissions.append(submit(team, user, meta, archive))
        else:
            user = User.objects.get(username=username)
            user.set_password(MEMBER_PASSWORD)
            user.save()
        demo.members.append((team_name, username, MEMBER_PASSWORD))
    return demo


def _development_set(challenge: Challenge) -> None:
    """Development clips (for FAD-dev) and the light logmel model, which needs no weights."""
    from ..demo import write_set
    from ..objective.config import set_models
    from ..uploads.imports import import_clips

    with tempfile.TemporaryDirectory(prefix="foley-teams-demo-") as tmp:
        root = write_set(Path(tmp) / "development", challenge, 8, 1, 0.0)
        import_clips(challenge, root, role="development")
    set_models(challenge, fad_model="logmel")
