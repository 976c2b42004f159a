"""Celery tasks of the stimuli app. Thin: each takes a job id and calls a service."""

from celery import shared_task

from . import services


@shared_task
def import_upload(job_id: int) -> None:
    services.run_import_job(job_id)
