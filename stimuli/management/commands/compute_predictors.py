"""The learned predictors' values of every audio file under a folder, as a CSV."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from stimuli.cli import TerminalProgress
from stimuli.exports import to_csv
from stimuli.objective.config import ObjectiveError
from stimuli.objective.embeddings.base import WeightsMissing
from stimuli.objective.predictor_scores import (
    PREDICTORS,
    columns,
    load_predictors,
    predictor_names,
    score_files,
)

from .compute_fad import AUDIO_SUFFIXES


class Command(BaseCommand):
    help = (
        "Rate every audio file under DIR (recursively) with the learned predictors and write one "
        "CSV row per file: path (relative to DIR), then PQ, PC, CE, CU (Audiobox Aesthetics, "
        "1-10) and PAM (0-1) for the chosen predictors. The predictors' released files are "
        "looked up as the settings name them (FOLEY_MODEL_DIR, FOLEY_AESTHETICS_WEIGHTS, "
        "FOLEY_PAM_WEIGHTS, FOLEY_PAM_TOKENIZER); a missing one stops the command before any "
        "audio is read."
    )

    def add_arguments(self, parser):
        parser.add_argument("dir", help="A folder of audio files.")
        parser.add_argument(
            "--predictors", default=",".join(PREDICTORS),
            help=f"Comma-separated, of {', '.join(PREDICTORS)} (default: all).",
        )  # fmt: skip
        parser.add_argument("--out", help="The CSV file to write (default: standard output).")
        parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if any).")
        parser.add_argument("--batch-size", type=int, default=8, help="Files rated at once.")

    def handle(self, *args, **options):
        folder = Path(options["dir"])
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        try:
            names = predictor_names(options["predictors"])
            loaded = load_predictors(names, device=options["device"])
        except (ObjectiveError, WeightsMissing, ValueError) as exc:
            raise CommandError(str(exc)) from None
        files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES)
        if not files:
            raise CommandError(f"{folder}: no audio files ({', '.join(sorted(AUDIO_SUFFIXES))})")
        try:
            rows = score_files(
                files, folder, loaded, batch=max(1, options["batch_size"]),
                progress=TerminalProgress("rating", sys.stderr),
            )  # fmt: skip
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        text = to_csv(rows, ["path", *columns(names)])
        if options["out"]:
            Path(options["out"]).write_text(text, encoding="utf-8", newline="")
            self.stderr.write(f"{len(rows)} files rated: {options['out']}")
        else:
            self.stdout.write(text, ending="")
