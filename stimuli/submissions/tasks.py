"""The submissions' tasks: the worker's check of one version (on a GPU worker, like generation),
and the hourly reminder of deadlines a day ahead (Celery beat, `CELERY_BEAT_SCHEDULE`)."""

from celery import shared_task


@shared_task(name="stimuli.tasks.check_submission")
def check_submission(job_id: int) -> None:
    from . import feedback

    feedback.run_check(job_id)


@shared_task(name="stimuli.tasks.remind_deadlines")
def remind_deadlines() -> int:
    # Idempotent: each team is told once per deadline (a row per notice), however often it runs.
    from .notifications import remind_deadlines

    return remind_deadlines()
