"""Read-only queries of the listening test: the rating tables scoring reads, CSV export, and the
organizers' monitoring figures."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict

from django.db import connection, models
from django.db.models import Count, Q
from django.template.defaultfilters import pluralize

from stimuli.models import Category, Challenge

from . import platform, statements, vote_rows
from .columns import DIVERSITY_COLUMNS as DIVERSITY_COLUMNS  # the exports read it here
from .columns import FLAGS_COLUMN, RATING_COLUMNS
from .columns import VOTE_COLUMNS as VOTE_COLUMNS  # the exports read it here
from .models import (
    PAIRS,
    CategorySession,
    DiversityRating,
    GoldSound,
    ListeningTest,
    Pair,
    Rater,
    Rating,
    ScreeningAttempt,
    Stimulus,
    Trial,
    Vote,
)
from .rules import RaterRules, Verdict, assess, screening_flags

# The organizers' export: each crowd worker's id on the recruiting platform beside the
# pseudonym. Scoring reads rating_rows, which has none.
EXPORT_RATING_COLUMNS = ("rater", "participant_id", *RATING_COLUMNS[1:])
# One row per crowd worker, as Prolific's submission review takes it: the submission (its
# SESSION_ID), APPROVE or REJECT, and for a rejection its category and message; no action while
# the worker has not finished.
CROWD_COLUMNS = (
    "participant_id",
    "submission_id",
    "study_id",
    "action",
    "rejection_category",
    "message",
    "rater",
    "categories_done",
    "checks_misrated",
)


def rater_rules(challenge: Challenge) -> RaterRules:
    """The challenge's rater-quality rules: the listening test's, read with the rater on a
    rater's request (no query of their own)."""
    return listening_test(challenge).rules()


