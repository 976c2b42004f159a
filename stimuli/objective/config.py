"""The objective stage's settings: which embedding model serves FAD, the medoids and the league,
loading it, and what each step works on (the audio to embed, published statistics to match).

torch is imported inside the worker-side functions only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import Q

from stimuli.job_kinds import GENERATE, RANK_BY_FAD, SELECT_MEDOIDS

from ..errors import Refused
from ..models import (
    AudioFile,
    Challenge,
    Clip,
    FadResult,
    Job,
    ObjectiveSettings,
    ReferenceStats,
)
from .embeddings.base import ANY_WEIGHTS, make_model_id, model_id_matches, split_model_id

Progress = Callable[[int, int, str], None]
PURPOSES = (RANK_BY_FAD, SELECT_MEDOIDS)  # the job that follows the embeddings


class ObjectiveError(Refused):
    """An objective-stage request that cannot work; the message says why and what to do."""


class ObjectiveConflict(ObjectiveError):
    """A request refused by the challenge's phase (the listening test open, results published)."""

    status = 409


# --- settings ---------------------------------------------------------------------------------


# VGGish as DCASE 2023 Task 7 ran it: published DCASE FADs, and FAD against the official
# statistics, are comparable only with this preset (see embeddings/vggish.py).
DCASE_FAD_OPTIONS = {"preset": "dcase2023"}
# OpenL3's environmental-sound weights (trained on AudioSet's non-music videos) for medoids of
# Foley sounds; its music weights are the package default.
MEDOID_OPTIONS = {"content_type": "env"}


def objective_settings(challenge: Challenge) -> ObjectiveSettings:
    obj, _ = ObjectiveSettings.objects.get_or_create(
        challenge=challenge,
        defaults={
            "fad_model_options": dict(DCASE_FAD_OPTIONS),
            "medoid_model_options": dict(MEDOID_OPTIONS),
        },
    )
    return obj


def set_models(challenge: Challenge, **values) -> ObjectiveSettings:
    """Change objective settings by field name (e.g. fad_model="logmel").

    Options belong to a model: naming another model without options clears them.
    """
    obj = objective_settings(challenge)
    fields = {f.name for f in ObjectiveSettings._meta.get_fields()} - {"id", "challenge"}
    unknown = set(values) - fields
    if unknown:
        raise ObjectiveError(f"unknown objective settings: {', '.join(sorted(unknown))}")
    for model, options in (
        ("fad_model", "fad_model_options"),
        ("medoid_model", "medoid_model_options"),
    ):
        if model in values and values[model] != getattr(obj, model) and options not in values:
            values[options] = {}
    for key, value in values.items():
        setattr(obj, key, value)
    obj.full_clean()
    obj.save()
    return obj


@dataclass(frozen=True)
class ModelChoice:
    name: str
    options: dict
    weights: str

    def as_params(self) -> dict:
        return {"name": self.name, "options": self.options, "weights": self.weights}


def league_choices(challenge: Challenge) -> list[ModelChoice]:
    """The further models whose FAD enters the embedding league."""
    return [
        ModelChoice(e["name"], dict(e.get("options") or {}), e.get("weights", ""))
        for e in objective_settings(challenge).league_models or []
    ]


def model_choice(challenge: Challenge, purpose: str) -> ModelChoice:
    obj = objective_settings(challenge)
    if purpose == RANK_BY_FAD:
        return ModelChoice(obj.fad_model, dict(obj.fad_model_options or {}), obj.fad_weights)
    return ModelChoice(obj.medoid_model, dict(obj.medoid_model_options or {}), obj.medoid_weights)


@functools.lru_cache(maxsize=4)
def _load_cached(name: str, options_json: str, weights: str):
    import json

    from .embeddings import load_embedding_model

    return load_embedding_model(name, json.loads(options_json), weights)


def load_model(choice: ModelChoice | dict):
    """The embedding model, loaded once per worker process and kept for the next job."""
    import json

    if isinstance(choice, dict):
        choice = ModelChoice(choice["name"], choice.get("options") or {}, choice.get("weights", ""))
    return _load_cached(choice.name, json.dumps(choice.options, sort_keys=True), choice.weights)


# --- what each step works on ----------------------------------------------------------------


