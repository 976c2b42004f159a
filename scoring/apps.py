from django.apps import AppConfig


class ScoringConfig(AppConfig):
    """What is concluded and published: scores, rankings, snapshots and leaderboards."""

    name = "scoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from stimuli.job_kinds import register

        from .services import PUBLISH_JOB

        # A failed publication may run again, as the page's publish button may be pressed again.
        register(PUBLISH_JOB, "Publish results", "scoring.tasks.publish_results")
