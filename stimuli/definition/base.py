"""The definition's sections that stimuli owns: the challenge itself, its clip spec, categories
and tracks, its schedule and limits, and the objective stage."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from pydantic import AfterValidator, Field

from ..errors import Refused
from ..models import CLIP_SPEC_FIELDS, Category, Challenge, Clip, ObjectiveSettings, System, Track
from ..objective import config
from ..services import clip_spec_refusal
from ..submissions.models import ChallengeSchedule
from ..submissions.schedule import ORDER as DATES
from ..submissions.schedule import set_schedule
from .fields import section_model, validated, values_of
from .sections import Change, Section, Strict, register


def _schedule(challenge: Challenge) -> ChallengeSchedule:
    # Read without storing: a stored schedule is what opens a challenge's teams' pages (the
    # home page links them), and reading the file (the challenge page shows it) must not.
    found = ChallengeSchedule.objects.filter(challenge=challenge).first()
    return found or ChallengeSchedule(challenge=challenge)


# --- The top of the file: what the challenge is called and where it lives.


class Top(Strict):
    slug: str = Field(pattern=r"^[-a-zA-Z0-9_]+$", max_length=80)
    """The challenge's name in its addresses (/challenges/<slug>/): applying the file creates
    the challenge of this slug, or changes it."""
    name: str = Field(min_length=1, max_length=200)
    """The challenge's title on every page."""
    description: str = ""
    """A paragraph on the challenge's public page."""
    contact_email: str = ""
    """Where teams and volunteers write to the organizers; shown on the public pages."""
    time_zone: str = "UTC"
    """The time zone of the schedule's dates (an IANA name, like Asia/Tokyo or Etc/GMT+12 for
    Anywhere on Earth): a date written without an offset means this zone's."""


def _read_top(challenge: Challenge) -> dict:
    return {
        **values_of(challenge, ["slug", "name", "description", "contact_email"]),
        "time_zone": _schedule(challenge).time_zone,
    }


def _write_top(challenge: Challenge, value: dict) -> None:
    for name in ("name", "description", "contact_email"):
        setattr(challenge, name, value[name])
    validated(challenge)
    challenge.save(update_fields=["name", "description", "contact_email"])
    set_schedule(challenge, time_zone=value["time_zone"])


register(Section(key=None, annotation=Top, position=0, read=_read_top, write=_write_top))


# --- clip: the one format every clip is checked against and converted to.


Clip_ = section_model(
    "Clip",
    "The clip spec: every clip of the challenge (references, systems, anchors) has it.",
    Challenge,
    [],
    duration_s=(float, Field(4.0, gt=0, le=60, description="Seconds per clip.")),
    sample_rate=(int, Field(22_050, ge=8_000, le=192_000, description="Samples per second.")),
    channels=(int, Field(1, ge=1, le=2, description="1: mono, 2: stereo.")),
    bit_depth=(Literal[16, 24], Field(16, description="16 or 24 (PCM).")),
)
_CLIP_KEYS = dict(
    zip(["duration_s", "sample_rate", "channels", "bit_depth"], CLIP_SPEC_FIELDS, strict=True)
)


def _read_clip(challenge: Challenge) -> dict:
    return {key: getattr(challenge, name) for key, name in _CLIP_KEYS.items()}


def _write_clip(challenge: Challenge, value: dict) -> None:
    for key, name in _CLIP_KEYS.items():
        setattr(challenge, name, value[key])
    validated(challenge)
    challenge.save(update_fields=list(_CLIP_KEYS.values()))


def _clip_refusals(challenge: Challenge, changes: list[Change]) -> list[str]:
    refusal = clip_spec_refusal(challenge)
    return [f"clip: {refusal}"] if refusal else []


register(
    Section(
        key="clip",
        annotation=Clip_,
        position=10,
        read=_read_clip,
        write=_write_clip,
        refusals=_clip_refusals,
        default=Field(default_factory=Clip_),
    )
)


# --- categories and tracks: lists whose items are named by their slug and code.


class CategoryItem(Strict):
    """A category: its clips sit in a folder of this slug in every upload."""

    slug: str = Field(pattern=r"^[-a-zA-Z0-9_]+$", max_length=80)
    """As the data's folders spell it (dog_bark)."""
    name: str = Field(min_length=1, max_length=120)
    """As pages show it (Dog bark)."""


class TrackItem(Strict):
    """A track: the rules a team's system is entered under."""

    code: str = Field(min_length=1, max_length=8)
    """Short code (A, B)."""
    name: str = Field(min_length=1, max_length=120)
    """As pages show it (Track A)."""
    description: str = ""
    """The track's rules in a sentence, shown beside its name."""
    external_data_allowed: bool = False
    """Whether systems may use data beyond the development set and pre-trained models."""


