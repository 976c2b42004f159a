"""Create the demo challenge and the demo organizer account (development machines only)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from stimuli.demo import seed_demo


class Command(BaseCommand):
    help = "Create the demo challenge with synthesized audio and an organizer account (DEBUG only)."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000/", help="Where the site runs.")

    def handle(self, *args, **options):
        if not settings.DEBUG:
            raise CommandError("The demo sets a known password; run it with DEBUG=1 only.")
        summary = seed_demo()
        verb = "Created" if summary.created else "Found"
        self.stdout.write(f"{verb} the demo challenge '{summary.challenge.name}'.")
        url = options["url"].rstrip("/")
        self.stdout.write(
            "\n"
            f"  Site:       {url}/\n"
            f"  Organizer:  {url}/organize/{summary.challenge.slug}/\n"
            f"  Admin:      {url}/admin/\n"
            f"  API docs:   {url}/api/docs/\n"
            f"  Log in as:  {summary.username} / {summary.password}\n"
        )
