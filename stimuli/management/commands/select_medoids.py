"""Choose the listening-test stimuli: k-means medoids of every finalist system and category."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from stimuli.cli import TerminalProgress
from stimuli.models import Challenge, Job, Medoid
from stimuli.objective import config, services


class Command(BaseCommand):
    help = (
        "Select k medoids (default 20) per finalist system and category by k-means on the "
        "challenge's medoid-model embeddings (OpenL3 by default) and print them as JSON."
    )

    def add_arguments(self, parser):
        parser.add_argument("challenge", help="Challenge slug.")
        parser.add_argument("--queue", action="store_true", help="Send the job to the workers.")

    def handle(self, *args, **options):
        challenge = Challenge.objects.filter(slug=options["challenge"]).first()
        if challenge is None:
            raise CommandError(f"no challenge '{options['challenge']}'")
        try:
            if options["queue"]:
                job = services.start_select_medoids(challenge)
                self.stdout.write(f"queued job #{job.pk}; follow it on the challenge page")
                return
            job = services.select_medoids_now(challenge, progress=TerminalProgress("medoids"))
        except config.ObjectiveError as exc:
            raise CommandError(str(exc)) from None
        if job.state != Job.State.SUCCEEDED:
            raise CommandError(f"medoid selection failed: {job.error}")
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
