"""The organizers' monitoring table of raters, readable at hundreds of raters: one row per rater
with a short verdict per rater-quality rule and per screening step, the reasons behind a
disclosure, filtered and sorted on the server (the table refreshes itself with the filters it
was given), and the pass rate of every rule and step above it. The rules' columns are the
registry's (`raters.rules`: every rule with a short code)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stimuli.models import Challenge

from . import rules as engine
from . import screening, selectors
from .models import VOTE_QUESTIONS, Rater, Rating, ScreeningAttempt, Vote
from .vote_favouritism import SCORE, VoteRow

# The screening rules (headphones, hearing) show in their steps' columns.
STEP_CODES = {"level": "LV", "headphones": "HP", "hearing": "HC"}
# A verdict cell: its code and the word a screen reader and the title say.
MARKS = {
    "exclude": ("✕", "excluded"),
    "flag": ("!", "flagged"),
    "ok": ("✓", "passed"),
    "": ("·", "not judged"),
}
STEP_MARKS = {
    "passed": ("✓", "passed"),
    "failed": ("✕", "failed"),
    "out": ("✕✕", "screened out"),
    "open": ("…", "under way"),
    "": ("·", "not taken"),
}
STATUSES = ("excluded", "screened_out", "flagged", "screening", "ok")
STATUS_WORDS = {
    "excluded": "excluded",
    "screened_out": "screened out",
    "flagged": "flagged",
    "screening": "in screening",
    "ok": "ok",
}
KINDS = tuple(Rater.Kind.values)
ORDERS = ("enrolment", "status", "kind", "answered")


def sort_options() -> list[tuple[str, str]]:
    """The sort form's options, value and words: the rater's own columns, each screening step,
    each rule's column."""
    return [
        *((order, order) for order in ORDERS),
        *((f"step_{s}", f"{code} {s}") for s, code in STEP_CODES.items()),
        *((rule.code, f"{rule.short} {rule.label}") for rule in engine.columns()),
    ]


@dataclass
class Row:
    rater: Rater
    status: str
    rules: dict[str, str]  # rule: "exclude" / "flag" / "ok" / "" (not judged)
    steps: dict[str, str]  # step: "passed" / "failed" / "out" / "open" / ""
    step_notes: dict[str, str]
    step_list: list[tuple[str, str, str, str]] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    categories: str = ""
    answered: int = 0
    trials: int = 0

    def cells(self) -> list[tuple[str, str, str]]:
        """(rule, code, word) per rule, in the table's order."""
        return [(rule.code, *MARKS[self.rules[rule.code]]) for rule in engine.columns()]

    def step_cells(self, steps: list[str]) -> list[tuple[str, str, str, str]]:
        return [
            (step, *STEP_MARKS[self.steps.get(step, "")], self.step_notes.get(step, ""))
            for step in steps
        ]


@dataclass
class Table:
    rows: list[Row]
    total: int
    steps: list[str]
    rule_rates: list[dict]
    step_rates: list[dict]
    counts: dict[str, int]
    status: str = ""
    kind: str = ""
    sort: str = "enrolment"
    descending: bool = False

    @property
    def width(self) -> int:
        """The table's columns: the rater's six, the steps', the rules', the reasons."""
        return 7 + len(self.steps) + len(self.rule_rates)


def _worst(actions: list[str]) -> str:
    if "exclude" in actions:
        return "exclude"
    if "flag" in actions:
        return "flag"
    return "ok" if actions else ""


