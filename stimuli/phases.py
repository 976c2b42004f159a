"""What a challenge's phase still lets change: one rule for imports, generation and the
objective stage.

Once the listening test opens, its stimuli (the finalists' medoid clips) are fixed: replacing a
system's clips would delete medoids and the stimuli made of them, under raters already at work.
Once results are published nothing may change at all.

Phases are checked under the challenge row's lock, taken FOR NO KEY UPDATE everywhere (as every
row lock of the platform is): PostgreSQL key-share locks a referenced row whenever a row pointing
at it is inserted, so a plain FOR UPDATE on the challenge would make every insert of a rater, a
job or a clip wait, and two such waits deadlock.
"""

from __future__ import annotations

from .errors import Conflict
from .models import Challenge


class PhaseError(Conflict):
    """The challenge's phase does not allow the change; the message says why."""


def phase_conflict(challenge: Challenge, *, fixed_by_listening: str | None = None) -> str | None:
    """Why the challenge's phase forbids a change, or None when it allows it.

    `fixed_by_listening` names what the change would alter (as in "medoids cannot change") when
    an open listening test forbids it too.
    """
    if challenge.phase == Challenge.Phase.PUBLISHED:
        return "the results of this challenge are published; nothing can change"
    if fixed_by_listening and challenge.phase == Challenge.Phase.LISTENING:
        return f"the listening test is open: its stimuli are fixed, so {fixed_by_listening}"
    return None


def check_clips_can_change(challenge: Challenge) -> None:
    """Raise PhaseError unless system clips (and what is chosen from them) may still change."""
    if conflict := phase_conflict(challenge, fixed_by_listening="system clips cannot change"):
        raise PhaseError(conflict)
