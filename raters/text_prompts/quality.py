"""The text-prompt study's judges judged by the rater-quality engine (`raters.rules`): their
answers to sounds as the rules read them, each judge's verdict, the study's answer rows with
the excluded judges left out, and the exclusions with their reasons for the results' downloads.
"""

from __future__ import annotations

from django.db.models import Q

from stimuli.models import Challenge

from .. import selectors
from ..models import DescriptionAnswer, Rater, RealismAnswer, TextJudge, TextPromptStudy
from ..rules import RaterRules, Verdict, assess_judge

EXCLUSION_COLUMNS = ("judge", "system", "excluded", "reasons")


def answer_rows(challenge: Challenge) -> dict[str, list[dict]]:
    """Per judge's code, the answers to sounds (descriptions, realism marks) as the rules read
    them, the realism test's gold clips marked."""
    study = Q(trial__judge__study__challenge=challenge)
    found = TextPromptStudy.objects.filter(challenge=challenge).first()
    gold = set(found.gold_clips.values_list("pk", flat=True)) if found else set()
    rows: dict[str, list[dict]] = {}
    for model in (DescriptionAnswer, RealismAnswer):
        answers = model.objects.filter(study).select_related("trial__judge__rater")
        for a in answers.order_by("trial__judge__rater__index", "trial__position"):
            row = {"answer_s": a.answer_s, "heard_fraction": a.heard_fraction}
            if model is RealismAnswer:
                row["gold"] = a.trial.is_real and a.trial.described_id in gold
                row["says_real"] = a.says_real
            rows.setdefault(a.trial.judge.rater.code, []).append(row)
    return rows


def verdicts(challenge: Challenge, rules: RaterRules | None = None) -> dict[str, Verdict]:
    """Every judge who answered, judged; by the judge's rater code."""
    rules = rules or selectors.rater_rules(challenge)
    kinds = dict(
        Rater.objects.filter(challenge=challenge, text_judge__isnull=False).values_list(
            "code", "kind"
        )
    )
    return {
        code: assess_judge(code, answers, rules, crowd=kinds.get(code) == Rater.Kind.CROWD)
        for code, answers in answer_rows(challenge).items()
    }


def judged_rows(
    challenge: Challenge, rules: RaterRules | None = None
) -> tuple[dict[str, list[dict]], list[dict]]:
    """The study's answer rows (`selectors.text_prompt_rows`) without the excluded judges' rows,
    and one row per judge a rule excluded or flagged: judge, system, excluded, reasons."""
    rows = selectors.text_prompt_rows(challenge)
    judged = verdicts(challenge, rules)
    out = [v for v in judged.values() if v.flags]
    excluded = {v.rater for v in out if v.excluded}
    systems = dict(
        TextJudge.objects.filter(study__challenge=challenge).values_list(
            "rater__code", "system__name"
        )
    )
    kept = {name: [r for r in table if r["judge"] not in excluded] for name, table in rows.items()}
    exclusions = [
        {
            "judge": v.rater,
            "system": systems.get(v.rater, ""),
            "excluded": v.excluded,
            "reasons": v.summary(),
        }
        for v in sorted(out, key=lambda v: v.rater)
    ]
    return kept, exclusions
