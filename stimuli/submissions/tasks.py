"""The submissions' task: the worker's check of one version, on a GPU worker like generation."""

from celery import shared_task


@shared_task(name="stimuli.tasks.check_submission")
def check_submission(job_id: int) -> None:
    from . import feedback

    feedback.run_check(job_id)
