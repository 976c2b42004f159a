"""Check a generator (module path, .zip or wheel) against the API and the clip spec."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from sandbox.process import Limits
from stimuli.audio import ClipSpec
from stimuli.generators.contract import CATEGORIES
from stimuli.generators.limits import sandbox_limits
from stimuli.generators.validate import validate_target
from stimuli.models import Challenge
from stimuli.selectors import clip_spec


class Command(BaseCommand):
    help = (
        "Load a generator in the sandbox, generate a few clips per category and report every "
        "way it breaks the generator API or the clip spec. Exit status 0 only for a valid one."
    )

    def add_arguments(self, parser):
        parser.add_argument("target", help="A module path (pkg.module), a .zip or a .whl file.")
        parser.add_argument(
            "--challenge", help="Check against this challenge's spec and categories."
        )
        parser.add_argument("--config", help="A configuration file passed to load_model.")
        parser.add_argument("--clips", type=int, default=2, help="Clips per category (2).")
        parser.add_argument("--timeout", type=float, help="Seconds per call (default: settings).")
        parser.add_argument("--memory-mb", type=int, help="Memory limit (default: settings).")
        parser.add_argument(
            "--trusted",
            action="store_true",
            help="Run without isolation where this machine has none (your own code only).",
        )
        parser.add_argument("--json", action="store_true", help="Print the report as JSON.")

    def handle(self, *args, **options):
        spec, categories = ClipSpec(), list(CATEGORIES)
        if options["challenge"]:
            challenge = Challenge.objects.filter(slug=options["challenge"]).first()
            if challenge is None:
                raise CommandError(f"no challenge with slug '{options['challenge']}'")
            spec = clip_spec(challenge)
            categories = list(challenge.categories.values_list("slug", flat=True))
        limits = sandbox_limits()
        overrides = {}
        if options["timeout"]:
            overrides["call_timeout_s"] = options["timeout"]
            overrides["load_timeout_s"] = max(options["timeout"], limits.load_timeout_s)
        if options["memory_mb"]:
            overrides["memory_mb"] = options["memory_mb"]
        if overrides:
            limits = Limits(**{**limits.__dict__, **overrides})
        report = validate_target(
            options["target"],
            spec,
            limits=limits,
            categories=categories,
            clips_per_category=options["clips"],
            config=options["config"],
            trusted=options["trusted"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(report.to_dict(), indent=2))
        else:
            for check in report.checks:
                self.stdout.write(f"OK     {check}")
            for warning in report.warnings:
                self.stdout.write(f"WARN   [{warning.code}] {warning.message}")
            for problem in report.problems:
                self.stdout.write(f"ERROR  [{problem.code}] {problem.message}")
                if problem.detail:
                    for line in problem.detail.splitlines()[-12:]:
                        self.stdout.write(f"         {line}")
            self.stdout.write(report.summary())
        if not report.ok:
            raise CommandError(report.summary())
