"""Run the whole demo challenge and print where to look (development machines only)."""

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scoring.demo import run_demo
from stimuli.cli import TerminalProgress


class Command(BaseCommand):
    help = (
        "Create the demo challenge and run it end to end on this machine: baseline generation, "
        "objective stage, finalists and medoids, the listening test; with "
        "--simulate-raters, simulated raters fill it and the results are published (DEBUG only)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="Where the site runs.")
        parser.add_argument("--simulate-raters", action="store_true")
        parser.add_argument("--raters", type=int, default=6, help="Simulated raters.")
        parser.add_argument(
            "--clips",
            type=int,
            default=52,
            help="Clips per system and category (above 50: the league's stability on 25 and 50).",
        )

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("The demo sets a known password; run it with DEBUG=1 only.")
        started = time.monotonic()

        def echo(line: str) -> None:
            self.stdout.write(f"[{time.monotonic() - started:6.1f} s] {line}")

        try:
            run = run_demo(
                clips_per_category=options["clips"],
                simulate_raters=options["simulate_raters"],
                n_raters=options["raters"],
                echo=echo,
                progress=TerminalProgress("  working"),
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        from django.contrib.auth import get_user_model

        from stimuli.submissions.demo import seed_teams_demo

        echo("the teams' challenge: two teams submit, one valid, one failing")
        teams = seed_teams_demo(get_user_model().objects.get(username=run.username))
        url = options["url"].rstrip("/")
        slug = run.challenge.slug
        results = (
            f"{url}/results/{slug}/"
            if run.published
            else "(after publishing; run with --simulate-raters to fill the test)"
        )
        if run.published:
            listen = "closed: the results are published (publishing ends the listening test)\n"
        else:
            listen = (
                f"{url}{run.listen_path}\n"
                "              (the demo listener's personal invitation: the first browser to open\n"
                "              it gives consent; any browser that opens it later continues that one\n"
                "              rater's session)\n"
                f"  New rater:  make an invitation link per listener at "
                f"{url}/organize/{slug}/listen/\n"
            )
        self.stdout.write(
            "\n"
            f"  Site:       {url}/\n"
            f"  Organizer:  {url}/organize/{slug}/\n"
            f"  Listen:     {listen}"
            f"  Results:    {results}\n"
            f"  Text-prompt study (a judge's invitation: interpretability, realism, your prompts):\n"
            f"              {url}{run.text_judge_path}\n"
            f"  Teams:      {url}/teams/{teams.challenge.slug}/ (development phase; organizer's view:\n"
            f"              {url}/organize/{teams.challenge.slug}/submissions/)\n"
            + "".join(
                f"              team {team}: {user} / {password}\n"
                for team, user, password in teams.members
            )
            + f"  API docs:   {url}/api/docs/ (log in as the organizer first)\n"
            f"  Log in as:  {run.username} / {run.password}  (for this machine only: the password\n"
            f"              is published with the code, and a start with DEBUG=0 refuses it)\n"
        )
