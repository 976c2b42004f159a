"""Rater quality: one set of declarative rules assessing each category session, read alike by
scoring (which sessions are excluded), assignment (which sessions count toward the target),
the organizers' monitoring page and the ratings export (the flags on every row).

Plain Python over rows in the export format (`session, rater, category, role, quality, fit`,
and where known `heard_fraction`, `answer_s`; gold trials add `expected_quality`,
`expected_fit`, or the ranges `expected_quality_min`/`_max`, `expected_fit_min`/`_max`; and
`rater_kind` says whether the rater is a crowd worker). Every rule is "exclude", "flag" or "off",
and may take another action for crowd workers (`crowd_action`). By default sessions are excluded
by the hidden anchors (an answer on the wrong half of a scale, the middle included, misrates
one), and crowd workers' sessions also by straight-lining and by answering too fast; the other
rules only flag.

Rules:
- anchors: an anchor is misrated when the answer meets one of its anchor type's conditions; a
  session with `exclude_at` or more misrated anchors fails (a session left part-way, held to the
  same share of its `anchors_per_session`; one with no anchor answered cannot be vouched for).
- straight_lining: the same answer on at least `same_share` of the session's answers, or the
  variance of its answers (quality and fit pooled) under `min_variance`.
- too_fast: the median time to answer under `min_median_answer_s`.
- not_listened: more than `max_share` of the answers given to sounds heard below
  `min_heard_fraction`.
- gold: a gold (trapping) trial in the ITU-T P.808 sense, answered more than `tolerance` away
  from what it asks for (a value, or a range), more than `max_failed` times.
- favouritism: a rater whose answers to one system's sounds sit above the other raters' answers
  to the same sounds, by more than the rater's own line through the other systems and the
  panel's spread of tastes allow (`z`), or who is one of a cluster of raters lifting the same
  system (`cluster_z`, `cluster_p`); judged per rater over the whole panel (`raters.favouritism`),
  so applied where every rating is at hand (the scoring), its action on every session of the
  rater.
- platform: a crowd worker whom the crowd platform's submissions export, once loaded, does not
  list, lists as returned, timed out, rejected or screened out, or lists with another submission
  id (`raters.platform`); the rows carry the reason in `platform`.
- headphones, hearing: the screening stage's checks (`raters.screening`), judged per rater: a
  failed check's result excludes or flags every session of the rater; "exclude" also screens
  the rater out before any session (once the attempts allowed are used up).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ACTIONS = ("exclude", "flag", "off")
ANCHOR_ROLES = ("anchor_hq_goodfit", "anchor_hq_poorfit", "anchor_lq_poorfit")
# An answer at or below `low` is low, at or above `high` high; "not high" is at or below the
# middle of the scale between them, "not low" at or above it.
CONDITIONS = (
    "quality_low",
    "quality_high",
    "fit_low",
    "fit_high",
    "quality_not_high",
    "quality_not_low",
    "fit_not_high",
    "fit_not_low",
)
GOLD = "gold"
# Each anchor is made to sit at an extreme of both scales, so an answer on the wrong half of a
# scale, the middle included, misrates it: the intent of DCASE 2023 Task 7's anchor rule, which a
# rater answering 5 everywhere would otherwise pass.
DEFAULT_MISRATING = {
    "anchor_hq_goodfit": ["quality_not_high", "fit_not_high"],
    "anchor_hq_poorfit": ["quality_not_high", "fit_not_low"],
    "anchor_lq_poorfit": ["quality_not_low", "fit_not_low"],
}
# DCASE 2023 Task 7's own rule: only an answer at the opposite extreme misrates.
DCASE_MISRATING = {
    "anchor_hq_goodfit": ["quality_low", "fit_low"],
    "anchor_hq_poorfit": ["quality_low", "fit_high"],
    "anchor_lq_poorfit": ["quality_high", "fit_high"],
}
# Per rule: its default action and parameters.
DEFAULTS: dict[str, dict] = {
    "anchors": {
        "action": "exclude",
        "low": 3.0,
        "high": 7.0,
        "misrating": DEFAULT_MISRATING,
        "exclude_at": 5,
        "anchors_per_session": 12,
    },
    # Crowd workers, paid per task and unknown to the organizers, are excluded by these; invited
    # raters only flagged.
    "straight_lining": {
        "action": "flag",
        "crowd_action": "exclude",
        "same_share": 0.8,
        "min_variance": 0.25,
        "min_answers": 8,
    },
    "too_fast": {
        "action": "flag",
        "crowd_action": "exclude",
        "min_median_answer_s": 3.0,
        "min_answers": 4,
    },
    "not_listened": {"action": "flag", "min_heard_fraction": 0.9, "max_share": 0.1},
    "gold": {"action": "flag", "tolerance": 1.0, "max_failed": 0},
    # A rater lifting one system above the other raters' answers to the same sounds, alone or
    # as one of a cluster (raters.favouritism): applied over the whole panel at scoring.
    "favouritism": {
        "action": "flag",
        "crowd_action": "exclude",
        "z": 3.5,
        "cluster_z": 2.5,
        "cluster_p": 1e-4,
    },
    # The crowd platform's record (raters.platform): a participant it does not list as valid.
    "platform": {"action": "exclude"},
    # The screening checks: their thresholds are the test's screening settings.
    "headphones": {"action": "exclude"},
    "hearing": {"action": "exclude"},
}
SCREENING_RULES = ("headphones", "hearing")
RULES = tuple(DEFAULTS)


class RuleError(ValueError):
    """Rules that cannot be applied; the message says which and why."""


@dataclass(frozen=True)
class RaterRules:
    """Each rule's action and parameters; missing ones take the defaults."""

    rules: Mapping[str, Mapping] = field(default_factory=dict)

    def __post_init__(self) -> None:
        merged = {}
        given = dict(self.rules or {})
        unknown = set(given) - set(RULES)
        if unknown:
            raise RuleError(f"unknown rater-quality rule(s): {', '.join(sorted(unknown))}")
        for name, defaults in DEFAULTS.items():
            values = dict(given.get(name) or {})
            extra = set(values) - set(defaults)
            if extra:
                raise RuleError(f"{name}: unknown parameter(s) {', '.join(sorted(extra))}")
            merged[name] = {**defaults, **values}
            for key in ("action", "crowd_action"):
                if key in merged[name] and merged[name][key] not in ACTIONS:
                    raise RuleError(f"{name}: {key} must be one of {', '.join(ACTIONS)}")
            for key, default in defaults.items():
                if isinstance(default, float | int) and not isinstance(default, bool):
                    value = merged[name][key]
                    if isinstance(value, bool) or not isinstance(value, int | float):
                        raise RuleError(f"{name}: {key} must be a number")
                    if value < 0:
                        raise RuleError(f"{name}: {key} must not be negative")
        anchors = merged["anchors"]
        if not anchors["low"] < anchors["high"]:
            raise RuleError("anchors: low must be below high")
        if anchors["exclude_at"] < 1:
            raise RuleError("anchors: exclude_at must be at least 1")
        for role, conditions in dict(anchors["misrating"]).items():
            if role not in ANCHOR_ROLES or any(c not in CONDITIONS for c in conditions):
                raise RuleError(f"anchors: bad misrating rule for {role!r}")
        object.__setattr__(self, "rules", merged)

    def __getitem__(self, name: str) -> Mapping:
        return self.rules[name]

    def to_dict(self) -> dict:
        return {name: dict(values) for name, values in self.rules.items()}


