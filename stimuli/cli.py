"""Small helpers shared by the management commands."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class TerminalProgress:
    """A one-line progress bar on stderr; a progress callback `(done, total, message)`."""

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30):
        self.label = label
        self.stream = stream or sys.stderr
        self.width = width
        self.started = time.monotonic()
        self._last = 0.0
        self.enabled = self.stream.isatty()

    def __call__(self, done: int, total: int, message: str = "") -> None:
        now = time.monotonic()
        if not self.enabled or (done < total and now - self._last < 0.1):
            return
        self._last = now
        filled = int(self.width * done / total) if total else 0
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = now - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} ({rate:.1f}/s) ")
        if done >= total:
            self.stream.write("\n")
        self.stream.flush()


def run_or_queue(command, challenge_slug: str, operation: str, start, now, *, queue: bool):
    """One objective operation from the command line: started on the workers with `queue`
    (None back, after saying so), else run here with a progress bar and its succeeded job back.
    A refusal or a failed job ends the command with its reason (CommandError)."""
    from django.core.management.base import CommandError

    from stimuli.models import Challenge, Job
    from stimuli.objective.config import ObjectiveError

    challenge = Challenge.objects.filter(slug=challenge_slug).first()
    if challenge is None:
        raise CommandError(f"no challenge '{challenge_slug}'")
    try:
        if queue:
            job = start(challenge)
            command.stdout.write(f"queued job #{job.pk}; follow it on the challenge page")
            return challenge, None
        job = now(challenge, progress=TerminalProgress(operation))
    except ObjectiveError as exc:
        raise CommandError(str(exc)) from None
    if job.state != Job.State.SUCCEEDED:
        raise CommandError(f"{operation} failed: {job.error}")
    return challenge, job