def panel_verdicts(challenge: Challenge, rules) -> dict[str, dict[int, tuple[str, str]]]:
    """The panel rules (favouritism) over the answers stored so far, as the scoring will apply
    them: per rule, per rater id, the action and the words naming why. Every rater the rule
    could judge is in it ("ok" when not named); self-ratings and self-votes are left out, as
    scoring removes them. A test of the pairs design is judged on its votes."""
    answers = Rating.objects.filter(
        trial__session__rater__challenge=challenge, trial__stimulus__isnull=False
    ).values_list(
        "trial__session__rater_id",
        "trial__session__rater__team_id",
        "trial__stimulus__system_id",
        "trial__stimulus__system__team_id",
        "trial__stimulus_id",
        "quality",
        "fit",
    )
    rows = [
        (rater, system, stimulus, quality, fit)
        for rater, team, system, owner, stimulus, quality, fit in answers
        if team is None or team != owner
    ]
    votes = _vote_rows(challenge)
    if not rows and not votes:
        return {}
    crowd = set(
        Rater.objects.filter(challenge=challenge, kind=Rater.Kind.CROWD).values_list(
            "pk", flat=True
        )
    )
    out: dict[str, dict[int, tuple[str, str]]] = {}
    for answered, are_votes in ((rows, False), (votes, True)):
        if not answered:
            continue
        found = engine.assess_panel(answered, rules, crowd=crowd, votes=are_votes)
        for name, panel in found.items():
            verdicts = out.setdefault(name, {})
            verdicts.update({rater: ("ok", "") for rater in panel.finding.judged})
            verdicts.update({r: (flag.action, flag.reason) for r, flag in panel.flags.items()})
    return out


def _vote_rows(challenge: Challenge) -> list[VoteRow]:
    """The votes on A/B trials of two stimuli, one row per question, by rater id; self-votes
    left out."""
    votes = Vote.objects.filter(
        pair__session__rater__challenge=challenge,
        pair__left__stimulus__isnull=False,
        pair__right__stimulus__isnull=False,
    ).values_list(
        "pair__session__rater_id",
        "pair__session__rater__team_id",
        "pair__left__stimulus__system_id",
        "pair__left__stimulus__system__team_id",
        "pair__right__stimulus__system_id",
        "pair__right__stimulus__system__team_id",
        *VOTE_QUESTIONS,
    )
    return [
        VoteRow(rater, left, right, SCORE[winner])
        for rater, team, left, left_team, right, right_team, *winners in votes
        if team is None or team not in (left_team, right_team)
        for winner in winners
    ]


def rows(challenge: Challenge) -> tuple[list[Row], list[str]]:
    """Every rater's row, and the screening steps the test runs (or any rater took)."""
    progress = selectors.rater_progress(challenge)
    test = selectors.listening_test(challenge)
    settings = screening.settings_of(test)
    attempts: dict[int, dict[str, ScreeningAttempt]] = {}
    for attempt in ScreeningAttempt.objects.filter(rater__challenge=challenge).order_by(
        "rater_id", "step", "number"
    ):
        attempts.setdefault(attempt.rater_id, {})[attempt.step] = attempt
    taken = {step for by_step in attempts.values() for step in by_step}
    steps = [
        s for s in STEP_CODES if s in taken or (settings is not None and s in settings.steps())
    ]
    rules = selectors.rater_rules(challenge)
    panels = panel_verdicts(challenge, rules)
    shown = engine.columns()
    out = []
    for entry in progress:
        rater, sessions = entry["rater"], entry["sessions"]
        per_rule: dict[str, list[str]] = {rule.code: [] for rule in shown}
        reasons = []
        for session in sessions:
            if session.verdict.session and session.n_answered:
                named = {flag.rule for flag in session.verdict.flags}
                for rule in shown:
                    if rule.code not in named and rule.scope == engine.SESSION:
                        per_rule[rule.code].append("ok")
            for flag in session.verdict.flags:
                if flag.rule in per_rule:
                    per_rule[flag.rule].append(flag.action)
                    reasons.append(f"{session.category.slug}: {flag}")
        mine = attempts.get(rater.pk, {})
        step_state, notes = {}, {}
        screened_out = flagged_step = False
        for step, attempt in mine.items():
            state = attempt.state
            if state == ScreeningAttempt.State.FAILED:
                action = screening.action_of(rules, step, rater)
                limit = min(attempt.limit, settings.attempts) if settings else attempt.limit
                if action == "exclude" and attempt.number >= limit:
                    state, screened_out = "out", True
                flagged_step = flagged_step or action == "flag"
                reasons.append(f"{screening.STEP_NAMES[step]}: {attempt.summary}")
            step_state[step] = state
            note = f"attempt {attempt.number} of {attempt.limit}"
            notes[step] = f"{attempt.summary} ({note})" if attempt.summary else note
        verdicts = {rule.code: _worst(per_rule[rule.code]) for rule in shown}
        panel_excluded = False
        for name, judged in panels.items():
            action, words = judged.get(rater.pk, ("", ""))
            panel_excluded = panel_excluded or action == "exclude"
            if name in verdicts:
                verdicts[name] = action
            if words:
                reasons.append(f"{name}: {words}")
        if screened_out:
            status = "screened_out"
        elif entry["failing"] or panel_excluded:
            status = "excluded"
        elif entry["flagged"] or flagged_step or "flag" in verdicts.values():
            status = "flagged"
        elif any(v == "open" for v in step_state.values()) or (
            settings is not None and not sessions and screening.applies(rater, settings)
        ):
            status = "screening"
        else:
            status = "ok"
        out.append(
            Row(
                rater=rater,
                status=status,
                rules=verdicts,
                steps=step_state,
                step_notes=notes,
                reasons=reasons,
                categories=f"{entry['closed']} / {len(sessions)}",
                answered=entry["answered"],
                trials=entry["trials"],
            )
        )
    return out, steps