def _once(key: str, what: str):
    def check(items: list) -> list:
        seen = [getattr(item, key) for item in items]
        twice = sorted({value for value in seen if seen.count(value) > 1})
        if twice:
            raise ValueError(f"each {what} once: {', '.join(twice)} given twice")
        return items

    return AfterValidator(check)


Categories = Annotated[
    list[CategoryItem],
    Field(min_length=1, description="The categories, in the order pages list them."),
    _once("slug", "category"),
]
Tracks = Annotated[
    list[TrackItem],
    Field(min_length=1, description="The tracks systems are entered under."),
    _once("code", "track"),
]


def _read_categories(challenge: Challenge) -> list[dict]:
    return [
        {"slug": c.slug, "name": c.name} for c in challenge.categories.order_by("position", "id")
    ]


def _write_categories(challenge: Challenge, value: list[dict]) -> None:
    existing = {c.slug: c for c in challenge.categories.all()}
    wanted = {item["slug"] for item in value}
    Category.objects.filter(challenge=challenge).exclude(slug__in=wanted).delete()
    for position, item in enumerate(value):
        category = existing.get(item["slug"]) or Category(challenge=challenge, slug=item["slug"])
        category.name, category.position = item["name"], position
        validated(category)
        category.save()


def _category_refusals(challenge: Challenge, changes: list[Change]) -> list[str]:
    removed = _removed(changes, "categories")
    refusals = []
    for slug in removed:
        clips = Clip.objects.filter(challenge=challenge, category__slug=slug).count()
        if clips:
            refusals.append(
                f"categories[{slug}]: cannot be removed: {clips:,} clips are filed under it"
            )
    added = _added(changes, "categories")
    if added and challenge.phase != Challenge.Phase.SETUP:
        refusals.append(
            f"categories: {', '.join(added)} cannot be added once the objective stage has begun"
        )
    return refusals


def _removed(changes: list[Change], key: str) -> list[str]:
    names = {c.path[len(key) + 1 :].split("]")[0] for c in changes if c.path.startswith(key + "[")}
    return sorted(n for n in names if all(c.new is None for c in changes if f"[{n}]" in c.path))


def _added(changes: list[Change], key: str) -> list[str]:
    names = {c.path[len(key) + 1 :].split("]")[0] for c in changes if c.path.startswith(key + "[")}
    return sorted(n for n in names if all(c.old is None for c in changes if f"[{n}]" in c.path))


def _read_tracks(challenge: Challenge) -> list[dict]:
    return [
        values_of(t, ["code", "name", "description", "external_data_allowed"])
        for t in challenge.tracks.order_by("code")
    ]


def _write_tracks(challenge: Challenge, value: list[dict]) -> None:
    existing = {t.code: t for t in challenge.tracks.all()}
    Track.objects.filter(challenge=challenge).exclude(
        code__in=[item["code"] for item in value]
    ).delete()
    for item in value:
        track = existing.get(item["code"]) or Track(challenge=challenge, code=item["code"])
        for name in ("name", "description", "external_data_allowed"):
            setattr(track, name, item[name])
        validated(track)
        track.save()


def _track_refusals(challenge: Challenge, changes: list[Change]) -> list[str]:
    refusals = []
    for code in _removed(changes, "tracks"):
        systems = System.objects.filter(challenge=challenge, track__code=code).count()
        if systems:
            refusals.append(f"tracks[{code}]: cannot be removed: {systems} systems are entered")
    return refusals


def _sorted_tracks(value: list[dict], _whole: dict) -> list[dict]:
    return sorted(value, key=lambda item: item["code"])


register(
    Section(
        key="categories",
        annotation=Categories,
        position=20,
        read=_read_categories,
        write=_write_categories,
        refusals=_category_refusals,
        keyed="slug",
    )
)
register(
    Section(
        key="tracks",
        annotation=Tracks,
        position=30,
        read=_read_tracks,
        write=_write_tracks,
        refusals=_track_refusals,
        keyed="code",
        normalise=_sorted_tracks,
    )
)


# --- schedule: the phases' dates and the limits on what teams submit.

