"""Celery tasks of the objective stage: each takes a job id and calls the pipeline. Embeddings
want a GPU; FAD and k-means run on CPU workers.

The names stay those the tasks had in `stimuli.tasks`, so messages already queued still run and
CELERY_TASK_ROUTES still routes them; the job registry (stimuli/apps.py) says where they live.
"""

from celery import shared_task


@shared_task(name="stimuli.tasks.embed_clips")
def embed_clips(job_id: int) -> None:
    from . import services

    services.run_embed(job_id)


@shared_task(name="stimuli.tasks.compute_fad")
def compute_fad(job_id: int) -> None:
    from . import services

    services.run_fad(job_id)


@shared_task(name="stimuli.tasks.select_medoids")
def select_medoids(job_id: int) -> None:
    from . import services

    services.run_medoids(job_id)


@shared_task(name="stimuli.tasks.clap_prompt_scores")
def clap_prompt_scores(job_id: int) -> None:
    """The text-prompt study's CLAP scores (a GPU worker's: it loads the CLAP model)."""
    from . import prompt_scores

    prompt_scores.run_scores(job_id)
