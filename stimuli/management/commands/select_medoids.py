"""Choose the listening-test stimuli: k-means medoids of every finalist system and category."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from stimuli.cli import run_or_queue
from stimuli.models import Medoid
from stimuli.objective import services


class Command(BaseCommand):
    help = (
        "Select k medoids (default 20) per finalist system and category by k-means on the "
        "challenge's medoid-model embeddings (OpenL3 by default) and print them as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("challenge", help="Challenge slug.")
        parser.add_argument("--queue", action="store_true", help="Send the job to the workers.")

    def handle(self, *args, **options):
        challenge, job = run_or_queue(
            self,
            options["challenge"],
            "medoid selection",
            services.start_select_medoids,
            services.select_medoids_now,
            queue=options["queue"],
        )
        if job is None:
            return
        out: dict = {}
        medoids = Medoid.objects.filter(challenge=challenge).select_related(
            "system", "category", "clip__audio"
        )
        for m in medoids.order_by("system__name", "category__position", "position"):
            out.setdefault(m.system.name, {}).setdefault(m.category.slug, []).append(
                {"position": m.position, "clip": m.clip.original_name, "sha256": m.clip.sha256}
            )
        self.stdout.write(
            json.dumps({"model_id": job.result["model_id"], "medoids": out}, indent=2)
        )
