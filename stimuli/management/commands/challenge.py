"""A challenge's definition file: `challenge export <slug>` prints it, `challenge apply <file>`
creates or changes the challenge it defines and prints what changed, `challenge schema` prints
the file's JSON Schema."""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from stimuli import definition
from stimuli.errors import Refused
from stimuli.models import Challenge


class Command(BaseCommand):
    help = (
        "The challenge's definition file (challenge.yaml). `export SLUG [-o FILE]` writes it; "
        "`apply FILE [--dry-run] [--owner USERNAME]` creates or changes the challenge it "
        "defines, printing each change ('no changes' when none) or every reason it is refused, "
        "and stores nothing then; `schema` prints the file's JSON Schema (`--markdown`: the manual's "
        "reference page of the file)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        export = actions.add_parser("export", help="Write the challenge's definition.")
        export.add_argument("slug")
        export.add_argument("-o", "--output", help="A file to write (default: standard output).")
        apply = actions.add_parser("apply", help="Create or change the challenge a file defines.")
        apply.add_argument("file", help="The definition (challenge.yaml); - reads standard input.")
        apply.add_argument("--dry-run", action="store_true", help="Only print what would change.")
        apply.add_argument("--owner", help="A new challenge's organizer (a username).")
        schema = actions.add_parser("schema", help="Print the file's JSON Schema.")
        schema.add_argument(
            "--markdown",
            action="store_true",
            help="Print the manual's reference page of the file instead (docs/challenge-file.md).",
        )

    def handle(self, *args, action: str, **options) -> None:
        if action == "schema" and options["markdown"]:
            from stimuli.definition.reference import markdown

            self.stdout.write(markdown(), ending="")
        elif action == "schema":
            self.stdout.write(definition.schema_json(), ending="")
        elif action == "export":
            challenge = Challenge.objects.filter(slug=options["slug"]).first()
            if challenge is None:
                raise CommandError(f"no challenge {options['slug']!r}")
            text = definition.export(challenge)
            if options["output"]:
                Path(options["output"]).write_text(text)
            else:
                self.stdout.write(text, ending="")
        else:
            self._apply(options)

    def _apply(self, options: dict) -> None:
        source = options["file"]
        try:
            text = self.stdin.read() if source == "-" else Path(source).read_text()
        except OSError as exc:
            raise CommandError(f"{source}: {exc.strerror}") from None
        owner = None
        if options["owner"]:
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"--owner: no user {options['owner']!r}")
        try:
            applied = definition.apply(text, by=owner, dry_run=options["dry_run"])
        except (definition.DefinitionError, Refused) as exc:
            problems = "\n".join(f"  {p}" for p in exc.problems)
            raise CommandError(f"{source}: refused, nothing was changed:\n{problems}") from None
        self.stdout.write(applied.diff)
        if options["dry_run"]:
            self.stdout.write("(dry run: nothing was changed)")

    @property
    def stdin(self):
        import sys

        return sys.stdin