@dataclass
class Flag:
    rule: str
    action: str  # "exclude" or "flag"
    reason: str

    def __str__(self) -> str:
        return (
            f"{'excluded' if self.action == 'exclude' else 'flagged'} by {self.rule}: {self.reason}"
        )


@dataclass
class Verdict:
    """One session assessed: its anchors answered, and the rules it broke with their reasons."""

    session: str
    rater: str
    category: str
    anchors: int = 0
    misrated: int = 0
    misratings: list[str] = field(default_factory=list)
    flags: list[Flag] = field(default_factory=list)

    @property
    def excluded(self) -> bool:
        return any(f.action == "exclude" for f in self.flags)

    def summary(self) -> str:
        """The flags with their reasons, as one line of the export."""
        return "; ".join(str(f) for f in self.flags)


def misrated(rules: RaterRules, role: str, quality: float, fit: float) -> list[str]:
    """The conditions of the anchor's rule that this answer meets (empty: rated as expected)."""
    anchors = rules["anchors"]
    middle = (anchors["low"] + anchors["high"]) / 2
    state = {
        "quality_low": quality <= anchors["low"],
        "quality_high": quality >= anchors["high"],
        "fit_low": fit <= anchors["low"],
        "fit_high": fit >= anchors["high"],
        "quality_not_high": quality <= middle,
        "quality_not_low": quality >= middle,
        "fit_not_high": fit <= middle,
        "fit_not_low": fit >= middle,
    }
    return [c for c in anchors["misrating"].get(role, ()) if state[c]]


