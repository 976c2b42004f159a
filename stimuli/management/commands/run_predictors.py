"""Run the predictors: the learned predictors' values of every system clip of a challenge."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from stimuli.cli import run_or_queue
from stimuli.objective import predictor_scores, services


class Command(BaseCommand):
    help = (
        "Rate every system clip of the challenge with the learned predictors (Audiobox "
        "Aesthetics' PQ, PC, CE, CU and PAM; their released files under FOLEY_MODEL_DIR or "
        "where the settings name them), store one value per clip and axis and print each "
        "system's mean per category as JSON. Runs here with a progress bar, or with --queue on "
        "the workers. For a folder of audio outside a challenge: compute_predictors."
    )

    def add_arguments(self, parser):
        parser.add_argument("challenge", help="Challenge slug.")
        parser.add_argument(
            "--predictors", help="Comma-separated: aesthetics, pam (default: both)."
        )
        parser.add_argument("--queue", action="store_true", help="Send the job to the workers.")

    def handle(self, *args, **options):
        chosen = options["predictors"]

        def start(challenge):
            return services.start_predictors(challenge, predictors=chosen)

        def now(challenge, progress):
            return services.predictors_now(challenge, predictors=chosen, progress=progress)

        challenge, job = run_or_queue(
            self, options["challenge"], "the predictors", start, now, queue=options["queue"]
        )
        if job is None:
            return
        summary = [
            {k: v for k, v in row.items() if k != "system_id"}
            for row in predictor_scores.predictor_summary(challenge)
        ]
        self.stdout.write(json.dumps({**job.result, "summary": summary}, indent=2))
