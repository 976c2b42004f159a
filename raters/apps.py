from django.apps import AppConfig


class RatersConfig(AppConfig):
    """Who hears and what they answered: raters, sessions, trials and ratings."""

    name = "raters"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from stimuli.job_kinds import register

        from .preparation import PREPARE_JOB

        # Preparing is idempotent: a failed preparation may run again whenever the page allows
        # preparing, which is always.
        register(PREPARE_JOB, "Prepare the listening test", "raters.tasks.prepare_listening_test")
