"""Business actions on challenges, teams and systems, shared by pages, API and CLI."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from .models import LOOK_ALIKE_NAME, Category, Challenge, Clip, System, Team, Track
from .names import name_key, normalise_name
from .permissions import name_owner

# The DCASE 2023 Task 7 categories, slugs as the challenge's data folders spell them.
DEFAULT_CATEGORIES = [
    ("dog_bark", "Dog bark"),
    ("footstep", "Footstep"),
    ("gunshot", "Gunshot"),
    ("keyboard", "Keyboard"),
    ("moving_motor_vehicle", "Moving motor vehicle"),
    ("rain", "Rain"),
    ("sneeze_cough", "Sneeze/cough"),
]
DEFAULT_TRACKS = [
    ("A", "Track A", "External data and pre-trained models allowed.", True),
    ("B", "Track B", "Development set only; no external data.", False),
]


def clip_spec_refusal(challenge: Challenge) -> str | None:
    """Why the clip spec cannot change now, if it cannot: the clips already imported were
    checked against (or converted to) it. The API, the challenge's page and its definition file
    refuse in these words."""
    clips = Clip.objects.filter(challenge=challenge).count()
    if clips:
        return (
            f"the clip spec cannot change: {clips:,} clips were imported under it "
            "(remove them first)"
        )
    return None


@transaction.atomic
def create_challenge(
    *,
    name: str,
    slug: str,
    categories: list[tuple[str, str]] | None = None,
    tracks: list[tuple[str, str, str, bool]] | None = None,
    owner=None,
    **spec: object,
) -> Challenge:
    """A challenge with its categories and tracks (the DCASE 2023 Task 7 ones by default),
    owned by `owner` when given."""
    challenge = Challenge(name=name, slug=slug, **spec)
    challenge.full_clean()
    challenge.save()
    if owner is not None:
        name_owner(challenge, owner)
    for position, (cat_slug, cat_name) in enumerate(categories or DEFAULT_CATEGORIES):
        Category.objects.create(
            challenge=challenge, slug=cat_slug, name=cat_name, position=position
        )
    for code, track_name, description, external in tracks or DEFAULT_TRACKS:
        Track.objects.create(
            challenge=challenge,
            code=code,
            name=track_name,
            description=description,
            external_data_allowed=external,
        )
    return challenge


def team_name_problems(challenge: Challenge, name: str) -> list[str]:
    """Why `name` cannot be a new team's in `challenge`: empty, or like another team's."""
    if not normalise_name(name):
        return ["name: name the team"]
    if Team.objects.filter(challenge=challenge, name_key=name_key(name)).exists():
        return [f"name: {LOOK_ALIKE_NAME}"]
    return []


def create_team(challenge: Challenge, *, name: str, affiliation: str = "") -> Team:
    """A team, its name normalised (stimuli/names.py); refused when it looks like another's."""
    if problems := team_name_problems(challenge, name):
        raise ValidationError({"name": [p.removeprefix("name: ") for p in problems]})
    team = Team(challenge=challenge, name=name, affiliation=affiliation)
    team.full_clean()
    team.save()
    return team


def create_system(
    *,
    team: Team,
    track: Track,
    name: str,
    kind: str = System.Kind.AUDIO,
    release_audio: bool = False,
) -> System:
    if team.challenge_id != track.challenge_id:
        raise ValidationError("The team and the track belong to different challenges.")
    system = System(
        challenge_id=team.challenge_id,
        team=team,
        track=track,
        name=name,
        kind=kind,
        release_audio=release_audio,
    )
    system.full_clean()
    system.save()
    return system
