"""The platform's one periodic task (Celery beat, `CELERY_BEAT_SCHEDULE`). Jobs' tasks are made
by their declarations (stimuli/job_kinds.py)."""

from celery import shared_task


@shared_task(name="stimuli.tasks.remind_deadlines")
def remind_deadlines() -> int:
    """Teams are reminded of a deadline a day ahead. Idempotent: each team is told once per
    deadline (a row per notice), however often it runs."""
    from .submissions.notifications import remind_deadlines

    return remind_deadlines()
