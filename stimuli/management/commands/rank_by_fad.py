"""Rank by FAD: embeddings, FAD per system and category, the ranking and the finalists."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from stimuli import selectors
from stimuli.cli import run_or_queue
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
        changes = {}
        if options["fad_model"]:
            changes["fad_model"] = options["fad_model"]
        if options["finalists"]:
            changes["finalists_per_track"] = options["finalists"]

        def start(challenge):
            if changes:
                config.set_models(challenge, **changes)
            return services.start_rank_by_fad(challenge)

        def now(challenge, progress):
            if changes:
                config.set_models(challenge, **changes)
            return services.rank_by_fad_now(challenge, progress=progress)

        challenge, job = run_or_queue(
            self, options["challenge"], "ranking by FAD", start, now, queue=options["queue"]
        )
        if job is None:
            return
        self.stdout.write(
            json.dumps(selectors.fad_ranking_table(challenge, job.result["model_id"]), indent=2)
        )
