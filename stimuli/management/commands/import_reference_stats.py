"""Import published reference statistics (.npz with mu and sigma, one file per category)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from stimuli.models import Challenge
from stimuli.objective import config, reference_stats


class Command(BaseCommand):
    help = (
        "Store a folder of per-category statistics files (<category>.npz with mu and sigma, "
        "e.g. the DCASE 2023 Task 7 evaluation-set VGGish statistics) as a challenge's "
        "reference; FAD then uses them in place of that reference's audio. All or nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("challenge", help="Challenge slug.")
        parser.add_argument("folder", help="Folder of <category>.npz files.")
        parser.add_argument(
            "--model",
            default="vggish",
            help="The model the statistics were made with: a model id name:options@weights as "
            "FAD results show it (weights * for any weights file), or vggish for DCASE 2023 "
            f"Task 7's VGGish ({config.DCASE2023_VGGISH}, the default). A FAD job refuses "
            "statistics of another configuration of its model.",
        )
        parser.add_argument(
            "--reference", default="evaluation", choices=["evaluation", "development"]
        )
        parser.add_argument("--source", default="", help="Where they come from, for reports.")

    def handle(self, *args, **options):
        challenge = Challenge.objects.filter(slug=options["challenge"]).first()
        if challenge is None:
            raise CommandError(f"no challenge '{options['challenge']}'")
        folder = Path(options["folder"])
        files = {p.stem: p for p in sorted(folder.glob("*.npz"))}
        if not files:
            raise CommandError(f"{folder}: no .npz files")
        try:
            rows = reference_stats.import_reference_stats(
                challenge,
                files,
                model=options["model"],
                reference=options["reference"],
                source=options["source"] or folder.name,
            )
        except config.ObjectiveError as exc:
            raise CommandError(str(exc)) from None
        for row in rows:
            self.stdout.write(
                f"{row.category.slug}: {row.dim}-d, {row.count} embeddings, {row.model_id}"
            )
        self.stdout.write(f"{len(rows)} {options['reference']} statistics stored.")
