"""Import a reference set or a system's audio from a zip or a folder, as the upload page does."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from stimuli.cli import TerminalProgress
from stimuli.models import Challenge, Clip, System
from stimuli.uploads.imports import ImportRequestError, import_clips


class Command(BaseCommand):
    help = (
        "Check every audio file of a zip or folder (one folder per category) against the "
        "challenge's clip spec and store them all, or store nothing. Prints a per-file report; "
        "exits with status 1 when the import is rejected."
    )

    def add_arguments(self, parser):
        parser.add_argument("challenge", help="Challenge slug.")
        parser.add_argument("path", help="A .zip file or a folder.")
        parser.add_argument("--role", required=True, choices=Clip.Role.values)
        parser.add_argument("--system", help="System name (for --role system).")
        parser.add_argument(
            "--convert",
            action="store_true",
            help="Convert like DCASE (mono, resample, pad or cut) instead of rejecting.",
        )
        parser.add_argument(
            "--strict",
            action="store_true",
            help="Reject files that are not audio instead of skipping them with a note.",
        )
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, **options):
        challenge = Challenge.objects.filter(slug=options["challenge"]).first()
        if challenge is None:
            raise CommandError(f"no challenge with slug '{options['challenge']}'")
        system = None
        if options["system"]:
            system = System.objects.filter(challenge=challenge, name=options["system"]).first()
            if system is None:
                raise CommandError(f"no system named '{options['system']}' in {challenge.slug}")
        try:
            report = import_clips(
                challenge,
                options["path"],
                role=options["role"],
                system=system,
                convert=options["convert"],
                strict=options["strict"],
                progress=TerminalProgress("checking"),
            )
        except ImportRequestError as exc:
            raise CommandError(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2))
        else:
            for problem in report.problems:
                self.stdout.write(f"ERROR  {problem}")
            tags = {"stored": "OK", "already present": "EXISTS", "duplicate": "DUP"}
            for entry in report.files:
                tag = "ERROR" if entry.errors else tags.get(entry.status, entry.status.upper())
                tag = f"{tag:<6}"
                details = "; ".join(entry.errors or entry.warnings)
                self.stdout.write(f"{tag} {entry.path}" + (f": {details}" if details else ""))
            for skipped in report.skipped:
                self.stdout.write(f"SKIP   {skipped}")
            self.stdout.write(report.summary())
        if not report.accepted:
            raise CommandError(report.summary())
