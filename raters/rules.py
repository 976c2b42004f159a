"""Rater quality: one registry of rater-quality rules, each declared once (`Rule`: its code, the
short code of its monitoring column, its label, its default action and parameters, what each
parameter means, and the function that assesses), read alike by scoring (which sessions are
excluded), assignment (which sessions count toward the target), the organizers' monitoring page
and form, the ratings export (the flags on every row) and the manual's table of the rules
(docs/scoring.md, held to the registry by a test).

A rule judges one of three things (its `scope`):
- SESSION: one category session's answers, rows in the export format (`session, rater,
  category, role, quality, fit`, and where known `heard_fraction`, `answer_s`; gold trials add
  `expected_quality`, `expected_fit`, or the ranges `expected_quality_min`/`_max`,
  `expected_fit_min`/`_max`; `rater_kind` says whether the rater is a crowd worker; `platform`
  why the crowd platform's record takes the rater out; a vote on an A/B trial is one row per
  question, role `pair`, with `question` and `winner`). Its function takes the `Session` and the
  rule's parameters and returns the reason the session breaks it, or None. A rule with a `judge`
  function assesses the text-prompt study's judges too, over their answers to sounds.
- SCREENING: one rater's screening checks (step: result in words of each check whose last
  attempt failed), the rule's action on every session of the rater.
- PANEL: every rater at once, over trial rows (rater, system, stimulus, quality, fit) with the
  self-ratings left out; its function returns what it found: the raters it could judge
  (`judged`) and those it names, with the words (`named`); its action on every session of each
  rater named. A panel rule with a `votes` function judges the votes on A/B trials too.

Every rule is "exclude", "flag" or "off", and may take another action for crowd workers
(`crowd_action`). By default sessions are excluded by the hidden anchors (an answer on the wrong
half of a scale, the middle included, misrates one), and crowd workers' sessions also by
straight-lining, by answering too fast and by favouritism; the platform's record and the
screening checks exclude; the other rules only flag.

A new rule: its function and its `register(Rule(...))` at the end of this module (a long
function in a module of its own, imported here, as `favouritism.find` is), its row in the
manual's table, and a test of its verdicts; nothing else.

Plain Python: no Django here.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import favouritism, vote_favouritism

# Votes on A/B trials (the pairs design), one row per question (raters.vote_rules): the anchor,
# straight-lining and gold rules read slider answers only; the same-side and anchor-pair rules
# read these.
from .vote_rules import GOLD_PAIR, VOTE_ROLES, anchor_pairs, same_side

ACTIONS = ("exclude", "flag", "off")
SESSION, SCREENING, PANEL = "session", "screening", "panel"
SCOPES = (SESSION, SCREENING, PANEL)
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


class RuleError(ValueError):
    """Rules that cannot be applied; the message says which and why."""


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


@dataclass(frozen=True)
class Session:
    """What a session rule reads: the session's answers, its verdict so far (the anchor rule
    counts the anchors into it), and whether the session is finished (an unfinished one, still
    being rated, is assessed only by what can no longer change)."""

    answers: Sequence[Mapping]
    verdict: Verdict
    finished: bool = True


class PanelFinding(Protocol):
    """What a panel rule's function returns."""

    @property
    def judged(self) -> Collection[Hashable]: ...  # the raters the rule could judge

    @property
    def named(self) -> Mapping[Hashable, str]: ...  # the raters it names, with the words


