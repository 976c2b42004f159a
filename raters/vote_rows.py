"""The votes on A/B trials as rows: one per vote and question, as the rater-quality rules read
them (`answer_rows`) and as the votes export and the scoring read them (`export_rows`,
`columns.VOTE_COLUMNS`), a hidden anchor's A/B trial with its role and known winner
(`vote_rules.role_and_expected`). `raters.selectors` adds the verdicts and the crowd platform's
record."""

from __future__ import annotations

from collections.abc import Mapping

from stimuli.models import Challenge

from .models import VOTE_QUESTIONS, Trial, Vote
from .vote_rules import role_and_expected


def _heard(left, right):
    """The share heard of the less heard side (empty for a vote stored without it)."""
    return "" if left is None or right is None else min(left, right)


def answer_rows(challenge: Challenge, *, sessions: list[int] | None = None) -> list[dict]:
    """Every vote (or those of `sessions` only), one row per question, as the rules read them,
    in each session's order."""
    votes = Vote.objects.filter(pair__session__rater__challenge=challenge)
    if sessions is not None:
        votes = votes.filter(pair__session_id__in=sessions)
    fields = (
        "pair__session_id",
        "pair__session__rater__code",
        "pair__session__rater__kind",
        "pair__session__category__slug",
        "answer_s",
        "left_heard_fraction",
        "right_heard_fraction",
        "pair__left__role",
        "pair__right__role",
        "pair__left__gold__vote",
        "pair__right__gold__vote",
        *VOTE_QUESTIONS,
    )
    rows = []
    for (
        session, rater, kind, category, answer_s, left, right, left_role, right_role,
        left_gold, right_gold, *winners
    ) in votes.order_by("pair__session_id", "pair__position").values_list(*fields):  # fmt: skip
        for question, winner in zip(VOTE_QUESTIONS, winners, strict=True):
            role, expected = role_and_expected(
                left_role, right_role, question, left_gold or right_gold or ""
            )
            rows.append(
                {
                    "session": f"{rater}-{session}",  # CategorySession.code
                    "rater": rater,
                    "rater_kind": kind,
                    "category": category,
                    "role": role,
                    "question": question,
                    "winner": winner,
                    "expected": expected,
                    "heard_fraction": _heard(left, right),
                    "answer_s": "" if answer_s is None else answer_s,
                }
            )
    return rows


def _side(trial: Trial) -> tuple[str, str, str]:
    """A side's system, track and sound as the export names them (a hidden anchor's sound
    `anchor/<id>`, a gold sound's `gold/<id>`)."""
    stimulus = trial.stimulus
    if trial.gold_id is not None:
        return "", "", f"gold/{trial.gold_id}"
    if stimulus is None:
        return "", "", f"anchor/{trial.anchor_id}"
    return stimulus.system.name, stimulus.system.track.code, stimulus.code


def _blank(value):
    return "" if value is None else value


def export_rows(
    challenge: Challenge, verdicts: Mapping[int, str], platform: Mapping[str, str]
) -> list[dict]:
    """One row per vote and question in the export format (`columns.VOTE_COLUMNS`): the rater's
    pseudonymous code and team, the session, category and track, each side's system and sound
    (A is left, B right; an anchor's side no system, its sound `anchor/<id>`), the question and
    its winner (and the known one, against an anchor), and each side's listening record;
    `verdicts` gives each session's flags by id, `platform` why the crowd platform's record
    takes a rater out."""
    votes = (
        Vote.objects.filter(pair__session__rater__challenge=challenge)
        .select_related(
            "pair__session__rater__team",
            "pair__session__category",
            "pair__left__stimulus__system__track",
            "pair__left__stimulus__category",
            "pair__right__stimulus__system__track",
            "pair__right__stimulus__category",
            "pair__left__gold",
            "pair__right__gold",
        )
        .order_by("pair__session__rater__index", "pair__session__order", "pair__position")
    )
    rows = []
    for vote in votes:
        pair, session = vote.pair, vote.pair.session
        rater = session.rater
        left_system, track, left_stimulus = _side(pair.left)
        right_system, right_track, right_stimulus = _side(pair.right)
        common = {
            "rater": rater.code,
            "rater_team": rater.team.name if rater.team else "",
            "session": session.code,
            "category": session.category.slug,
            "track": track or right_track,
            "left_system": left_system,
            "right_system": right_system,
            "left_stimulus": left_stimulus,
            "right_stimulus": right_stimulus,
            "rater_kind": rater.kind,
            "heard_fraction": _heard(vote.left_heard_fraction, vote.right_heard_fraction),
            "answer_s": _blank(vote.answer_s),
            "platform": platform.get(rater.code, ""),
            "flags": verdicts.get(session.pk, ""),
        }
        for side in ("left", "right"):
            for name in ("plays", "seeks", "heard_fraction"):
                common[f"{side}_{name}"] = _blank(getattr(vote, f"{side}_{name}"))
        sound = pair.left.gold or pair.right.gold
        for question in VOTE_QUESTIONS:
            role, expected = role_and_expected(
                pair.left.role, pair.right.role, question, sound.vote if sound else ""
            )
            rows.append(
                {
                    **common,
                    "question": question,
                    "winner": getattr(vote, question),
                    "role": role,
                    "expected": expected,
                }
            )
    return rows
