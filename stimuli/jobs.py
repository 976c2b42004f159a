"""The life of a background job: queued, running, succeeded or failed, with progress on its row.

Celery tasks take a job id and call `run_job`, which makes a rerun of a finished job a no-op and
lets a job whose worker died be picked up again (Celery redelivers it with acks_late).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from .models import Job

logger = logging.getLogger(__name__)


class JobProgress:
    """Writes progress to the job row, at most every `interval` seconds, plus the final value."""

    def __init__(self, job: Job, interval: float = 0.5):
        self.job = job
        self.interval = interval
        self._last = 0.0

    def __call__(self, done: int, total: int, message: str = "") -> None:
        now = time.monotonic()
        if done < total and now - self._last < self.interval:
            return
        self._last = now
        Job.objects.filter(pk=self.job.pk).update(
            done=done, total=total, message=message[:300], updated_at=timezone.now()
        )

    def log(self, line: str) -> None:
        """Append a line to the job's log, visible to organizers while it runs."""
        stamp = timezone.now().strftime("%H:%M:%S")
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=self.job.pk)
            job.log = f"{job.log}{stamp} {line}\n"[-200_000:]
            job.save(update_fields=["log", "updated_at"])


def run_job(job_id: int, work: Callable[[Job, JobProgress], dict[str, Any] | None]) -> Job:
    """Run `work` for the job unless it already finished; record the outcome on the row."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.is_finished:
            return job
        job.state = Job.State.RUNNING
        job.attempts += 1
        job.started_at = timezone.now()
        job.error = ""
        job.save(update_fields=["state", "attempts", "started_at", "error", "updated_at"])
    progress = JobProgress(job)
    try:
        result = work(job, progress) or {}
    except Exception as exc:
        logger.exception("job %s failed", job_id)
        Job.objects.filter(pk=job_id).update(
            state=Job.State.FAILED,
            error=f"{type(exc).__name__}: {exc}",
            log=(job.log + traceback.format_exc())[-200_000:],
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
    else:
        failed = bool(result.pop("_failed", False))
        error = result.pop("_error", "")
        Job.objects.filter(pk=job_id).update(
            state=Job.State.FAILED if failed else Job.State.SUCCEEDED,
            result=result,
            error=error,
            finished_at=timezone.now(),
            updated_at=timezone.now(),
        )
    job.refresh_from_db()
    return job


def enqueue(job: Job, task: Any) -> None:
    """Send the job's task once the transaction that created the job has committed.

    In-process tasks (no broker) run at once instead: they share this connection and so see the
    job row already, and the caller gets the finished job back.
    """
    if task.app.conf.task_always_eager:
        task.delay(job.pk)
    else:
        transaction.on_commit(lambda: task.delay(job.pk))


def reset_for_retry(job: Job) -> Job:
    """Put a failed job back in the queue; a finished or running job is left as it is."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state != Job.State.FAILED:
            return job
        job.state = Job.State.QUEUED
        job.done = 0
        job.error = ""
        job.finished_at = None
        job.save()
    return job