def rules_key(rules: RaterRules) -> str:
    """A short hash of the rater-quality rules: stored verdicts assessed by other rules are stale."""
    text = json.dumps(rules.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


ANSWER_FIELDS = (
    "session",
    "rater",
    "rater_kind",
    "category",
    "role",
    "quality",
    "fit",
    "heard_fraction",
    "answer_s",
    # A gold trial's expected ranges (empty for other trials), for the gold rule.
    "expected_quality_min",
    "expected_quality_max",
    "expected_fit_min",
    "expected_fit_max",
)


def answer_rows(challenge: Challenge, *, sessions: list[int] | None = None) -> list[dict]:
    """Every quality/fit answer (or those of `sessions` only), as the rules read it (the
    export's columns), in each session's order. One hand-written statement: every save reads
    its session's answers to judge it (see `statements`)."""
    if sessions is not None and not sessions:
        return []
    if listening_test(challenge).design == PAIRS:  # the answers are votes on A/B trials
        return vote_rows.answer_rows(challenge, sessions=sessions)
    table = {
        model: connection.ops.quote_name(model._meta.db_table)
        for model in (Rating, Trial, CategorySession, Rater, Category, GoldSound)
    }
    if sessions is None:
        name, where, params = "foley_answers_of_challenge", "r.challenge_id = %s", [challenge.pk]
    elif len(sessions) == 1:  # a save assessing its session
        name, where, params = "foley_answers_of_session", "t.session_id = %s", list(sessions)
    else:
        name, where = None, f"t.session_id IN ({', '.join(['%s'] * len(sessions))})"
        params = list(sessions)
    sql = (
        "SELECT t.session_id, r.code, r.kind, c.slug, t.role, k.quality, k.fit, k.heard_fraction, "
        "k.answer_s, g.quality_min, g.quality_max, g.fit_min, g.fit_max "
        f"FROM {table[Rating]} k JOIN {table[Trial]} t ON t.id = k.trial_id "
        f"LEFT JOIN {table[GoldSound]} g ON g.id = t.gold_id "
        f"JOIN {table[CategorySession]} s ON s.id = t.session_id "
        f"JOIN {table[Rater]} r ON r.id = s.rater_id JOIN {table[Category]} c ON c.id = s.category_id "
        f"WHERE {where} ORDER BY t.session_id, t.position"
    )
    result = []
    for values in statements.run(name, sql, params):
        row = dict(zip(ANSWER_FIELDS, values, strict=True))
        row["session"] = f"{row['rater']}-{row['session']}"  # CategorySession.code
        result.append(row)
    return result


def session_verdicts(
    challenge: Challenge,
    rows: list[dict] | None = None,
    *,
    rules: RaterRules | None = None,
    open_codes: list[str] | None = None,
) -> dict[int, Verdict]:
    """Per session (by id), the rater-quality rules' verdict; a session still being rated is
    assessed only by what can no longer change. This reads every answer of the challenge (for
    monitoring and scoring); the raters' pages read the verdicts stored on the sessions."""
    whole = rows is None
    rows = answer_rows(challenge) if rows is None else rows
    if open_codes is None:
        open_codes = [
            f"{code}-{pk}"
            for pk, code in CategorySession.objects.filter(
                rater__challenge=challenge, state=CategorySession.State.OPEN
            ).values_list("pk", "rater__code")
        ]
    rules = rules or rater_rules(challenge)
    # The crowd platform's record (raters.platform) and the screening checks judge raters, not
    # answers: read with the whole challenge (monitoring, scoring, exports). A save assessing
    # its own session skips them: a rater a check excludes was screened out before any session.
    if whole:
        left = platform.unreconciled(challenge)
        for row in rows:
            row["platform"] = left.get(row["rater"], "")
    verdicts = assess(rows, rules, unfinished=open_codes)
    screened = screening_failures(challenge) if whole else {}
    for verdict in verdicts.values():
        failed, crowd = screened.get(verdict.rater, ({}, False))
        verdict.flags.extend(screening_flags(failed, rules, crowd=crowd))
    return {int(v.session.rsplit("-", 1)[1]): v for v in verdicts.values()}


def screening_failures(challenge: Challenge) -> dict[str, tuple[dict[str, str], bool]]:
    """Per rater code, the screening checks whose last attempt failed (step: result in words),
    and whether the rater is a crowd worker: what the engine's screening rules read."""
    found: dict[str, tuple[dict[str, str], bool]] = {}
    attempts = (
        ScreeningAttempt.objects.filter(rater__challenge=challenge, finished_at__isnull=False)
        .order_by("rater_id", "step", "number")
        .values_list("rater__code", "rater__kind", "step", "state", "summary")
    )
    for code, kind, step, state, summary in attempts:
        failed, _ = found.setdefault(code, ({}, kind == Rater.Kind.CROWD))
        if state == ScreeningAttempt.State.FAILED:
            failed[step] = summary
        else:
            failed.pop(step, None)
    return found


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
            "trial__gold",
        )
        .order_by("trial__session__rater__index", "trial__session__order", "trial__position")
    )
    verdicts = {pk: v.summary() for pk, v in session_verdicts(challenge).items()}
    left = platform.unreconciled(challenge)
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
                "stimulus": stimulus.code
                if stimulus
                else f"gold/{trial.gold_id}"
                if trial.gold_id
                else f"anchor/{trial.anchor_id}",
                "role": trial.role,
                "quality": rating.quality,
                "fit": rating.fit,
                "rater_kind": rater.kind,
                **_expected(trial.gold),
                **_listening(rating),
                "platform": left.get(rater.code, ""),
                FLAGS_COLUMN: verdicts.get(session.pk, ""),
            }
        )
    return rows


def export_vote_rows(challenge: Challenge) -> list[dict]:
    """One row per vote on an A/B trial and question, in the votes export's format
    (`VOTE_COLUMNS`), with its session's flags by the rater-quality rules: what the scoring
    reads of the pairs design."""
    if not Vote.objects.filter(pair__session__rater__challenge=challenge).exists():
        return []  # a test of sliders: its verdicts are not read for nothing
    verdicts = {pk: v.summary() for pk, v in session_verdicts(challenge).items()}
    return vote_rows.export_rows(challenge, verdicts, platform.unreconciled(challenge))


def export_rating_rows(challenge: Challenge) -> list[dict]:
    """rating_rows with each rater's participant id (crowd workers'; "" for anyone else)."""
    ids = dict(
        Rater.objects.filter(challenge=challenge)
        .exclude(participant_id="")
        .values_list("code", "participant_id")
    )
    return [{**row, "participant_id": ids.get(row["rater"], "")} for row in rating_rows(challenge)]