def published_stats(
    challenge: Challenge, model_id: str, reference: str
) -> dict[int, ReferenceStats]:
    """Per category, the published statistics for a FAD with the model `model_id`.

    Statistics are kept per model name; those of this name but of another configuration
    (options, weights) are refused, never used in its place and never silently replaced by
    the reference audio.
    """
    name = split_model_id(model_id)[0]
    rows = ReferenceStats.objects.filter(challenge=challenge, model=name, reference=reference)
    out = {}
    for row in rows.select_related("category").order_by("category__position", "pk"):
        if not model_id_matches(row.model_id, model_id):
            raise ObjectiveError(_mismatch(row, model_id))
        out[row.category_id] = row
    return out


def _mismatch(row: ReferenceStats, model_id: str) -> str:
    made_with = (
        "an undeclared configuration (imported before statistics named theirs)"
        if split_model_id(row.model_id)[1] == UNDECLARED
        else row.model_id
    )
    hint = (
        ' (VGGish with options {"preset": "dcase2023"})' if row.model_id == DCASE2023_VGGISH else ""
    )
    return (
        f"the published {row.reference} statistics of {row.category.slug} were made with "
        f"{made_with}, but this evaluation embeds with {model_id}: import statistics of this "
        f"model configuration, or set the FAD model to theirs{hint}"
    )


def checkpublished_stats(challenge: Challenge, model_id: str, dim: int) -> None:
    """Refuse, before anything is embedded, published statistics the model cannot use."""
    for reference in FadResult.Reference.values:
        for row in published_stats(challenge, model_id, reference).values():
            if row.dim != dim:
                raise ObjectiveError(
                    f"the published {reference} statistics of {row.category.slug} are "
                    f"{row.dim}-d, but {model_id} gives {dim}-d embeddings"
                )


# A generation in progress (or failed) stores its clips batch by batch beside the system's
# current ones, which stay until it succeeds: the objective stage reads the current ones alone.
SETTLED = (
    Q(source_job__isnull=True)
    | ~Q(source_job__kind=GENERATE)
    | Q(source_job__state=Job.State.SUCCEEDED)
)


def audio_to_embed(challenge: Challenge, purpose: str, model_id: str) -> list[AudioFile]:
    """The distinct audio of the clips a step needs embeddings of with the model `model_id`."""
    clips = Clip.objects.filter(SETTLED, challenge=challenge)
    if purpose == RANK_BY_FAD:
        refs = [FadResult.Reference.EVALUATION]
        if objective_settings(challenge).fad_development:
            refs.append(FadResult.Reference.DEVELOPMENT)
        wanted = Q(role=Clip.Role.SYSTEM)
        for ref in refs:
            published = published_stats(challenge, model_id, ref)
            role = Clip.Role.EVALUATION if ref == "evaluation" else Clip.Role.DEVELOPMENT
            wanted |= Q(role=role) & ~Q(category_id__in=list(published))
        clips = clips.filter(wanted)
    else:
        clips = clips.filter(role=Clip.Role.SYSTEM, system__is_finalist=True)
    ids = clips.values_list("audio_id", flat=True).distinct()
    return list(AudioFile.objects.filter(pk__in=ids).order_by("pk"))


# --- published reference statistics ----------------------------------------------------------

# The VGGish configuration the DCASE 2023 Task 7 statistics were made with: the task's own
# FAD pipeline (22,050 Hz clips read as 16 kHz, divided by their largest sample, 1 s windows
# every 0.5 s; raw 128-d embeddings), the vggish module's preset "dcase2023", whose model id is
# vggish:dcase2023-act0-raw@<weights>. Embeddings of the module's defaults (resampled audio,
# 0.96 s examples) are not comparable with them. Any weights file: torchvggish's port and
# Google's checkpoint hold the same network but hash differently, and the statistics name
# neither.
# (Spelt out: importing the module would load torch wherever evaluation is imported.)
DCASE2023_VGGISH = make_model_id("vggish", "dcase2023-act0-raw", ANY_WEIGHTS)
# The options that give a declared model id, where known: what `compute_fad` embeds audio with
# when it is compared with statistics and no options were given.
DECLARED_OPTIONS = {DCASE2023_VGGISH: DCASE_FAD_OPTIONS}
# What `import_reference_stats` accepts in place of a model id.
STATS_PRESETS = {"vggish": DCASE2023_VGGISH}
# Embedding sizes known without loading the model, so an import can check them at once;
# other models' sizes are checked when a FAD job has loaded the model.
EMBEDDING_SIZES = {"vggish": 128}
# The options part of statistics imported before they declared a configuration (migration).
UNDECLARED = "undeclared"
