"""Celery tasks of the scoring app. Thin: each takes a job id and calls a service."""

from celery import shared_task

from . import services


@shared_task(name="scoring.tasks.publish_results")
def publish_results(job_id: int) -> None:
    services.run_publish_job(job_id)
