from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "E-mail every team whose submission deadline falls within the next day (once)."

    def handle(self, *args, **options) -> None:
        from stimuli.submissions.notifications import remind_deadlines

        self.stdout.write(f"{remind_deadlines()} team(s) reminded")
