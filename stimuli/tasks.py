"""Celery tasks of the stimuli app. Thin: each takes a job id and calls a service.

Every task has an explicit name, so messages already queued keep running after code moves; its
queue is routed by that exact name (CELERY_TASK_ROUTES), and a test holds every task to a route.
"""

from celery import shared_task

from . import services


@shared_task(name="stimuli.tasks.import_upload")
def import_upload(job_id: int) -> None:
    services.run_import_job(job_id)


# Generation and generator validation run submitted code (in the sandbox) on GPU workers.
@shared_task(name="stimuli.tasks.generate_clips")
def generate_clips(job_id: int) -> None:
    from . import generation

    generation.run_generation(job_id)


@shared_task(name="stimuli.tasks.generate_validation")
def generate_validation(job_id: int) -> None:
    from . import generation

    generation.run_validation(job_id)


# Embeddings want a GPU; FAD and k-means run on CPU workers.
@shared_task(name="stimuli.tasks.embed_clips")
def embed_clips(job_id: int) -> None:
    from . import evaluation

    evaluation.run_embed(job_id)


@shared_task(name="stimuli.tasks.compute_fad")
def compute_fad(job_id: int) -> None:
    from . import evaluation

    evaluation.run_fad(job_id)


@shared_task(name="stimuli.tasks.select_medoids")
def select_medoids(job_id: int) -> None:
    from . import evaluation

    evaluation.run_medoids(job_id)


# Clips from text prompts: one job serves the pending prompts of every judge of a system.
@shared_task(name="stimuli.tasks.generate_from_text")
def generate_from_text(job_id: int) -> None:
    from . import text_prompts

    text_prompts.run_text_job(job_id)
