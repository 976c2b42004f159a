"""The kinds of job the platform knows: each app registers its own in its ready(), naming its
Celery task, its label and its stage's retry rule. Apart from `jobs` (which runs them) so that the
models can label a job without importing the code that runs it."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from .errors import Refused


@dataclass(frozen=True)
class JobKind:
    """What the platform knows of one kind of job; each app registers its own in its ready()."""

    kind: str
    label: str
    # The Celery task's explicit name: messages already queued still find it after code moves,
    # and CELERY_TASK_ROUTES routes it by this exact name.
    task: str
    # Where the task is defined (its module's dotted path and name), which may differ from its
    # Celery name once code has moved: a message names the task, enqueue imports it from here.
    where: str
    # Dotted path of the stage's check before a retry, called with the challenge locked: it
    # raises a Refused (a Conflict when the phase has fixed what the job would change).
    retry_guard: str = ""
    # Why a job of this kind is never retried, when it is not ("" when it may be).
    no_retry: str = ""


_KINDS: dict[str, JobKind] = {}
# Every kind registered so far, read-only.
KINDS = MappingProxyType(_KINDS)


def register(
    kind: str,
    label: str,
    task: str,
    *,
    where: str = "",
    retry_guard: str = "",
    no_retry: str = "",
) -> None:
    """Make a kind of job known: its label, its task (Celery name, and where it is defined when
    that differs from the name) and its stage's retry rule."""
    _KINDS[kind] = JobKind(kind, label, task, where or task, retry_guard, no_retry)


def job_kind(kind: str) -> JobKind:
    try:
        return _KINDS[kind]
    except KeyError:
        raise Refused(f"No task is known for jobs of kind '{kind}'.") from None


def kind_label(kind: str) -> str:
    known = _KINDS.get(kind)
    return known.label if known is not None else kind
