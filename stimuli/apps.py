from django.apps import AppConfig


class StimuliConfig(AppConfig):
    """What is heard: challenges, categories, systems, clips, uploads, embeddings and metrics jobs."""

    name = "stimuli"
    default_auto_field = "django.db.models.BigAutoField"
