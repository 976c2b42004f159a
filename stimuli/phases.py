r"""A challenge's phases as one state machine: the transitions (`TRANSITIONS`, the only code that
sets a phase, through `advance`) and what each phase still lets change (`phase_conflict`, one
rule for imports, generation and the objective stage).

    setup --start_objective--> objective --open_listening--> listening --publish_final--> published
      \______________________________open_listening_____________/^
       \______________________________________________________publish_final_________________/^

Phases only move forward: a stage that starts in a later phase leaves it where it is (the FAD
pipeline run again during the listening test, say).

Once the listening test opens, its stimuli (the finalists' medoid clips) are fixed: replacing a
system's clips would delete medoids and the stimuli made of them, under raters already at work.
Once results are published nothing may change at all.

Phases are checked under the challenge row's lock, taken FOR NO KEY UPDATE everywhere (as every
row lock of the platform is): PostgreSQL key-share locks a referenced row whenever a row pointing
at it is inserted, so a plain FOR UPDATE on the challenge would make every insert of a rater, a
job or a clip wait, and two such waits deadlock.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import Conflict
from .models import Challenge

Phase = Challenge.Phase


class PhaseError(Conflict):
    """The challenge's phase does not allow the change; the message says why."""


@dataclass(frozen=True)
class Transition:
    """One move of a challenge's phase: from which phases, to which, what refuses it and what
    it brings about."""

    target: str
    # The phases it moves from; in any other phase up to the target it changes nothing.
    sources: frozenset[str]
    # Phases in which the stage asking for it must be refused, and why (its guard).
    refused: dict[str, str]
    # What the move brings about, for readers: the stage that asks carries it out.
    effect: str


TRANSITIONS: dict[str, Transition] = {
    "start_objective": Transition(
        target=Phase.OBJECTIVE,
        sources=frozenset({Phase.SETUP}),
        refused={},
        effect="the FAD pipeline's embed job is queued (stimuli/objective/services.py `_start`)",
    ),
    "open_listening": Transition(
        target=Phase.LISTENING,
        sources=frozenset({Phase.SETUP, Phase.OBJECTIVE}),
        refused={
            Phase.PUBLISHED: (
                "Results are published, so the listening test stays closed: every publication "
                "must be of the same ratings. Collect more ratings in a new challenge."
            )
        },
        effect="the listening test opens; its stimuli, and the clips they come from, are fixed "
        "(raters/preparation.py `set_open`)",
    ),
    "publish_final": Transition(
        target=Phase.PUBLISHED,
        sources=frozenset({Phase.SETUP, Phase.OBJECTIVE, Phase.LISTENING}),
        refused={},
        effect="the final snapshot is stored; nothing of the challenge may change any more "
        "(scoring/services.py `publish`)",
    ),
}


def advance(locked: Challenge, transition: str) -> bool:
    """Apply a transition to a challenge whose row the caller has locked (FOR NO KEY UPDATE, see
    as the module says) in the current transaction; returns whether the phase moved. Raises PhaseError in a
    phase the transition refuses."""
    move = TRANSITIONS[transition]
    if why := move.refused.get(locked.phase):
        raise PhaseError(why)
    if locked.phase not in move.sources:
        return False
    Challenge.objects.filter(pk=locked.pk).update(phase=move.target)
    locked.phase = move.target
    return True


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