def _rate(passed: int, judged: int) -> dict:
    return {
        "passed": passed,
        "judged": judged,
        "percent": round(100 * passed / judged) if judged else None,
    }


def table(challenge: Challenge, query: Mapping[str, str] | None = None) -> Table:
    """The monitoring table: rates over every rater, rows filtered and sorted by `query`
    (`status`, `kind`, `sort`, `order`=desc); unknown values are ignored."""
    query = query or {}
    every, steps = rows(challenge)
    rule_rates = []
    for rule in engine.columns():
        judged = [r for r in every if r.rules[rule.code]]
        rule_rates.append(
            {
                "rule": rule.code,
                "code": rule.short,
                "label": rule.label,
                **_rate(sum(r.rules[rule.code] == "ok" for r in judged), len(judged)),
            }
        )
    step_rates = []
    for step in steps:
        judged = [r for r in every if r.steps.get(step) in ("passed", "failed", "out")]
        step_rates.append(
            {
                "step": step,
                "code": STEP_CODES[step],
                "name": screening.STEP_NAMES[step],
                **_rate(sum(r.steps[step] == "passed" for r in judged), len(judged)),
            }
        )
    counts = {status: sum(r.status == status for r in every) for status in STATUSES}
    status = query.get("status", "")
    kind = query.get("kind", "")
    sort = query.get("sort", "enrolment")
    descending = query.get("order") == "desc"
    shown = [
        r
        for r in every
        if (status not in STATUSES or r.status == status)
        and (kind not in KINDS or r.rater.kind == kind)
    ]
    severity = {"exclude": 0, "flag": 1, "ok": 2, "": 3}
    step_order = {"out": 0, "failed": 1, "open": 2, "passed": 3, "": 4}
    keys = {
        "enrolment": lambda r: r.rater.index,
        "status": lambda r: (STATUSES.index(r.status), r.rater.index),
        "kind": lambda r: (r.rater.kind, r.rater.index),
        "answered": lambda r: (r.answered, r.rater.index),
        **{
            rule.code: (lambda r, n=rule.code: (severity[r.rules[n]], r.rater.index))
            for rule in engine.columns()
        },
        **{
            f"step_{s}": (lambda r, s=s: (step_order[r.steps.get(s, "")], r.rater.index))
            for s in STEP_CODES
        },
    }
    if sort not in keys:
        sort = "enrolment"
    shown.sort(key=keys[sort], reverse=descending)
    for row in shown:
        row.step_list = row.step_cells(steps)
    return Table(
        rows=shown,
        total=len(every),
        steps=steps,
        rule_rates=rule_rates,
        step_rates=step_rates,
        counts=counts,
        status=status if status in STATUSES else "",
        kind=kind if kind in KINDS else "",
        sort=sort,
        descending=descending,
    )


def legend() -> list[tuple[str, str]]:
    """What each short code stands for, for the table's key."""
    return [
        *((rule.short, rule.label) for rule in engine.columns()),
        *((code, screening.STEP_NAMES[step]) for step, code in STEP_CODES.items()),
    ]
