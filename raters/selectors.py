"""Read-only queries of the listening test: the rating tables scoring reads, CSV export, and the
organizers' monitoring figures."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable

from django.db.models import Count, Q

from stimuli.models import Challenge

from .models import CategorySession, DiversityRating, ListeningTest, Rater, Rating, Stimulus

RATING_COLUMNS = (
    "rater",
    "rater_team",
    "session",
    "category",
    "system",
    "track",
    "stimulus",
    "role",
    "quality",
    "fit",
    "plays",
    "seeks",
    "heard_fraction",
    "answer_s",
)
DIVERSITY_COLUMNS = (
    "rater",
    "rater_team",
    "category",
    "system",
    "track",
    "diversity",
    "plays",
    "seeks",
    "heard_fraction",
    "answer_s",
)

# DCASE 2023 Task 7: a check is misrated when the answer contradicts the anchor's type, and a
# session with FAIL_AT misrated checks or more is excluded. These are the defaults; a challenge's
# own rules come from scoring (see `use_check_rule`).
LOW, HIGH = 3, 7
FAIL_AT = 5

Misrated = Callable[[str, int, int], bool]
CheckRule = Callable[[Challenge], tuple[Misrated, int]]


def rating_rows(challenge: Challenge) -> list[dict]:
    """One row per quality/fit rating, in the export format scoring reads.

    `category` is the category's slug, `system` the system's name and `track` its code (both
    empty for anchors), `rater` the rater's pseudonymous code and `rater_team` the team's name or
    "" for raters outside any team.
    """
    ratings = (
        Rating.objects.filter(trial__session__rater__challenge=challenge)
        .select_related(
            "trial__session__rater__team",
            "trial__session__category",
            "trial__stimulus__system__track",
            "trial__stimulus__category",
            "trial__anchor",
        )
        .order_by("trial__session__rater__index", "trial__session__order", "trial__position")
    )
    rows = []
    for rating in ratings:
        trial = rating.trial
        session = trial.session
        rater = session.rater
        stimulus = trial.stimulus
        rows.append(
            {
                "rater": rater.code,
                "rater_team": rater.team.name if rater.team else "",
                "session": session.code,
                "category": session.category.slug,
                "system": stimulus.system.name if stimulus else "",
                "track": stimulus.system.track.code if stimulus else "",
                "stimulus": stimulus.code if stimulus else f"anchor/{trial.anchor_id}",
                "role": trial.role,
                "quality": rating.quality,
                "fit": rating.fit,
                **_listening(rating),
            }
        )
    return rows


def _listening(rating) -> dict:
    """What the answer was given after; empty for answers stored before it was recorded."""

    def blank(value):
        return "" if value is None else value

    return {
        "plays": blank(rating.plays),
        "seeks": blank(rating.seeks),
        "heard_fraction": blank(rating.heard_fraction),
        "answer_s": blank(rating.answer_s),
    }


def diversity_rows(challenge: Challenge) -> list[dict]:
    """One row per diversity rating: `rater, rater_team, category, system, track, diversity`."""
    ratings = (
        DiversityRating.objects.filter(trial__rater__challenge=challenge)
        .select_related("trial__rater__team", "trial__item__system__track", "trial__item__category")
        .order_by("trial__rater__index", "trial__position")
    )
    return [
        {
            "rater": r.trial.rater.code,
            "rater_team": r.trial.rater.team.name if r.trial.rater.team else "",
            "category": r.trial.item.category.slug,
            "system": r.trial.item.system.name,
            "track": r.trial.item.system.track.code,
            "diversity": r.diversity,
            **_listening(r),
        }
        for r in ratings
    ]


def to_csv(rows: list[dict], columns: tuple[str, ...]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def misrated(role: str, quality: int, fit: int) -> bool:
    """The DCASE 2023 Task 7 rule: whether an answer to a check contradicts its anchor's type."""
    if role == "anchor_hq_goodfit":
        return quality <= LOW or fit <= LOW
    if role == "anchor_hq_poorfit":
        return quality <= LOW or fit >= HIGH
    if role == "anchor_lq_poorfit":
        return quality >= HIGH or fit >= HIGH
    return False


def _dcase_rule(challenge: Challenge) -> tuple[Misrated, int]:
    return misrated, FAIL_AT


_check_rule: CheckRule = _dcase_rule


def use_check_rule(rule: CheckRule) -> None:
    """Judge checks by `rule(challenge) -> (misrated(role, quality, fit), exclude_at)`.

    Scoring owns a challenge's rules and installs them when the apps load: assignment and
    monitoring must call a session failing exactly when scoring will exclude it, and this app may
    not import scoring.
    """
    global _check_rule
    _check_rule = rule


