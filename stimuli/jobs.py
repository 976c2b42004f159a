"""The life of a background job: queued, running, succeeded or failed, with progress on its row.

Celery tasks take a job id and call `run_job`. A worker runs a job only after claiming it: one
UPDATE that moves a queued job (or a running one whose heartbeat went stale: its worker died and
Celery redelivered the task, with acks_late) to running and counts the attempt. Exactly one of
two deliveries arriving together wins the claim; the other, and any delivery of a finished job,
does nothing. A worker records the outcome only while the job is still its own, so a worker that
was given up for dead and comes back cannot overwrite what the worker that took over wrote.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from .errors import Refused
from .job_kinds import job_kind, task_of
from .models import Challenge, Job

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Failed:
    """What a job's work returns when the job failed without an exception: the error the pages
    show, and what the result still records (e.g. the clips stored before the failure)."""

    error: str
    result: dict[str, Any] = field(default_factory=dict)


def create_job(
    kind: str,
    *,
    challenge: Challenge | None = None,
    challenge_id: int | None = None,
    by: Any = None,
    params: dict[str, Any] | None = None,
    message: str = "",
    total: int = 0,
) -> Job:
    """A queued job of a declared kind (stimuli/job_kinds.py); `enqueue` sends it. `by` is the
    user who asked, anonymous or None for the platform itself."""
    job_kind(kind)  # a job no task can run would wait forever
    return Job.objects.create(
        challenge=challenge,
        challenge_id=challenge.pk if challenge is not None else challenge_id,
        kind=kind,
        params=params or {},
        message=message,
        total=total,
        created_by=by if by is not None and by.is_authenticated else None,
    )


class JobProgress:
    """Writes progress to the job row, at most every `interval` seconds, plus the final value."""

    def __init__(self, job: Job, interval: float = 0.5):
        self.job = job
        self.interval = interval
        self._last = 0.0

    def __call__(self, done: int, total: int, message: str = "", *, force: bool = False) -> None:
        """`force`: a new step, written however soon after the last write."""
        now = time.monotonic()
        if done < total and now - self._last < self.interval and not force:
            return
        self._last = now
        Job.objects.filter(pk=self.job.pk).update(
            done=done, total=total, message=message[:300], updated_at=timezone.now()
        )

    def log(self, line: str) -> None:
        """Append a line to the job's log, visible to organizers while it runs."""
        stamp = timezone.now().strftime("%H:%M:%S")
        with transaction.atomic():
            job = Job.objects.select_for_update(no_key=True).get(pk=self.job.pk)
            job.log = f"{job.log}{stamp} {line}\n"[-200_000:]
            job.save(update_fields=["log", "updated_at"])


class JobLost(Exception):
    """This worker's claim on the job was taken over (its heartbeat went stale): it must write
    nothing more."""


def ensure_still_mine(job: Job) -> None:
    """Raise JobLost unless this worker's claim on `job` holds. The job's row stays locked to the
    end of the caller's transaction, so no other worker takes it over while the caller writes;
    callers lock the job before any other row, as `run_job` does."""
    held = Job.objects.select_for_update(no_key=True).filter(
        pk=job.pk, state=Job.State.RUNNING, attempts=job.attempts
    )
    if not held.exists():
        raise JobLost(f"job {job.pk} attempt {job.attempts} was taken over by another worker")


def stale_after_s() -> float:
    """A running job whose row has not moved for this long has lost its worker."""
    return float(getattr(settings, "FOLEY_JOB_STALE_S", 300))


def is_stale(job: Job) -> bool:
    age = (timezone.now() - job.updated_at).total_seconds()
    return job.state == Job.State.RUNNING and age > stale_after_s()


def fail_if_stale(job: Job) -> Job:
    """Mark a running job whose worker was lost failed, so that it can be retried.

    Needed when no delivery of its task is left to take it over. The row changes only if it is
    still running and stale at the moment of the UPDATE.
    """
    lost = timezone.now() - timedelta(seconds=stale_after_s())
    Job.objects.filter(pk=job.pk, state=Job.State.RUNNING, updated_at__lt=lost).update(
        state=Job.State.FAILED,
        error="the worker was lost",
        finished_at=timezone.now(),
        updated_at=timezone.now(),
    )
    job.refresh_from_db()
    return job


def claim(job_id: int) -> Job | None:
    """Make the job this worker's (running, one more attempt), or None when it is not free.

    Free means queued, or running with a stale heartbeat. The check and the change are one
    UPDATE, so two workers can never both claim it; `attempts` afterwards identifies the claim.
    """
    now = timezone.now()
    lost = now - timedelta(seconds=stale_after_s())
    free = Q(state=Job.State.QUEUED) | Q(state=Job.State.RUNNING, updated_at__lt=lost)
    with transaction.atomic():
        claimed = Job.objects.filter(free, pk=job_id).update(
            state=Job.State.RUNNING,
            attempts=F("attempts") + 1,
            started_at=now,
            error="",
            updated_at=now,
        )
        return Job.objects.get(pk=job_id) if claimed else None


