"""Score a challenge from released CSV files alone and print one JSON object."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scoring.compute import Rules, ScoringInputError, score_files


class Command(BaseCommand):
    help = (
        "Score a challenge from the listening test's ratings and diversity CSVs, a FAD CSV "
        "(system, track, category, fad_dev, fad_eval) and a teams CSV (system, team, track); "
        "prints the result as one JSON object. Needs no database content."
    )
    requires_system_checks: list = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--ratings", required=True, type=Path)
        parser.add_argument("--diversity", required=True, type=Path)
        parser.add_argument("--fad", required=True, type=Path)
        parser.add_argument("--teams", required=True, type=Path)
        parser.add_argument(
            "--settings-json",
            type=Path,
            help='JSON file with scoring rules to override, e.g. {"exclude_at": 4}.',
        )
        parser.add_argument("--seed", type=int, help="Bootstrap seed (default: the rules' seed).")
        parser.add_argument("--bootstrap", type=int, help="Bootstrap samples (0: no intervals).")
        parser.add_argument("--indent", type=int, default=None)

    def handle(self, *args, **options) -> None:
        try:
            overrides = {}
            if options["settings_json"]:
                overrides = json.loads(options["settings_json"].read_text())
                if not isinstance(overrides, dict):
                    raise ScoringInputError("the settings JSON must be an object")
            for name in ("seed", "bootstrap"):
                if options[name] is not None:
                    overrides[name] = options[name]
            rules = Rules.from_dict(overrides)
            result = score_files(
                options["ratings"], options["diversity"], options["fad"], options["teams"], rules
            )
        except (ScoringInputError, OSError, json.JSONDecodeError, TypeError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(result, indent=options["indent"], ensure_ascii=False))