@dataclass(frozen=True)
class Rule:
    """One rater-quality rule, declared once: everything else (the engine, the monitoring
    table's column and sort, the organizer's page, the manual's table) follows from it."""

    code: str  # the rule's name in the settings, the flags and the export
    label: str  # in words, where the page names it
    scope: str  # SESSION, SCREENING or PANEL
    summary: str  # what breaks it, one sentence for the manual's table
    defaults: Mapping[str, Any]  # "action", optionally "crowd_action", and the parameters
    words: Mapping[str, str]  # per parameter, what it means
    # SESSION: (Session, parameters) -> reason or None; SCREENING: (failed checks, parameters)
    # -> reason or None; PANEL: (trial rows, parameters) -> PanelFinding.
    assess: Callable[..., Any]
    short: str = ""  # the monitoring table's column head; "" for no column
    judge: Callable[[Session, Mapping], str | None] | None = None  # text-prompt judges too
    # PANEL: (vote rows, parameters) -> PanelFinding, where the rule judges votes on A/B trials
    # too (raters.vote_favouritism.VoteRow).
    votes: Callable[..., Any] | None = None
    check: Callable[[Mapping], None] | None = None  # further checks of the parameters

    def parameters(self) -> dict[str, Any]:
        return {k: v for k, v in self.defaults.items() if k not in ("action", "crowd_action")}


