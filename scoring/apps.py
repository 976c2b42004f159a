from django.apps import AppConfig


class ScoringConfig(AppConfig):
    """What is concluded and published: scores, rankings, snapshots and leaderboards."""

    name = "scoring"
    default_auto_field = "django.db.models.BigAutoField"