def _number(value) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def assess_session(
    session: str,
    rater: str,
    category: str,
    answers: Sequence[Mapping],
    rules: RaterRules,
    *,
    finished: bool = True,
) -> Verdict:
    """Assess one session's answers. An unfinished session (still being rated) is assessed only by
    what can no longer change: misrated anchors already at `exclude_at`."""
    verdict = Verdict(session, rater, category)
    anchors = rules["anchors"]
    crowd = any(row.get("rater_kind") == "crowd" for row in answers)
    for row in answers:
        role = str(row["role"])
        if role in ANCHOR_ROLES:
            quality, fit = float(row["quality"]), float(row["fit"])
            verdict.anchors += 1
            conditions = misrated(rules, role, quality, fit)
            if conditions:
                verdict.misrated += 1
                verdict.misratings.append(
                    f"{role} rated quality {quality:g}, fit {fit:g} ({', '.join(conditions)})"
                )

    def add(name: str, reason: str) -> None:
        action = rules[name][
            "crowd_action" if crowd and "crowd_action" in rules[name] else "action"
        ]
        if action != "off":
            verdict.flags.append(Flag(name, action, reason))

    answered, wrong, per = verdict.anchors, verdict.misrated, anchors["anchors_per_session"]
    if wrong >= anchors["exclude_at"]:
        add("anchors", f"{wrong} of {answered} anchors misrated (limit {anchors['exclude_at']})")
    elif finished and per and answered < per:
        if answered == 0:
            add("anchors", "no anchor answered")
        elif wrong * per >= anchors["exclude_at"] * answered:
            add(
                "anchors",
                f"{wrong} of {answered} anchors misrated in a session left part-way (limit "
                f"{anchors['exclude_at']} of {per})",
            )

    values = [(float(r["quality"]), float(r["fit"])) for r in answers if r["role"] != GOLD]
    rule = rules["straight_lining"]
    if len(values) >= max(1, rule["min_answers"]):
        answer, count = Counter(values).most_common(1)[0]
        pooled = [v for pair in values for v in pair]
        variance = statistics.pvariance(pooled)
        if count / len(values) >= rule["same_share"]:
            add(
                "straight_lining",
                f"the same answer ({answer[0]:g}, {answer[1]:g}) on {count} of {len(values)}",
            )
        elif variance < rule["min_variance"]:
            add("straight_lining", f"answers vary by {variance:.2f} (variance), too little")

    _speed_and_listening(answers, rules, add)

    if reason := next((str(r["platform"]) for r in answers if r.get("platform")), ""):
        add("platform", reason)

    rule = rules["gold"]
    failed = 0
    for row in answers:
        if row["role"] != GOLD:
            continue
        for scale in ("quality", "fit"):
            expected = _number(row.get(f"expected_{scale}"))
            low = _number(row.get(f"expected_{scale}_min"))
            high = _number(row.get(f"expected_{scale}_max"))
            if expected is not None:
                low = high = expected
            if low is None or high is None:
                continue
            answer = float(row[scale])
            if answer < low - rule["tolerance"] or answer > high + rule["tolerance"]:
                failed += 1
                break
    if failed > rule["max_failed"]:
        add("gold", f"{failed} gold trial(s) answered other than they ask")
    return verdict