def crowd_decisions(challenge: Challenge) -> list[dict]:
    """Per crowd worker, what to do with their submission on the recruiting platform: reject one
    whose sessions the rater-quality rules exclude (failed attention checks), approve one who
    finished, leave one who has not finished."""
    rows = []
    screened = screening_failures(challenge)
    for row in rater_progress(challenge):
        rater = row["rater"]
        if rater.kind != Rater.Kind.CROWD:
            continue
        checks = sum(s.verdict.anchors for s in row["sessions"])
        action = category = ""
        failed = screened.get(rater.code, ({}, True))[0]
        if failed and not row["sessions"]:
            # Screened out (or not yet through the checks): given the screen-out code, not the
            # completion code; the platform's screen-out settles it.
            message = "Screening not passed: " + "; ".join(
                f"{step} check {result}" for step, result in sorted(failed.items())
            )
        elif row["failing"] and (failed_gold := _failed_gold(row["sessions"])) >= 2:
            # Prolific lets a study reject for failed attention checks of its approved kind: an
            # explicit instruction to follow (a spoken gold trial is one), failed twice or more.
            action, category = "REJECT", "FAILED_CHECK"
            message = (
                f"Failed {failed_gold} attention checks: each an instruction to set the sliders "
                "to a stated value."
            )
        elif row["failing"]:
            # Hidden anchors and the other rules judge the answers' quality, which Prolific does
            # not accept as grounds to reject: the answers leave the scoring, the worker is paid.
            action = "APPROVE"
            n = len(row["sessions"])
            message = (
                f"Approve, though the answers are not used: {row['misrated']} of {checks} hidden "
                f"anchors misrated, {row['failing']} of {n} categor{pluralize(n, 'y,ies')} "
                "excluded. Prolific permits rejection only for failed attention checks of its "
                "approved kind (an instruction to follow, failed twice), which hidden anchors "
                "are not."
            )
        elif rater.finished_at is not None:
            action, message = "APPROVE", ""
        else:
            n = len(row["sessions"])
            message = f"Not finished: {row['closed']} of {n} categor{pluralize(n, 'y,ies')} done."
        rows.append(
            {
                "participant_id": rater.participant_id,
                "submission_id": rater.crowd_session_id,
                "study_id": rater.study_id,
                "action": action,
                "rejection_category": category,
                "message": message,
                "rater": rater.code,
                "categories_done": row["closed"],
                "checks_misrated": row["misrated"],
            }
        )
    return rows


def _failed_gold(sessions) -> int:
    """How many gold (instructed) trials the gold rule found answered other than they ask."""
    failed = 0
    for session in sessions:
        for flag in session.verdict.flags:
            if flag.rule == "gold" and (found := re.match(r"(\d+) gold", flag.reason)):
                failed += int(found.group(1))
    return failed


def _expected(gold: GoldSound | None) -> dict:
    """A gold trial's expected ranges as the export gives them ("" for other trials)."""
    return {
        f"expected_{scale}_{end}": getattr(gold, f"{scale}_{end}") if gold else ""
        for scale in ("quality", "fit")
        for end in ("min", "max")
    }


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


def excluded_sessions(challenge: Challenge) -> list[int]:
    """Sessions whose answers scoring will set aside, by the rater-quality rules."""
    return [pk for pk, verdict in session_verdicts(challenge).items() if verdict.excluded]


def own_team(challenge: Challenge) -> Q:
    """Trials of a rater's own team's system: scoring removes their ratings."""
    return Q(
        session__rater__team__isnull=False,
        session__rater__team_id=models.F("stimulus__system__team_id"),
    )


def stimulus_progress(challenge: Challenge) -> list[dict]:
    """Per stimulus: ratings so far, the usable ones (scoring will use them: not from an
    excluded session, not of the rater's own team) against the target, and trials assigned."""
    test = ListeningTest.objects.filter(challenge=challenge).first()
    target = test.target_ratings if test else 0
    excluded = excluded_sessions(challenge)
    usable = set(
        Trial.objects.filter(stimulus__challenge=challenge, rating__isnull=False)
        .exclude(session_id__in=excluded)
        .exclude(own_team(challenge))
        .values_list("pk", flat=True)
    )
    rows = (
        Stimulus.objects.filter(challenge=challenge)
        .select_related("system__track", "category")
        .annotate(
            n_ratings=Count("trials", filter=Q(trials__rating__isnull=False)),
            n_usable=Count("trials", filter=Q(trials__pk__in=usable)),
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
    """Per rater: sessions, answers so far, and each session's verdict by the rater-quality
    rules (flags with their reasons; excluded or not)."""
    verdicts = session_verdicts(challenge)
    raters = Rater.objects.filter(challenge=challenge).select_related("team", "user")
    sessions = (
        CategorySession.objects.filter(rater__challenge=challenge)
        .select_related("category")
        .annotate(
            n_trials=Count("trials"),
            n_answered=Count("trials", filter=Q(trials__rating__isnull=False)),
        )
    )
    # A session of A/B trials counts its A/B trials and their votes (its trials are their sides).
    pairs = {
        row["session"]: (row["n"], row["voted"])
        for row in Pair.objects.filter(session__rater__challenge=challenge)
        .order_by()
        .values("session")
        .annotate(n=Count("id"), voted=Count("vote"))
    }
    by_rater: dict[int, list] = defaultdict(list)
    for session in sessions:
        if session.pk in pairs:
            session.n_trials, session.n_answered = pairs[session.pk]
        session.verdict = verdicts.get(session.pk) or Verdict(session.code, "", "")
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
                "failing": sum(s.verdict.excluded for s in own),
                "flagged": sum(bool(s.verdict.flags) and not s.verdict.excluded for s in own),
                "misrated": sum(s.verdict.misrated for s in own),
                "diversity": diversity.get(rater.pk, 0),
            }
        )
    return rows


