from django.apps import AppConfig


class RatersConfig(AppConfig):
    """Who hears and what they answered: raters, sessions, trials and ratings."""

    name = "raters"
    default_auto_field = "django.db.models.BigAutoField"
