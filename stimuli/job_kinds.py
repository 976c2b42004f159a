"""The kinds of job the platform knows, each declared once: `declare()` names its kind, label,
Celery task and queue, the function that runs it, the type of its result and its stage's rule
for a retry, and makes the task. Everything else follows from the declaration: the task's queue
(`route`, the settings' one router), `enqueue` and `retry` (stimuli/jobs.py), the labels on the pages and in the
admin, and the tests' lists.

Each app declares its kinds in its own `job_kinds` module (this one for stimuli's stages,
raters/job_kinds.py, scoring/job_kinds.py), which stimuli's ready() imports. The declarations
name code by dotted path, so that this module (which the models import, to label a job) imports
neither the stages nor anything heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, TypedDict

from celery import shared_task
from django.utils.module_loading import import_string

from .errors import Refused

Queue = Literal["cpu", "gpu"]


@dataclass(frozen=True)
class JobKind:
    """What the platform knows of one kind of job."""

    kind: str
    label: str
    # The Celery task's explicit name: messages already queued still find it after code moves.
    task: str
    # `gpu` for what loads a model or runs submitted code, `cpu` for the rest (docs/deployment.md).
    queue: Queue
    # Dotted path of the function the task calls with the job id (it calls `jobs.run_job`).
    run: str
    # What the job's `result` holds once it ran (a TypedDict, for readers of the result).
    result: type
    # Dotted path of the stage's check before a retry, called with the challenge locked: it
    # raises a Refused (a Conflict when the phase has fixed what the job would change).
    retry_guard: str = ""
    # Why a job of this kind is never retried, when it is not ("" when it may be).
    no_retry: str = ""


_KINDS: dict[str, JobKind] = {}
_TASKS: dict[str, Any] = {}
_BY_TASK: dict[str, JobKind] = {}
# Every kind declared so far, read-only.
KINDS = MappingProxyType(_KINDS)


def declare(
    kind: str,
    label: str,
    *,
    task: str,
    queue: Queue,
    run: str,
    result: type,
    retry_guard: str = "",
    no_retry: str = "",
) -> str:
    """Make a kind of job known and its Celery task with it; returns the kind, the constant the
    stage's services create jobs with."""
    declared = JobKind(kind, label, task, queue, run, result, retry_guard, no_retry)
    if _KINDS.get(kind, declared) != declared:
        raise ValueError(f"job kind {kind!r} is declared twice")

    def run_task(job_id: int) -> None:
        import_string(declared.run)(job_id)

    run_task.__doc__ = f"{label}: runs {run} with the job's id."
    _KINDS[kind] = declared
    _BY_TASK[task] = declared
    _TASKS[kind] = shared_task(name=task)(run_task)
    return kind


def route(name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **kw: Any) -> dict:
    """Celery's router (CELERY_TASK_ROUTES): a job's task goes to its kind's queue; any other
    task to the default queue."""
    declared = _BY_TASK.get(name)
    return {"queue": declared.queue} if declared is not None else {}


def job_kind(kind: str) -> JobKind:
    try:
        return _KINDS[kind]
    except KeyError:
        raise Refused(f"No task is known for jobs of kind '{kind}'.") from None


def task_of(kind: str) -> Any:
    """The Celery task that runs jobs of `kind`."""
    job_kind(kind)
    return _TASKS[kind]


def kind_label(kind: str) -> str:
    known = _KINDS.get(kind)
    return known.label if known is not None else kind


# --- the kinds of stimuli's stages --------------------------------------------------------------


class ImportJobResult(TypedDict, total=False):
    """The upload's report (stimuli/uploads/imports.py `ImportReport.to_dict`)."""

    accepted: bool
    summary: str
    files: list[dict[str, Any]]
    problems: list[str]
    created_clips: int
    created_audio: int


class GenerationJobResult(TypedDict, total=False):
    clips: int
    resumed_at: int
    generated: int
    seconds: float
    device: str


class VerdictJobResult(TypedDict, total=False):
    """A generator's or a submission's check: its verdict in words."""

    ok: bool
    summary: str
    stale: bool
    platform_error: str


class TextGenerationJobResult(TypedDict, total=False):
    served: int
    failed: int
    calls: int


