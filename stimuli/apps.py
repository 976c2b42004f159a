from django.apps import AppConfig


class StimuliConfig(AppConfig):
    """What is heard: challenges, categories, systems, clips, uploads, embeddings and metrics jobs."""

    name = "stimuli"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        # Every app's declared kinds of job (stimuli/job_kinds.py): their labels for the pages,
        # their tasks for a worker.
        autodiscover_modules("job_kinds")
        # Every app's sections of a challenge's definition file (stimuli/definition/).
        autodiscover_modules("definition")