def text_prompt_rows(challenge: Challenge) -> dict[str, list[dict]]:
    """The text-prompt study's answers in the form scoring reads: interpretability marks,
    realism answers and prompt-set answers, one row each, with the judge's code and the system.

    Only interpretability clips the judge described and then marked count, and only prompt sets
    the judge answered; items the system failed on have neither.
    """
    from .models import DescriptionMark, PromptAnswer, RealismAnswer

    study = Q(trial__judge__study__challenge=challenge)
    marks = DescriptionMark.objects.filter(study).select_related(
        "trial__judge__rater", "trial__judge__system"
    )
    realism = RealismAnswer.objects.filter(study).select_related(
        "trial__judge__rater", "trial__judge__system"
    )
    prompts = PromptAnswer.objects.filter(
        prompt_set__judge__study__challenge=challenge
    ).select_related("prompt_set__judge__rater", "prompt_set__judge__system")
    return {
        "interpretability": [
            {
                "judge": m.trial.judge.rater.code,
                "system": m.trial.judge.system.name,
                "is_real": m.trial.is_real,
                "correct": m.correct,
            }
            for m in marks.order_by("trial__judge__rater__index", "trial__position")
        ],
        "realism": [
            {
                "judge": a.trial.judge.rater.code,
                "system": a.trial.judge.system.name,
                "is_real": a.trial.is_real,
                "says_real": a.says_real,
            }
            for a in realism.order_by("trial__judge__rater__index", "trial__position")
        ],
        "prompts": [
            {
                "judge": a.prompt_set.judge.rater.code,
                "system": a.prompt_set.judge.system.name,
                "prompt": a.prompt_set.prompt,
                "match": a.match,
                "quality": a.quality,
                "diversity": a.diversity,
            }
            for a in prompts.order_by("prompt_set__judge__rater__index", "prompt_set__position")
        ],
    }


# The anchor rule's identifiers in words, for the organizer's page.
ANCHOR_WORDS = {
    "anchor_hq_goodfit": "a high-quality sound of the category",
    "anchor_hq_poorfit": "a high-quality sound of another category",
    "anchor_lq_poorfit": "a degraded sound of another category",
}
CONDITION_WORDS = {
    "quality_low": "quality low",
    "quality_high": "quality high",
    "fit_low": "fit low",
    "fit_high": "fit high",
    "quality_not_high": "quality not high",
    "quality_not_low": "quality not low",
    "fit_not_high": "fit not high",
    "fit_not_low": "fit not low",
}


def rules_table(challenge: Challenge) -> list[dict]:
    """The rater-quality rules as the organizer's page states them: per rule, its action for
    invited raters and for crowd workers, and its parameters in words."""
    rows = []
    for name, values in rater_rules(challenge).to_dict().items():
        action = values.pop("action")
        crowd = values.pop("crowd_action", action)
        if name == "anchors":
            misrating = values.pop("misrating")
            values["misrated when"] = "; ".join(
                f"{ANCHOR_WORDS.get(role, role)}: {' or '.join(CONDITION_WORDS.get(c, c) for c in conditions)}"
                for role, conditions in misrating.items()
            )
        rows.append(
            {
                "name": name.replace("_", " "),
                "action": action,
                "crowd_action": crowd,
                "parameters": ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in values.items()),
            }
        )
    return rows


# --- Settings and the stimulus set -------------------------------------------------------------


def listening_test(challenge: Challenge) -> ListeningTest:
    """The challenge's listening-test settings (created with the defaults when missing); as read
    with the rater at the start of a rater's request, when it was (`statements.rater_by_key`)."""
    test = getattr(challenge, "listening_test_of_request", None)
    if test is None:
        test, _ = ListeningTest.objects.get_or_create(challenge=challenge)
    test.challenge = challenge  # read for its sample rate: no second query
    return test
