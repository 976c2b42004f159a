"""What a challenge's phase still allows to change: one rule for imports and the objective stage.

Once the listening test is open its stimuli are fixed, and what they were drawn from must stay as
it is; once the results are published nothing changes at all.
"""

from __future__ import annotations

from .models import Challenge


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
