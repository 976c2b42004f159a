from django.apps import AppConfig


class ScoringConfig(AppConfig):
    """What is concluded and published: scores, rankings, snapshots and leaderboards."""

    name = "scoring"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The listening test's assignment and monitoring judge the hidden checks by the
        # challenge's scoring rules; raters may not import scoring, so scoring hands them over.
        from raters.selectors import use_check_rule

        from .services import check_rule

        use_check_rule(check_rule)
