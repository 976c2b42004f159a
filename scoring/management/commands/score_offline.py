"""Score a challenge from released CSV files alone and print one JSON object."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scoring.inputs import ScoringInputError
from scoring.offline import add_arguments, run


class Command(BaseCommand):
    help = (
        "Score a challenge from the listening test's ratings and diversity CSVs, a FAD CSV "
        "(system, track, category, fad_dev, fad_eval) and a teams CSV (system, team, track); "
        "prints the result as one JSON object. Needs no database content. The scoring "
        "settings are the defaults with --settings-json, --seed and --bootstrap on top, or "
        "those of a challenge's definition file (--challenge), which then refuses those three."
    )
    requires_system_checks: list = []

    def add_arguments(self, parser: CommandParser) -> None:
        add_arguments(parser)

    def handle(self, *args, **options) -> None:
        try:
            self.stdout.write(run(options))
        except ScoringInputError as exc:
            # Every problem on a line of its own (a definition file's, each with its line).
            raise CommandError("\n".join(exc.problems)) from exc
