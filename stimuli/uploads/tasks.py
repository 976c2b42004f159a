"""Celery tasks of uploads. Thin: each takes a job id and calls a service.

Every task has an explicit name, so messages already queued keep running after code moves; its
queue is routed by that exact name (CELERY_TASK_ROUTES), and a test holds every task to a route.
"""

from celery import shared_task

from . import services


@shared_task(name="stimuli.tasks.import_upload")
def import_upload(job_id: int) -> None:
    services.run_import_job(job_id)
