"""What a challenge's phase still lets change.

Once the listening test opens, its stimuli (the finalists' medoid clips) are fixed: replacing a
system's clips would delete medoids and the stimuli made of them, under raters already at work.
Once results are published nothing may change at all. The objective stage applies the same rule
to medoid selection.
"""

from __future__ import annotations

from .models import Challenge


class PhaseError(Exception):
    """The challenge's phase does not allow the change; the message says why."""


def check_clips_can_change(challenge: Challenge) -> None:
    """Raise PhaseError unless system clips (and what is chosen from them) may still change."""
    if challenge.phase == Challenge.Phase.PUBLISHED:
        raise PhaseError("the results of this challenge are published; nothing can change")
    if challenge.phase == Challenge.Phase.LISTENING:
        raise PhaseError(
            "the listening test is open: its stimuli are fixed, so system clips cannot change"
        )
