"""Score a challenge from released CSV files alone and print one JSON object."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scoring.inputs import ScoringInputError
from scoring.offline import add_arguments, run


class Command(BaseCommand):
    help = (
        "Score a challenge from the listening test's ratings and diversity CSVs, a FAD CSV "
        "(system, track, category, fad_dev, fad_eval) and a teams CSV (system, team, track); "
        "prints the result as one JSON object. Needs no database content."
    )
    requires_system_checks: list = []

    def add_arguments(self, parser: CommandParser) -> None:
        add_arguments(parser)

    def handle(self, *args, **options) -> None:
        try:
            self.stdout.write(run(options))
        except ScoringInputError as exc:
            raise CommandError(str(exc)) from exc