class EmbedJobResult(TypedDict, total=False):
    computed: int
    cached: int
    model_id: str
    device: str
    next_job: int


class FadJobResult(TypedDict, total=False):
    """compute_fad_results' summary (stimuli/objective/distances.py), and the league's jobs."""

    model_id: str
    results: int
    finalists: dict[str, list[str]]  # each track's finalists, by name
    league_jobs: list[int]


class MedoidJobResult(TypedDict, total=False):
    model_id: str
    medoids: int
    short: list[str]  # the systems' categories with fewer clips than medoids asked for


class ScoresJobResult(TypedDict, total=False):
    computed: int
    asked: int


class PredictorsJobResult(TypedDict, total=False):
    """stimuli/objective/predictor_scores.py `score_challenge`'s summary."""

    predictors: list[str]
    clips: int  # the system clips of the challenge
    computed: int  # the clips scored by this run
    cached: int  # the clips whose values the same files had given already
    model_ids: dict[str, str]  # each predictor's files, as the rows record them
    device: str


IMPORT = declare(
    "import", "Audio import",
    task="stimuli.tasks.import_upload", queue="cpu",
    run="stimuli.uploads.services.run_import_job", result=ImportJobResult,
    no_retry="An upload cannot be retried; upload the file again.",
)  # fmt: skip
GENERATE = declare(
    "generate", "Clip generation",
    task="stimuli.tasks.generate_clips", queue="gpu",
    run="stimuli.generators.services.run_generation", result=GenerationJobResult,
    retry_guard="stimuli.generators.services.retry_guard",
)  # fmt: skip
VALIDATE_GENERATOR = declare(
    "validate_generator", "Generator validation",
    task="stimuli.tasks.generate_validation", queue="gpu",
    run="stimuli.generators.services.run_validation", result=VerdictJobResult,
    retry_guard="stimuli.generators.services.retry_guard",
)  # fmt: skip
# Clips from judges' prompts: a failed job runs again over the prompts still pending.
GENERATE_TEXT = declare(
    "generate_text", "Clips from text prompts",
    task="stimuli.tasks.generate_from_text", queue="gpu",
    run="stimuli.generators.text_prompts.run_text_job", result=TextGenerationJobResult,
)  # fmt: skip
# A team's submission: the organizer path's validation, example clips and FAD-dev.
CHECK_SUBMISSION = declare(
    "validate_submission", "Submission check",
    task="stimuli.tasks.check_submission", queue="gpu",
    run="stimuli.submissions.feedback.run_check", result=VerdictJobResult,
    no_retry="A submission's check is re-run by an organizer from its page.",
)  # fmt: skip
EMBED = declare(
    "embed", "Embeddings",
    task="stimuli.tasks.embed_clips", queue="gpu",
    run="stimuli.objective.services.run_embed", result=EmbedJobResult,
    retry_guard="stimuli.objective.services.retry_guard",
)  # fmt: skip
RANK_BY_FAD = declare(
    "rank_by_fad", "Rank by FAD",
    task="stimuli.tasks.rank_by_fad", queue="cpu",
    run="stimuli.objective.services.run_rank_by_fad", result=FadJobResult,
    retry_guard="stimuli.objective.services.retry_guard",
)  # fmt: skip
SELECT_MEDOIDS = declare(
    "select_medoids", "Select medoids",
    task="stimuli.tasks.select_medoids", queue="cpu",
    run="stimuli.objective.services.run_select_medoids", result=MedoidJobResult,
    retry_guard="stimuli.objective.services.retry_guard",
)  # fmt: skip
# The text-prompt study's CLAP scores: a failed job runs again over the rows still empty.
CLAP_SCORES = declare(
    "clap_prompt_scores", "CLAP scores",
    task="stimuli.tasks.clap_prompt_scores", queue="gpu",
    run="stimuli.objective.prompt_scores.run_scores", result=ScoresJobResult,
)  # fmt: skip
# The learned predictors' values of every system clip: a failed job runs again over the clips
# still without values from the same files.
PREDICTORS = declare(
    "predictors", "Learned predictors",
    task="stimuli.tasks.predictors", queue="gpu",
    run="stimuli.objective.services.run_predictors", result=PredictorsJobResult,
    retry_guard="stimuli.objective.services.retry_guard",
)  # fmt: skip
