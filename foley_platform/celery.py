"""The Celery application. Queues: `gpu` for embeddings and generation, `cpu` for the rest, each
job kind's named where it is declared (stimuli/job_kinds.py); the declarations are imported
by stimuli's ready(), so a worker knows every job's task once Django is set up."""

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foley_platform.settings")

app = Celery("foley_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
