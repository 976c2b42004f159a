"""Celery tasks of the stimuli app. Thin: each takes a job id and calls a service."""

from celery import shared_task

from . import services


@shared_task
def import_upload(job_id: int) -> None:
    services.run_import_job(job_id)


# Generation and generator validation run submitted code: the `gpu` queue (by the name pattern
# `stimuli.tasks.generate_*` in CELERY_TASK_ROUTES).
@shared_task
def generate_clips(job_id: int) -> None:
    from . import generation

    generation.run_generation(job_id)


@shared_task
def generate_validation(job_id: int) -> None:
    from . import generation

    generation.run_validation(job_id)


# Embeddings want a GPU: the `gpu` queue (by the name pattern `stimuli.tasks.embed_*`). FAD and
# k-means run on the `cpu` queue, the default.
@shared_task
def embed_clips(job_id: int) -> None:
    from . import evaluation

    evaluation.run_embed(job_id)


@shared_task
def compute_fad(job_id: int) -> None:
    from . import evaluation

    evaluation.run_fad(job_id)


@shared_task
def select_medoids(job_id: int) -> None:
    from . import evaluation

    evaluation.run_medoids(job_id)
