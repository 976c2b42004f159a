"""The Celery application. Queues: `gpu` for embeddings and generation, `cpu` for the rest
(CELERY_TASK_ROUTES in the settings)."""

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foley_platform.settings")

app = Celery("foley_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The stages of stimuli keep their tasks in their own packages, which autodiscovery (one `tasks`
# module per installed app) would not look at.
app.autodiscover_tasks(
    ["stimuli.uploads", "stimuli.objective", "stimuli.generators", "stimuli.submissions"]
)


@signals.worker_init.connect
@signals.beat_init.connect
def refuse_unsafe_start(**kwargs) -> None:
    """With DEBUG off a worker or the scheduler does not start unsafe (foley_platform/safety.py):
    the settings were checked when they loaded; the accounts need the database, ready now.
    Celery logs and swallows a handler's exception, so the refusal leaves by SystemExit."""
    import django
    from django.core.exceptions import ImproperlyConfigured

    django.setup()
    from foley_platform.safety import refuse_unsafe_start as refuse

    try:
        refuse()
    except ImproperlyConfigured as exc:
        raise SystemExit(str(exc)) from None