SCHEDULE_FIELDS = [
    *DATES,
    "review_days",
    "review_code_suffixes",
    "review_file_max_bytes",
    "review_fix_max_bytes",
    "self_registration",
    "audio_allowed",
    "systems_per_track",
    "submissions_per_day",
    "archive_max_bytes",
    "compute_budget_s",
    "evaluation_clips_per_category",
    "examples_per_category",
]
Schedule = section_model(
    "Schedule",
    "The challenge's dates (the server's clock decides each) and the limits on what teams submit.",
    ChallengeSchedule,
    SCHEDULE_FIELDS,
    described={
        "registration_opens": "When registration starts, on the timeline teams see (null: "
        "not shown).",
        "development_opens": "Submissions are accepted from then (null: at once).",
        "submission_deadline": "No new version after it; only code fixes, for the review "
        "window's days (null: no deadline).",
        "evaluation_opens": "When the evaluation starts, on the timeline teams see (null: not "
        "shown).",
        "listening_opens": "When the listening test opens, on the timeline teams see (null: "
        "not shown).",
        "results_published": "When the results are published, on the timeline teams see "
        "(null: not shown).",
        "systems_per_track": "Systems a team may enter in each track (DCASE 2023: 4).",
        "submissions_per_day": "Versions a team may submit a day, counted in the time zone.",
        "archive_max_bytes": "The largest a submitted archive may be, in bytes (at most the "
        "site's FOLEY_GENERATOR_MAX_BYTES).",
        "examples_per_category": "Example clips per category each submitted version generates "
        "for its check (1 to 20).",
    },
)


def _in_zone(value: Any, zone: ZoneInfo) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return value.astimezone(zone).isoformat()


def _read_schedule(challenge: Challenge) -> dict:
    schedule = _schedule(challenge)
    values = values_of(schedule, SCHEDULE_FIELDS)
    zone = ZoneInfo(schedule.time_zone)
    return {k: _in_zone(v, zone) if k in DATES else v for k, v in values.items()}


def _normalise_schedule(value: dict, whole: dict) -> dict:
    try:
        zone = ZoneInfo(whole["time_zone"])
    except (KeyError, ValueError):
        return value  # refused by the top's own check, by name
    return {k: _in_zone(v, zone) if k in DATES else v for k, v in value.items()}


def _write_schedule(challenge: Challenge, value: dict) -> None:
    dates = {k: dt.datetime.fromisoformat(v) if v else None for k, v in value.items() if k in DATES}
    set_schedule(challenge, **{**value, **dates})


register(
    Section(
        key="schedule",
        annotation=Schedule,
        position=40,
        read=_read_schedule,
        write=_write_schedule,
        default=Field(default_factory=Schedule),
        normalise=_normalise_schedule,
    )
)


# --- objective: embeddings, FAD and KAD, finalists and medoids.

OBJECTIVE_FIELDS = [
    f.name for f in ObjectiveSettings._meta.get_fields() if f.name not in ("id", "challenge")
]
Objective = section_model(
    "Objective",
    "How the objective stage runs: the embedding model whose FAD picks the finalists, the "
    "league's further models, the finalists per track and the medoids per finalist and "
    "category (k-means).",
    ObjectiveSettings,
    OBJECTIVE_FIELDS,
    described={
        "fad_model_options": 'The FAD model\'s options, e.g. {"preset": "dcase2023"} for '
        "VGGish as the DCASE 2023 pipeline ran it; {}: the model's defaults.",
        "medoid_model": "The embedding model k-means clusters each finalist's clips by: a "
        "built-in (vggish, openl3, logmel) or the import path of a HEAR module.",
        "medoid_weights": "The medoid model's weights file; empty: the model's default file.",
        "finalists_per_track": "Systems per track, best FAD first, that go on to the "
        "listening test (DCASE 2023: 4).",
        "medoids_per_category": "Clusters (k of k-means), hence medoids, per finalist and "
        "category: the listening test's stimuli (DCASE 2023: 20).",
        "kmeans_seed": "The seed of k-means, so that the medoids can be chosen again.",
        "kmeans_n_init": "k-means runs from different starts; the best is kept.",
    },
)


def _read_objective(challenge: Challenge) -> dict:
    return values_of(config.objective_settings(challenge), OBJECTIVE_FIELDS)


def _write_objective(challenge: Challenge, value: dict) -> None:
    try:
        config.set_models(challenge, **value)
    except ValidationError as exc:
        raise Refused([f"{k}: {m}" for k, ms in exc.message_dict.items() for m in ms]) from None


def _objective_refusals(challenge: Challenge, changes: list[Change]) -> list[str]:
    if challenge.phase in (Challenge.Phase.LISTENING, Challenge.Phase.PUBLISHED):
        return [
            "objective: cannot change once the listening test is open: its stimuli are the "
            "finalists and medoids these settings chose"
        ]
    return []


register(
    Section(
        key="objective",
        annotation=Objective,
        position=50,
        read=_read_objective,
        write=_write_objective,
        refusals=_objective_refusals,
        default=Field(default_factory=Objective),
    )
)
