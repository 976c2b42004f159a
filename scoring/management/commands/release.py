"""Make the data release of a challenge's published results (scoring/release.py)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scoring.models import Snapshot
from scoring.release import latest_final, make_release, release_name
from stimuli.errors import Refused
from stimuli.models import Challenge


class Command(BaseCommand):
    help = (
        "Write a versioned data release of a published snapshot (default: the latest final "
        "one): a directory and its zip under --out, also stored for the results page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug", help="The challenge's slug.")
        parser.add_argument("--snapshot", type=int, help="The snapshot's number.")
        parser.add_argument("--out", type=Path, default=Path("."), help="Where to write it.")

    def handle(self, *args, **options) -> None:
        challenge = Challenge.objects.filter(slug=options["slug"]).first()
        if challenge is None:
            raise CommandError(f"no challenge {options['slug']!r}")
        try:
            if options["snapshot"] is None:
                snapshot = latest_final(challenge)
            else:
                snapshot = Snapshot.objects.filter(
                    challenge=challenge, number=options["snapshot"]
                ).first()
                if snapshot is None:
                    raise Refused(f"{challenge.slug} has no results #{options['snapshot']}")
            made = make_release(snapshot, out_dir=options["out"])
        except Refused as exc:
            raise CommandError(str(exc)) from exc
        folder = options["out"] / release_name(snapshot, made.version)
        self.stdout.write(f"Data release {made.version}: {folder} and {folder}.zip")