def session_checks(challenge: Challenge) -> dict[int, dict]:
    """Per session: checks answered, checks misrated, and whether the session fails already
    (by the challenge's scoring rules)."""
    is_misrated, exclude_at = _check_rule(challenge)
    result: dict[int, dict] = defaultdict(lambda: {"checks": 0, "misrated": 0, "failing": False})
    answered = Rating.objects.filter(trial__session__rater__challenge=challenge).exclude(
        trial__role="trial"
    )
    for session_id, role, quality, fit in answered.values_list(
        "trial__session_id", "trial__role", "quality", "fit"
    ):
        entry = result[session_id]
        entry["checks"] += 1
        if is_misrated(role, quality, fit):
            entry["misrated"] += 1
            entry["failing"] = entry["misrated"] >= exclude_at
    return dict(result)


def stimulus_progress(challenge: Challenge) -> list[dict]:
    """Per stimulus: ratings so far, those from sessions passing the quality checks (the ones
    scoring will use) against the target, and trials assigned."""
    test = ListeningTest.objects.filter(challenge=challenge).first()
    target = test.target_ratings if test else 0
    failing = [pk for pk, c in session_checks(challenge).items() if c["failing"]]
    rows = (
        Stimulus.objects.filter(challenge=challenge)
        .select_related("system__track", "category")
        .annotate(
            n_ratings=Count("trials", filter=Q(trials__rating__isnull=False)),
            n_usable=Count(
                "trials",
                filter=Q(trials__rating__isnull=False) & ~Q(trials__session_id__in=failing),
            ),
            n_planned=Count("trials"),
        )
        .order_by("category__position", "system__name", "position")
    )
    return [
        {
            "stimulus": s,
            "ratings": s.n_ratings,
            "usable": s.n_usable,
            "planned": s.n_planned,
            "target": target,
            "reached": s.n_usable >= target,
        }
        for s in rows
    ]


def category_progress(challenge: Challenge) -> list[dict]:
    """Per category: stimuli, the fewest and most ratings of any of them, and sessions."""
    per: dict[int, dict] = {}
    for row in stimulus_progress(challenge):
        category = row["stimulus"].category
        entry = per.setdefault(
            category.pk,
            {"category": category, "stimuli": 0, "min": None, "max": 0, "reached": 0},
        )
        entry["stimuli"] += 1
        usable = row["usable"]
        entry["min"] = usable if entry["min"] is None else min(entry["min"], usable)
        entry["max"] = max(entry["max"], usable)
        entry["reached"] += row["reached"]
    sessions = dict(
        CategorySession.objects.filter(rater__challenge=challenge)
        .values("category_id")
        .annotate(n=Count("id"))
        .values_list("category_id", "n")
    )
    for entry in per.values():
        entry["sessions"] = sessions.get(entry["category"].pk, 0)
    return list(per.values())


def rater_progress(challenge: Challenge) -> list[dict]:
    """Per rater: sessions, answers so far, and sessions already failing the quality checks."""
    checks = session_checks(challenge)
    raters = Rater.objects.filter(challenge=challenge).select_related("team", "user")
    sessions = (
        CategorySession.objects.filter(rater__challenge=challenge)
        .select_related("category")
        .annotate(
            n_trials=Count("trials"),
            n_answered=Count("trials", filter=Q(trials__rating__isnull=False)),
        )
    )
    by_rater: dict[int, list] = defaultdict(list)
    for session in sessions:
        session.checks = checks.get(session.pk, {"checks": 0, "misrated": 0, "failing": False})
        by_rater[session.rater_id].append(session)
    diversity = dict(
        DiversityRating.objects.filter(trial__rater__challenge=challenge)
        .values("trial__rater_id")
        .annotate(n=Count("id"))
        .values_list("trial__rater_id", "n")
    )
    rows = []
    for rater in raters:
        own = sorted(by_rater.get(rater.pk, []), key=lambda s: s.order)
        rows.append(
            {
                "rater": rater,
                "sessions": own,
                "answered": sum(s.n_answered for s in own),
                "trials": sum(s.n_trials for s in own),
                "closed": sum(s.state == CategorySession.State.CLOSED for s in own),
                "failing": sum(s.checks["failing"] for s in own),
                "misrated": sum(s.checks["misrated"] for s in own),
                "diversity": diversity.get(rater.pk, 0),
            }
        )
    return rows
