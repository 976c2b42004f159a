"""Run a challenge's objective stage: embeddings, FAD per system and category, finalists."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from stimuli import selectors
from stimuli.cli import TerminalProgress
from stimuli.models import Challenge, Job
from stimuli.objective import config, services


class Command(BaseCommand):
    help = (
        "Compute FAD-Eval and FAD-Dev of every system and category with the challenge's FAD "
        "model, rank the systems per track and mark the finalists; print the ranking as JSON. "
        "Runs here with a progress bar, or with --queue on the workers."
    )

    def add_arguments(self, parser):
        parser.add_argument("challenge", help="Challenge slug.")
        parser.add_argument("--fad-model", help="Change the challenge's FAD model first.")
        parser.add_argument("--finalists", type=int, help="Finalists per track (default 4).")
        parser.add_argument("--queue", action="store_true", help="Send the job to the workers.")

    def handle(self, *args, **options):
        challenge = Challenge.objects.filter(slug=options["challenge"]).first()
        if challenge is None:
            raise CommandError(f"no challenge '{options['challenge']}'")
        changes = {}
        if options["fad_model"]:
            changes["fad_model"] = options["fad_model"]
        if options["finalists"]:
            changes["finalists_per_track"] = options["finalists"]
        try:
            if changes:
                config.set_models(challenge, **changes)
            if options["queue"]:
                job = services.start_rank_by_fad(challenge)
                self.stdout.write(f"queued job #{job.pk}; follow it on the challenge page")
                return
            job = services.rank_by_fad_now(challenge, progress=TerminalProgress("evaluating"))
        except config.ObjectiveError as exc:
            raise CommandError(str(exc)) from None
        if job.state != Job.State.SUCCEEDED:
            raise CommandError(f"evaluation failed: {job.error}")
        self.stdout.write(
            json.dumps(selectors.fad_ranking_table(challenge, job.result["model_id"]), indent=2)
        )
