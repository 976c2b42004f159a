"""The rater-quality rules' functions for votes on A/B trials (the pairs design), registered in
`raters.rules` with the others. Plain Python: no Django here.

A vote is one row per question (`question`: quality, fit) with its `winner` (left, right, tie);
its `role` is `pair` for two stimuli, `anchor_pair` for a hidden anchor against a stimulus, whose
`expected` winner is known where the question has a known answer (empty where it has not);
`gold_pair` for a gold (trapping) sound against a stimulus, whose `expected` winner is what the
sound asks for.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

PAIR = "pair"
ANCHOR_PAIR = "anchor_pair"
GOLD_PAIR = "gold_pair"
VOTE_ROLES = (PAIR, ANCHOR_PAIR, GOLD_PAIR)
# A side of an A/B trial as the page names it.
SIDE_WORDS = {"left": "A (left)", "right": "B (right)", "tie": "a tie"}


def same_side(session: Any, rule: Mapping) -> str | None:
    """Straight-lining on A/B trials: one answer (always A, always B, or always a tie) on too
    large a share of the votes' answers. Sides are counterbalanced, so an honest rater's A and B
    answers come near even."""
    winners = [str(r["winner"]) for r in session.answers if r["role"] in VOTE_ROLES]
    if len(winners) < max(1, rule["min_answers"]):
        return None
    side, count = Counter(winners).most_common(1)[0]
    if count / len(winners) >= rule["same_share"]:
        return f"{SIDE_WORDS.get(side, side)} on {count} of {len(winners)} answers"
    return None


def anchor_pairs(session: Any, rule: Mapping) -> str | None:
    """Hidden anchors on A/B trials: an answer with a known winner (the stimulus, against a
    poor-fit anchor) given otherwise, a tie included (the middle misrates a slider anchor too)."""
    known = [r for r in session.answers if r["role"] == ANCHOR_PAIR and r.get("expected")]
    wrong = [r for r in known if r["winner"] != r["expected"]]
    if len(wrong) >= rule["exclude_at"]:
        return (
            f"{len(wrong)} of {len(known)} answers against a hidden anchor other than known "
            f"(limit {rule['exclude_at']})"
        )
    return None


# The questions whose winner is known on an A/B trial of a hidden anchor against a stimulus of
# the category, by the anchor's trial role: the stimulus fits better than a poor-fit anchor, and
# sounds better than a degraded one. A good-fit anchor's answers are not known.
KNOWN_ANSWERS = {
    "anchor_lq_poorfit": ("quality", "fit"),
    "anchor_hq_poorfit": ("fit",),
}


def role_and_expected(
    left_role: str, right_role: str, question: str, gold_vote: str = ""
) -> tuple[str, str]:
    """A vote's row role (`pair`, `anchor_pair` or `gold_pair`) and the known winner of
    `question` (empty where not known), from its sides' trial roles: on an anchor's A/B trial
    the stimulus's side where `KNOWN_ANSWERS` has it; on a gold one what the gold sound asks
    for (`gold_vote`: its own side, the other, or a tie)."""
    if left_role == "trial" and right_role == "trial":
        return PAIR, ""
    if "gold" in (left_role, right_role):
        own, other = ("left", "right") if left_role == "gold" else ("right", "left")
        return GOLD_PAIR, {"this": own, "other": other, "tie": "tie"}.get(gold_vote, "")
    anchor, stimulus_side = (left_role, "right") if left_role != "trial" else (right_role, "left")
    return ANCHOR_PAIR, stimulus_side if question in KNOWN_ANSWERS.get(anchor, ()) else ""