# Every rule, in the order the engine applies them, the pages list them and a session's flags
# come: filled by `register` below.
REGISTRY: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Add a rule to the registry (checked whole, so a rule declared wrong fails on import)."""
    if rule.code in REGISTRY:
        raise RuleError(f"rule {rule.code!r} is registered already")
    if rule.scope not in SCOPES:
        raise RuleError(f"{rule.code}: scope must be one of {', '.join(SCOPES)}")
    for key in ("action", "crowd_action"):
        if key in rule.defaults and rule.defaults[key] not in ACTIONS:
            raise RuleError(f"{rule.code}: default {key} must be one of {', '.join(ACTIONS)}")
    if "action" not in rule.defaults:
        raise RuleError(f"{rule.code}: no default action")
    if set(rule.words) != set(rule.parameters()):
        raise RuleError(f"{rule.code}: every parameter, and only they, need their words")
    if rule.short and any(r.short == rule.short for r in REGISTRY.values()):
        raise RuleError(f"{rule.code}: short code {rule.short!r} is taken")
    if rule.judge is not None and rule.scope != SESSION:
        raise RuleError(f"{rule.code}: only a session rule assesses judges")
    if rule.votes is not None and rule.scope != PANEL:
        raise RuleError(f"{rule.code}: only a panel rule has a function for votes")
    REGISTRY[rule.code] = rule
    return rule


def unregister(code: str) -> None:
    """Take a rule out of the registry (a test's toy rule)."""
    REGISTRY.pop(code)


def registered(scope: str | None = None) -> list[Rule]:
    """The registered rules in order, or those of one scope."""
    return [r for r in REGISTRY.values() if scope is None or r.scope == scope]


def columns() -> list[Rule]:
    """The rules with a column of their own in the monitoring table, in order."""
    return [r for r in REGISTRY.values() if r.short]


def action_of(rule: Mapping, *, crowd: bool) -> str:
    """A rule's action (its parameters as set) for a crowd worker or anyone else."""
    return rule["crowd_action" if crowd and "crowd_action" in rule else "action"]


@dataclass(frozen=True)
class RaterRules:
    """Each rule's action and parameters; missing ones take the defaults."""

    rules: Mapping[str, Mapping] = field(default_factory=dict)

    def __post_init__(self) -> None:
        merged = {}
        given = dict(self.rules or {})
        unknown = set(given) - set(REGISTRY)
        if unknown:
            raise RuleError(f"unknown rater-quality rule(s): {', '.join(sorted(unknown))}")
        for name, rule in REGISTRY.items():
            defaults = rule.defaults
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
        for name, rule in REGISTRY.items():
            if rule.check is not None:
                rule.check(merged[name])
        object.__setattr__(self, "rules", merged)

    @classmethod
    def of(
        cls,
        given: Mapping | None,
        *,
        low: float,
        high: float,
        misrating: Mapping[str, Sequence[str]],
        exclude_at: int,
        anchors_per_session: int,
    ) -> RaterRules:
        """The rules from the settings that hold them (the listening test's, the scoring's):
        the anchor rule's parameters are settings of their own, the other rules' and the anchor
        rule's action are in `given`."""
        rules = {name: dict(values) for name, values in dict(given or {}).items()}
        rules["anchors"] = {
            **rules.get("anchors", {}),
            "low": low,
            "high": high,
            "misrating": {k: list(v) for k, v in dict(misrating or {}).items()},
            "exclude_at": exclude_at,
            "anchors_per_session": anchors_per_session,
        }
        return cls(rules)

    def __getitem__(self, name: str) -> Mapping:
        return self.rules[name]

    def to_dict(self) -> dict:
        return {name: dict(values) for name, values in self.rules.items()}


# --- The engine ---------------------------------------------------------------------------------


def _flag(verdict: Verdict, name: str, action: str, reason: str | None) -> None:
    if reason and action != "off":
        verdict.flags.append(Flag(name, action, reason))


def assess_session(
    session: str,
    rater: str,
    category: str,
    answers: Sequence[Mapping],
    rules: RaterRules,
    *,
    finished: bool = True,
) -> Verdict:
    """Assess one session's answers by every session rule, in the registry's order. An
    unfinished session (still being rated) is assessed only by what can no longer change:
    misrated anchors already at `exclude_at`."""
    verdict = Verdict(session, rater, category)
    crowd = any(row.get("rater_kind") == "crowd" for row in answers)
    seen = Session(answers, verdict, finished)
    for rule in registered(SESSION):
        params = rules[rule.code]
        _flag(verdict, rule.code, action_of(params, crowd=crowd), rule.assess(seen, params))
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
    verdict = Verdict("", "", "")
    for rule in registered(SCREENING):
        params = rules[rule.code]
        _flag(verdict, rule.code, action_of(params, crowd=crowd), rule.assess(failed, params))
    return verdict.flags


def assess_judge(
    judge: str, answers: Sequence[Mapping], rules: RaterRules, *, crowd: bool = False
) -> Verdict:
    """A judge of the text-prompt study, by the rules that judge judges too (`Rule.judge`): over
    the answers to sounds (descriptions and realism marks: `answer_s`, `heard_fraction`, and on
    the realism test's gold clips `gold` true and `says_real`)."""
    verdict = Verdict(judge, judge, "text-prompt")
    seen = Session(answers, verdict)
    for rule in registered(SESSION):
        if rule.judge is not None:
            params = rules[rule.code]
            _flag(verdict, rule.code, action_of(params, crowd=crowd), rule.judge(seen, params))
    return verdict


@dataclass
class Panel:
    """A panel rule applied: what it found, and the flag of each rater named whose action is
    not off."""

    finding: PanelFinding
    flags: dict[Hashable, Flag]


def assess_panel(
    rows: Sequence,
    rules: RaterRules,
    *,
    crowd: Collection[Hashable] = frozenset(),
    skip_off: bool = False,
    votes: bool = False,
) -> dict[str, Panel]:
    """Every panel rule over the trial rows (rater, system, stimulus, quality, fit; self-ratings
    left out), or with `votes` over vote rows (`vote_favouritism.VoteRow`; self-votes left out)
    by the rules that judge votes, by rule; `crowd` names the crowd workers among the raters.
    `skip_off` leaves out a rule whose actions are both off."""
    out = {}
    for rule in registered(PANEL):
        params = rules[rule.code]
        if skip_off and {params["action"], params.get("crowd_action", "off")} == {"off"}:
            continue
        function = rule.votes if votes else rule.assess
        if function is None:
            continue
        finding = function(rows, params)
        flags = {}
        for rater, words in finding.named.items():
            action = action_of(params, crowd=rater in crowd)
            if action != "off":
                flags[rater] = Flag(rule.code, action, words)
        out[rule.code] = Panel(finding, flags)
    return out


def add_panel_flags(panels: Mapping[str, Panel], verdicts: Mapping[tuple, Verdict]) -> None:
    """Each panel rule's flag on every session of the rater it names (`verdicts` by (rater,
    category, session))."""
    by_rater: dict[Hashable, list[Verdict]] = {}
    for key, verdict in verdicts.items():
        by_rater.setdefault(key[0], []).append(verdict)
    for panel in panels.values():
        for rater, flag in sorted(panel.flags.items()):
            for verdict in by_rater.get(rater, []):
                verdict.flags.append(flag)


# --- The rules ----------------------------------------------------------------------------------


def _number(value) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def misrated(rules: RaterRules, role: str, quality: float, fit: float) -> list[str]:
    """The conditions of the anchor's rule that this answer meets (empty: rated as expected)."""
    return _misrated(rules["anchors"], role, quality, fit)


def _misrated(anchors: Mapping, role: str, quality: float, fit: float) -> list[str]:
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


def _anchors(session: Session, rule: Mapping) -> str | None:
    """Counts the anchors and the misrated ones into the verdict, whatever the rule's action."""
    verdict = session.verdict
    for row in session.answers:
        role = str(row["role"])
        if role in ANCHOR_ROLES:
            quality, fit = float(row["quality"]), float(row["fit"])
            verdict.anchors += 1
            conditions = _misrated(rule, role, quality, fit)
            if conditions:
                verdict.misrated += 1
                verdict.misratings.append(
                    f"{role} rated quality {quality:g}, fit {fit:g} ({', '.join(conditions)})"
                )
    answered, wrong, per = verdict.anchors, verdict.misrated, rule["anchors_per_session"]
    if wrong >= rule["exclude_at"]:
        return f"{wrong} of {answered} anchors misrated (limit {rule['exclude_at']})"
    # A session of A/B trials holds no slider anchors to count.
    votes_only = all(row["role"] in VOTE_ROLES for row in session.answers)
    if session.finished and per and answered < per and not votes_only:
        if answered == 0:
            return "no anchor answered"
        if wrong * per >= rule["exclude_at"] * answered:
            return (
                f"{wrong} of {answered} anchors misrated in a session left part-way (limit "
                f"{rule['exclude_at']} of {per})"
            )
    return None


def _check_anchors(rule: Mapping) -> None:
    if not rule["low"] < rule["high"]:
        raise RuleError("anchors: low must be below high")
    if rule["exclude_at"] < 1:
        raise RuleError("anchors: exclude_at must be at least 1")
    for role, conditions in dict(rule["misrating"]).items():
        if role not in ANCHOR_ROLES or any(c not in CONDITIONS for c in conditions):
            raise RuleError(f"anchors: bad misrating rule for {role!r}")


def _straight_lining(session: Session, rule: Mapping) -> str | None:
    values = [
        (float(r["quality"]), float(r["fit"]))
        for r in session.answers
        if r["role"] not in (GOLD, *VOTE_ROLES)
    ]
    if len(values) < max(1, rule["min_answers"]):
        return None
    answer, count = Counter(values).most_common(1)[0]
    pooled = [v for pair in values for v in pair]
    variance = statistics.pvariance(pooled)
    if count / len(values) >= rule["same_share"]:
        return f"the same answer ({answer[0]:g}, {answer[1]:g}) on {count} of {len(values)}"
    if variance < rule["min_variance"]:
        return f"answers vary by {variance:.2f} (variance), too little"
    return None


def _too_fast(session: Session, rule: Mapping) -> str | None:
    times = [t for r in session.answers if (t := _number(r.get("answer_s"))) is not None]
    if len(times) >= max(1, rule["min_answers"]):
        median = statistics.median(times)
        if median < rule["min_median_answer_s"]:
            return f"median {median:.1f} s to answer (limit {rule['min_median_answer_s']:g} s)"
    return None


def _not_listened(session: Session, rule: Mapping) -> str | None:
    heard = [h for r in session.answers if (h := _number(r.get("heard_fraction"))) is not None]
    if heard:
        short = sum(h < rule["min_heard_fraction"] for h in heard)
        if short / len(heard) > rule["max_share"]:
            return (
                f"{short} of {len(heard)} sounds heard below "
                f"{round(100 * rule['min_heard_fraction'])}%"
            )
    return None


def _gold(session: Session, rule: Mapping) -> str | None:
    failed = 0
    for row in session.answers:
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
    # A gold A/B trial's answers: each question's winner against what the sound asks for.
    voted = sum(
        1
        for row in session.answers
        if row["role"] == GOLD_PAIR and row["winner"] != row["expected"]
    )
    if failed + voted > rule["max_failed"]:
        return "; ".join(
            words
            for count, words in (
                (failed, f"{failed} gold trial(s) answered other than they ask"),
                (voted, f"{voted} answer(s) on gold A/B trials other than they ask"),
            )
            if count
        )
    return None


def _gold_judged(session: Session, rule: Mapping) -> str | None:
    """The realism test's gold clips: a real clip known to be real, failed when marked
    generated."""
    failed = sum(1 for r in session.answers if r.get("gold") and not r.get("says_real"))
    if failed > rule["max_failed"]:
        return f"{failed} gold real clip(s) marked generated"
    return None


def _platform(session: Session, rule: Mapping) -> str | None:
    return next((str(r["platform"]) for r in session.answers if r.get("platform")), None)


def _screening_check(step: str) -> Callable[[Mapping[str, str], Mapping], str | None]:
    def failed_check(failed: Mapping[str, str], rule: Mapping) -> str | None:
        return f"{step} check failed: {failed[step]}" if step in failed else None

    return failed_check


# --- The registry: one declaration per rule -----------------------------------------------------

ANCHORS = register(
    Rule(
        code="anchors",
        short="AN",
        label="anchors",
        scope=SESSION,
        summary="An anchor is misrated when the answer meets one of its anchor type's "
        "conditions; a session with `exclude_at` or more misrated anchors fails (a session left "
        "part-way is held to the same share of `anchors_per_session`; one with no anchor "
        "answered cannot be vouched for, unless its answers are votes on A/B trials).",
        defaults={
            "action": "exclude",
            "low": 3.0,
            "high": 7.0,
            "misrating": DEFAULT_MISRATING,
            "exclude_at": 5,
            "anchors_per_session": 12,
        },
        words={
            "low": "an answer at or below it is low",
            "high": "an answer at or above it is high",
            "misrating": "per anchor type, the conditions of which any one misrates it",
            "exclude_at": "misrated anchors that fail a session",
            "anchors_per_session": "anchors in a complete session",
        },
        assess=_anchors,
        check=_check_anchors,
    )
)
# The hidden anchors of the pairs design, as A/B trials: a separate count, since an A/B trial
# of an anchor holds one or two answers with a known winner, where a slider anchor holds two.
register(
    Rule(
        code="anchor_pairs",
        short="AP",
        label="anchor pairs",
        scope=SESSION,
        summary="On A/B trials of a hidden anchor against a stimulus, `exclude_at` or more "
        "answers other than the known one (the stimulus better: on both questions against a "
        "low-quality, poor-fit anchor, on fit against a high-quality, poor-fit one; a tie "
        "misrates, as the middle of a slider does).",
        defaults={"action": "exclude", "exclude_at": 2},
        words={"exclude_at": "answers other than known that fail a session"},
        assess=anchor_pairs,
    )
)
# Crowd workers, paid per task and unknown to the organizers, are excluded by these; invited
# raters only flagged.
register(
    Rule(
        code="straight_lining",
        short="SL",
        label="straight lining",
        scope=SESSION,
        summary="The same answer on at least `same_share` of the session's answers, or the "
        "variance of its answers (quality and fit pooled) under `min_variance`.",
        defaults={
            "action": "flag",
            "crowd_action": "exclude",
            "same_share": 0.8,
            "min_variance": 0.25,
            "min_answers": 8,
        },
        words={
            "same_share": "share of the answers one answer may not reach",
            "min_variance": "variance the answers may not fall under",
            "min_answers": "answers a session needs to be judged",
        },
        assess=_straight_lining,
    )
)
register(
    Rule(
        code="same_side",
        short="SS",
        label="same side",
        scope=SESSION,
        summary="On A/B trials, one answer (always A, always B, or always a tie) on at least "
        "`same_share` of the votes' answers (each question of a vote one answer).",
        defaults={
            "action": "flag",
            "crowd_action": "exclude",
            "same_share": 0.9,
            "min_answers": 16,
        },
        words={
            "same_share": "share of the answers one side may not reach",
            "min_answers": "answers a session needs to be judged",
        },
        assess=same_side,
    )
)
register(
    Rule(
        code="too_fast",
        short="TF",
        label="too fast",
        scope=SESSION,
        summary="The median time to answer under `min_median_answer_s`.",
        defaults={
            "action": "flag",
            "crowd_action": "exclude",
            "min_median_answer_s": 3.0,
            "min_answers": 4,
        },
        words={
            "min_median_answer_s": "seconds the median time to answer may not fall under",
            "min_answers": "timed answers a session needs to be judged",
        },
        assess=_too_fast,
        judge=_too_fast,
    )
)
register(
    Rule(
        code="not_listened",
        short="NL",
        label="not listened",
        scope=SESSION,
        summary="More than `max_share` of the answers given to sounds heard below "
        "`min_heard_fraction`.",
        defaults={"action": "flag", "min_heard_fraction": 0.9, "max_share": 0.1},
        words={
            "min_heard_fraction": "share of a sound below which it was not heard",
            "max_share": "share of the sounds that may be answered unheard",
        },
        assess=_not_listened,
        judge=_not_listened,
    )
)
register(
    Rule(
        code="gold",
        short="GO",
        label="gold",
        scope=SESSION,
        summary="A gold (trapping) trial in the ITU-T P.808 sense answered more than "
        "`tolerance` away from what it asks for (a value, or a range), more than `max_failed` "
        "times; a judge's gold real clip marked generated.",
        defaults={"action": "flag", "tolerance": 1.0, "max_failed": 0},
        words={
            "tolerance": "how far from what a gold trial asks an answer may be",
            "max_failed": "gold trials that may fail",
        },
        assess=_gold,
        judge=_gold_judged,
    )
)
# A rater lifting one system above the other raters' answers to the same sounds, alone or as
# one of a cluster (raters.favouritism): applied over the whole panel.
register(
    Rule(
        code="favouritism",
        short="FV",
        label="favouritism",
        scope=PANEL,
        summary="A rater whose answers to one system's sounds sit above the other raters' "
        "answers to the same sounds by more than the rater's own line through the other "
        "systems and the panel's spread of tastes allow (`z`), or who is one of a cluster of "
        "raters lifting the same system (`cluster_z`, `cluster_p`); on A/B trials, whose votes "
        "go to one system more often than the other raters' votes on the same pairs do.",
        defaults={
            "action": "flag",
            "crowd_action": "exclude",
            "z": 3.5,
            "cluster_z": 2.5,
            "cluster_p": 1e-4,
        },
        words={
            "z": "a rater's standardised lift of a system that names them",
            "cluster_z": "the lift that names a rater one of a cluster",
            "cluster_p": "the binomial tail under which raters lifting a system are a cluster",
        },
        assess=favouritism.find,
        votes=vote_favouritism.find,
    )
)
# The crowd platform's record (raters.platform): a participant it does not list as valid. The
# rows carry the reason in `platform`.
register(
    Rule(
        code="platform",
        label="platform",
        scope=SESSION,
        summary="A crowd worker whom the crowd platform's submissions export, once loaded, does "
        "not list, lists as returned, timed out, rejected or screened out, or lists with "
        "another submission id.",
        defaults={"action": "exclude"},
        words={},
        assess=_platform,
    )
)
# The screening checks (raters.screening): their thresholds are the test's screening settings;
# "exclude" also screens the rater out before any session, once the attempts are used up. They
# show in the monitoring table's screening columns.
for _step in ("headphones", "hearing"):
    register(
        Rule(
            code=_step,
            label=_step,
            scope=SCREENING,
            summary=f"The {_step} check of the screening failed at its last attempt.",
            defaults={"action": "exclude"},
            words={},
            assess=_screening_check(_step),
        )
    )
