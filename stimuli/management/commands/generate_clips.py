"""Generate a system's clips with its generator, in this process, with a progress bar."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.files import File
from django.core.management.base import BaseCommand, CommandError

from stimuli.cli import TerminalProgress
from stimuli.generators.services import GenerationError, generate_now, set_generator
from stimuli.models import Job, System


class Command(BaseCommand):
    help = (
        "Run a system's generator in the sandbox and store N clips per category as its output "
        "(resuming a job that was interrupted). Exits with status 1 when generation fails."
    )

    def add_arguments(self, parser):
        parser.add_argument("system", help="System name or public id (S1234ABCD).")
        parser.add_argument("--challenge", help="Challenge slug, when the name is ambiguous.")
        parser.add_argument("-n", "--clips", type=int, default=100, help="Clips per category.")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--batch-size", type=int, default=10)
        parser.add_argument("--module", help="Set the system's generator to this module first.")
        parser.add_argument("--archive", help="Set the system's generator to this .zip/.whl.")
        parser.add_argument("--config", help="JSON settings passed to load_model (with --module).")
        parser.add_argument(
            "--trusted",
            action="store_true",
            help="With --module/--archive: vouch for the code (it may run without isolation where "
            "this machine has none).",
        )

    def handle(self, *args, **options):
        systems = System.objects.filter(name=options["system"]) | System.objects.filter(
            public_id=options["system"]
        )
        if options["challenge"]:
            systems = systems.filter(challenge__slug=options["challenge"])
        systems = list(systems.select_related("challenge"))
        if not systems:
            raise CommandError(f"no system '{options['system']}'")
        if len(systems) > 1:
            raise CommandError(f"'{options['system']}' names several systems; add --challenge")
        system = systems[0]
        try:
            if options["module"] or options["archive"]:
                config = (
                    json.loads(Path(options["config"]).read_text()) if options["config"] else None
                )
                if options["archive"]:
                    with open(options["archive"], "rb") as handle:
                        generator = set_generator(
                            system,
                            archive=File(handle, name=Path(options["archive"]).name),
                            trusted=options["trusted"],
                        )
                else:
                    generator = set_generator(
                        system, module=options["module"], config=config, trusted=options["trusted"]
                    )
                self.stdout.write(f"validation: {generator.report.get('summary', generator.state)}")
            job = generate_now(
                system,
                options["clips"],
                options["seed"],
                batch_size=options["batch_size"],
                progress=TerminalProgress(f"generating {system.name}"),
            )
        except GenerationError as exc:
            raise CommandError(str(exc)) from None
        if job.state != Job.State.SUCCEEDED:
            self.stderr.write(job.log[-3000:])
            raise CommandError(f"generation failed: {job.error}")
        self.stdout.write(
            f"{system.name}: {job.result.get('clips')} clips stored "
            f"({job.result.get('generated', 0)} generated now, job #{job.pk})."
        )