def assess(
    rows: Iterable[Mapping], rules: RaterRules, *, unfinished: Iterable[str] = ()
) -> dict[tuple[str, str, str], Verdict]:
    """Every session in the rows, assessed, by (rater, category, session); `unfinished` names
    sessions still being rated."""
    groups: dict[tuple[str, str, str], list[Mapping]] = {}
    for row in rows:
        key = (str(row["rater"]).strip(), str(row["category"]).strip(), str(row["session"]).strip())
        groups.setdefault(key, []).append(row)
    open_ = set(unfinished)
    return {
        key: assess_session(key[2], key[0], key[1], answers, rules, finished=key[2] not in open_)
        for key, answers in sorted(groups.items())
    }


def screening_flags(failed: Mapping[str, str], rules: RaterRules, *, crowd: bool) -> list[Flag]:
    """A rater's failed screening checks (`failed`: step to its result in words) as the flags
    every session of the rater carries."""
    flags = []
    for name in SCREENING_RULES:
        if name not in failed:
            continue
        rule = rules[name]
        action = rule["crowd_action" if crowd and "crowd_action" in rule else "action"]
        if action != "off":
            flags.append(Flag(name, action, f"{name} check failed: {failed[name]}"))
    return flags


def assess_judge(
    judge: str, answers: Sequence[Mapping], rules: RaterRules, *, crowd: bool = False
) -> Verdict:
    """A judge of the text-prompt study, by the same rules as a listening session: too_fast and
    not_listened over the answers to sounds (descriptions and realism marks: `answer_s`,
    `heard_fraction`), and gold over the realism test's gold clips (rows with `gold` true: a
    real clip known to be real, failed when marked generated)."""
    verdict = Verdict(judge, judge, "text-prompt")

    def add(name: str, reason: str) -> None:
        action = rules[name][
            "crowd_action" if crowd and "crowd_action" in rules[name] else "action"
        ]
        if action != "off":
            verdict.flags.append(Flag(name, action, reason))

    _speed_and_listening(answers, rules, add)
    failed = sum(1 for r in answers if r.get("gold") and not r.get("says_real"))
    if failed > rules["gold"]["max_failed"]:
        add("gold", f"{failed} gold real clip(s) marked generated")
    return verdict


def _speed_and_listening(answers: list[Mapping], rules: RaterRules, add) -> None:
    """The too_fast and not_listened rules over one rater's answers (a session, or a judge's)."""
    rule = rules["too_fast"]
    times = [t for r in answers if (t := _number(r.get("answer_s"))) is not None]
    if len(times) >= max(1, rule["min_answers"]):
        median = statistics.median(times)
        if median < rule["min_median_answer_s"]:
            add(
                "too_fast",
                f"median {median:.1f} s to answer (limit {rule['min_median_answer_s']:g} s)",
            )
    rule = rules["not_listened"]
    heard = [h for r in answers if (h := _number(r.get("heard_fraction"))) is not None]
    if heard:
        short = sum(h < rule["min_heard_fraction"] for h in heard)
        if short / len(heard) > rule["max_share"]:
            add(
                "not_listened",
                f"{short} of {len(heard)} sounds heard below "
                f"{round(100 * rule['min_heard_fraction'])}%",
            )
