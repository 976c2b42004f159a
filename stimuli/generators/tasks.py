"""Celery tasks of generators: each takes a job id and calls generation. They run submitted code
(in the sandbox) on GPU workers.

The names stay those the tasks had in `stimuli.tasks`, so messages already queued still run and
CELERY_TASK_ROUTES still routes them; the job registry (stimuli/apps.py) says where they live.
"""

from celery import shared_task


@shared_task(name="stimuli.tasks.generate_clips")
def generate_clips(job_id: int) -> None:
    from . import services

    services.run_generation(job_id)


@shared_task(name="stimuli.tasks.generate_validation")
def generate_validation(job_id: int) -> None:
    from . import services

    services.run_validation(job_id)


# Clips from text prompts: one job serves the pending prompts of every judge of a system.
@shared_task(name="stimuli.tasks.generate_from_text")
def generate_from_text(job_id: int) -> None:
    from . import text_prompts

    text_prompts.run_text_job(job_id)
