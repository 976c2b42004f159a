"""The Celery application. Queues: `gpu` for embeddings and generation, `cpu` for the rest
(CELERY_TASK_ROUTES in the settings)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "foley_platform.settings")

app = Celery("foley_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The stages of stimuli keep their tasks in their own packages, which autodiscovery (one `tasks`
# module per installed app) would not look at.
app.autodiscover_tasks(
    ["stimuli.uploads", "stimuli.objective", "stimuli.generators", "stimuli.submissions"]
)