def run_job(
    job_id: int,
    work: Callable[[Job, JobProgress], dict[str, Any] | Failed | None],
    *,
    on_success: Callable[[Job, dict[str, Any]], str | None] | None = None,
) -> Job:
    """Claim the job, run `work` and record the outcome on the row; see the module docstring.

    `work` returns the job's result (its kind's declared result type), or `Failed`.

    `on_success` runs in the transaction that marks the job succeeded, with the job's row locked,
    so what it changes lands together with the success or not at all. It returns an error to
    fail the job instead (its changes are kept: return before changing anything to refuse).
    """
    job = claim(job_id)
    if job is None:
        current = Job.objects.get(pk=job_id)
        if current.state == Job.State.RUNNING:
            _come_back_when_stale(current)
        return current
    mine = Q(pk=job_id, state=Job.State.RUNNING, attempts=job.attempts)
    progress = JobProgress(job)
    try:
        outcome = work(job, progress)
        failed = isinstance(outcome, Failed)
        result = outcome.result if isinstance(outcome, Failed) else outcome or {}
        error = outcome.error[:2000] if isinstance(outcome, Failed) else ""
        with transaction.atomic():
            if Job.objects.select_for_update(no_key=True).filter(mine).first() is None:
                _log_lost(job)
                job.refresh_from_db()
                return job
            if not failed and on_success is not None:
                refused = on_success(job, result)
                if refused:
                    failed, error = True, refused
            Job.objects.filter(mine).update(
                state=Job.State.FAILED if failed else Job.State.SUCCEEDED,
                result=result,
                error=error,
                finished_at=timezone.now(),
                updated_at=timezone.now(),
            )
    except Exception as exc:
        logger.exception("job %s failed", job_id)
        with transaction.atomic():
            # Locked, so no log line written meanwhile is lost when the traceback is appended.
            current = Job.objects.select_for_update(no_key=True).filter(mine).first()
            if current is not None:
                current.state = Job.State.FAILED
                current.error = f"{type(exc).__name__}: {exc}"
                current.log = (current.log + traceback.format_exc())[-200_000:]
                current.finished_at = timezone.now()
                current.save(update_fields=["state", "error", "log", "finished_at", "updated_at"])
        if current is None:
            _log_lost(job)
    job.refresh_from_db()
    return job


def _come_back_when_stale(job: Job) -> None:
    """A delivery of a job another worker holds. Celery redelivers a task the moment its worker
    dies, while the row still looks alive: dropping the delivery would leave the job running
    for ever, so the task comes back once the heartbeat would be stale, and either takes the
    job over or finds it finished. Nothing is written to the row (that would be a heartbeat)."""
    from celery import current_task

    age = (timezone.now() - job.updated_at).total_seconds()
    wait = max(1.0, stale_after_s() - age + 1.0)
    logger.info("job %s is running elsewhere; its task comes back in %.0f s", job.pk, wait)
    if current_task and current_task.request.id and not current_task.request.is_eager:
        raise current_task.retry(countdown=wait, max_retries=None)


def _log_lost(job: Job) -> None:
    logger.warning("job %s attempt %s was taken over by another worker", job.pk, job.attempts)
    JobProgress(job).log(
        f"attempt {job.attempts} ended after another worker had taken the job over; "
        "its outcome was discarded"
    )


# --- queueing and retrying, by the declared kinds (stimuli/job_kinds.py) ------------------------


def enqueue(job: Job) -> None:
    """Send the job's task once the transaction that created the job has committed.

    In-process tasks (no broker) run at once instead: they share this connection and so see the
    job row already, and the caller gets the finished job back. With FOLEY_TASKS_IN_BACKGROUND
    (the demo's server) they run on a thread of their own after the commit, as a worker would,
    and the page that started one shows its progress.
    """
    task = task_of(job.kind)
    if not task.app.conf.task_always_eager:
        transaction.on_commit(lambda: task.delay(job.pk))
    elif getattr(settings, "FOLEY_TASKS_IN_BACKGROUND", False):
        transaction.on_commit(lambda: _start_thread(task, job.pk))
    else:
        task.delay(job.pk)


def _start_thread(task, job_id: int) -> None:
    def run() -> None:
        try:
            task.delay(job_id)
        except Exception:  # run_job has recorded it on the row; the thread only ends
            logger.exception("in-process job %s failed", job_id)
        finally:
            # Each thread has its own connections; a finished one must not hold its file or slot.
            connections.close_all()

    threading.Thread(target=run, name=f"job-{job_id}", daemon=True).start()


def retry(job: Job) -> Job:
    """Queue a failed job again: the one retry of the pages, the API and the command line.

    The kind's own rule (a stage's phase guard, generation's "only the latest") runs with the
    challenge locked, as every phase change takes that lock; a job whose worker was lost with no
    delivery of its task left counts as failed.
    """
    kind = job_kind(job.kind)  # first: a job reset with no task to run it would wait forever
    if kind.no_retry:
        raise Refused(kind.no_retry)
    job = fail_if_stale(job)
    with transaction.atomic():
        if job.challenge_id is not None:
            Challenge.objects.select_for_update(no_key=True).get(pk=job.challenge_id)
        job = Job.objects.get(pk=job.pk)
        if job.state != Job.State.FAILED:
            raise Refused(f"only a failed job can be retried; this one is {job.state}")
        if kind.retry_guard:
            import_string(kind.retry_guard)(job)
        job = reset_for_retry(job)
        enqueue(job)
    return job


def log_tail(job: Job, lines: int = 8) -> str:
    """The job's latest progress lines, for the pages that show a running job."""
    # Only the stamped progress lines: a traceback stays in the full log.
    stamped = [line for line in job.log.splitlines() if line[:2].isdigit() and line[2:3] == ":"]
    return "\n".join(stamped[-lines:])


def reset_for_retry(job: Job) -> Job:
    """Put a failed job back in the queue; a finished or running job is left as it is."""
    with transaction.atomic():
        job = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
        if job.state != Job.State.FAILED:
            return job
        job.state = Job.State.QUEUED
        job.done = 0
        job.error = ""
        job.finished_at = None
        job.save()
    return job
