"""Celery tasks of the raters app. Thin: each takes a job id and calls a service."""

from celery import shared_task

from . import preparation


@shared_task(name="raters.tasks.prepare_listening_test")
def prepare_listening_test(job_id: int) -> None:
    preparation.run_prepare_job(job_id)
