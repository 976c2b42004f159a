"""The pairs design's votes scored: the rater-quality rules first (the sessions they exclude are
removed, as the ratings' are; the favouritism rule over the votes, `raters.vote_favouritism`),
then Davidson's Bradley-Terry model (`pairwise.score_pairs`: self-
votes removed through the teams table, intervals from a bootstrap over raters).

The votes come one row per vote and question (`raters.columns.VOTE_COLUMNS`, the listening
test's votes export). The published section fits both questions' answers together, as the
sliders' final score weighs quality and fit alike (a vote's two answers are one rater's, and the
bootstrap over raters keeps them together); `questions` holds each question's fit alone. A
hidden anchor's A/B trials (`anchor_pair`) are for the rules only. Rows
without the export's `session` and `role` (a pairwise table made by hand, `PAIR_COLUMNS` only)
are scored as they are: there is nothing for the rules to judge. No Django here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from raters.rules import add_panel_flags, assess, assess_panel
from raters.vote_favouritism import vote_rows
from raters.vote_rules import PAIR

from .inputs import Inputs, cell_text
from .pairwise import score_pairs, without_self_votes
from .rules import Rules


def _judged(rows: list[Mapping]) -> bool:
    return bool(rows) and all(cell_text(r.get("session")) and r.get("role") for r in rows)


def judged_sessions(rows: list[Mapping], teams: list[Mapping], rules: Rules) -> tuple[list, dict]:
    """The sessions of votes the rater-quality rules exclude, each with its reasons; and what the
    favouritism rule found in the votes (self-votes and hidden anchors' A/B trials left out):
    every rater it names, with the system and by how much, and the systems a cluster lifts."""
    if not _judged(rows):
        return [], {"raters": [], "clusters": []}
    rater_rules = rules.for_raters()
    verdicts = assess(rows, rater_rules)
    kept, _ = without_self_votes(rows, teams)
    crowd = {cell_text(r["rater"]) for r in rows if r.get("rater_kind") == "crowd"}
    panels = assess_panel(
        vote_rows(r for r in kept if cell_text(r.get("role")) == PAIR),
        rater_rules,
        crowd=crowd,
        skip_off=True,
        votes=True,
    )
    add_panel_flags(panels, verdicts)
    excluded = [
        {
            "rater": v.rater,
            "category": v.category,
            "session": v.session,
            "reasons": [f"{f.rule}: {f.reason}" for f in v.flags if f.action == "exclude"],
        }
        for v in verdicts.values()
        if v.excluded
    ]
    favouring: dict = {"raters": [], "clusters": []}
    if "favouritism" in panels:
        panel = panels["favouritism"]
        for rater, flag in sorted(panel.flags.items()):
            lift = panel.finding.favouring[rater][0]
            favouring["raters"].append(
                {
                    "rater": rater,
                    "system": lift.system,
                    "points": lift.points,
                    "z": lift.z,
                    "answers": lift.sounds,
                    "action": flag.action,
                    "reason": flag.reason,
                }
            )
        favouring["clusters"] = [
            {"system": c.system, "raters": c.raters, "expected": c.expected, "p": c.p}
            for c in panel.finding.clusters
        ]
    return excluded, favouring


def score_votes(rows: Iterable[Mapping], teams: Iterable[Mapping], rules: Rules) -> dict:
    """The `pairwise` section of a result from the votes: `score_pairs`'s over both questions,
    with the sessions excluded by the rater-quality rules, the favouritism rule's findings and,
    per question, its tracks."""
    rows, teams = list(rows), list(teams)
    excluded, favouring = judged_sessions(rows, teams, rules)
    out = {e["session"] for e in excluded}
    # A hidden anchor's A/B trials are for the rules: the fit reads two stimuli's votes.
    kept = [
        r
        for r in rows
        if cell_text(r.get("session")) not in out and cell_text(r.get("role")) in ("", PAIR)
    ]
    section = score_pairs(kept, teams, replicates=rules.bootstrap, seed=rules.seed)
    section["excluded_sessions"] = excluded
    section["votes_excluded"] = sum(cell_text(r.get("session")) in out for r in rows)
    section["favouritism"] = favouring
    questions = sorted({cell_text(r.get("question")) for r in kept} - {""})
    if questions:
        section["questions"] = {
            question: score_pairs(
                [r for r in kept if cell_text(r.get("question")) == question],
                teams,
                replicates=rules.bootstrap,
                seed=rules.seed,
            )["tracks"]
            for question in questions
        }
    return section


def add_pairwise(inputs: Inputs, result: dict, rules: Rules) -> dict:
    """The votes' section beside the ratings' result, where there are votes."""
    if inputs.pairs:
        result["pairwise"] = score_votes(inputs.pairs, inputs.teams, rules)
    return result
