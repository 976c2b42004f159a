"""The definition's section that scoring owns (how the listeners' answers become the ranking),
and the scoring's rules as a definition file sets them (`score_offline --challenge`, and the
check that a snapshot's frozen definition gives the rules it was scored by)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from stimuli.definition.document import parse
from stimuli.definition.fields import section_model, validated, values_of
from stimuli.definition.sections import Section, definition_model, register
from stimuli.models import Challenge

from .inputs import ScoringInputError
from .models import ScoringSettings
from .rules import Rules

SCORING_FIELDS = [
    "remove_self_ratings",
    "weight_quality",
    "weight_fit",
    "weight_diversity",
    "bootstrap_samples",
    "confidence",
    "seed",
]
Scoring = section_model(
    "Scoring",
    "How a system's score is made: the weighted mean of its quality, fit and diversity (DCASE "
    "2023 Task 7: Q + F + D/2), with each rater's ratings of their own team's systems removed, "
    "and the intervals' replicates, confidence and seed.",
    ScoringSettings,
    SCORING_FIELDS,
    described={
        "remove_self_ratings": "Remove a rating by a member of the team whose system it rates.",
        "weight_quality": "The weight of a system's mean audio quality in its score (DCASE "
        "2023: 1).",
        "weight_fit": "The weight of its mean category fit (DCASE 2023: 1).",
        "weight_diversity": "The weight of its mean diversity (DCASE 2023: 0.5).",
        "bootstrap_samples": "Replicates of the resampling behind the results' intervals (the "
        "embedding league's, and the percentile bootstrap's where that method is chosen); 0: "
        "no intervals.",
        "confidence": "The intervals' level, between 0 and 1 (0.95: 95% intervals).",
        "seed": "The seed of the resampling, so that the same ratings give the same intervals.",
    },
)


def _settings(challenge: Challenge) -> ScoringSettings:
    return ScoringSettings.objects.get_or_create(challenge=challenge)[0]


def _read(challenge: Challenge) -> dict:
    return values_of(_settings(challenge), SCORING_FIELDS)


def _write(challenge: Challenge, value: dict) -> None:
    settings = _settings(challenge)
    for name in SCORING_FIELDS:
        setattr(settings, name, value[name])
    validated(settings)
    settings.save()


register(
    Section(
        key="scoring",
        annotation=Scoring,
        position=80,
        read=_read,
        write=_write,
        default=Field(default_factory=Scoring),
    )
)


def rules_of(definition: Mapping[str, Any]) -> Rules:
    """The scoring's rules that a definition (the file's data, as parsed) sets: its `scoring` and
    `rater_rules` sections and the listening test's `anchors_per_session`. What
    `ScoringSettings.rules()` gives for a challenge that definition was applied to."""
    scoring = definition["scoring"]
    rater = definition["rater_rules"]
    # The listening test's own checks (raters.models.ListeningTest.clean), in the file's words.
    problems = []
    if not isinstance(rater["misrating"], Mapping):
        problems.append("rater_rules.misrating: a mapping of anchor type to conditions expected")
    if rater["rules"] is not None and not isinstance(rater["rules"], Mapping):
        problems.append("rater_rules.rules: a mapping of rule name to settings expected")
    if problems:
        raise ScoringInputError(problems)
    return Rules(
        low=rater["low"],
        high=rater["high"],
        misrating=rater["misrating"],
        exclude_at=rater["exclude_at"],
        anchors_per_session=definition["listening"]["anchors_per_session"],
        rater_rules=rater["rules"] or {},
        remove_self_ratings=scoring["remove_self_ratings"],
        weight_quality=scoring["weight_quality"],
        weight_fit=scoring["weight_fit"],
        weight_diversity=scoring["weight_diversity"],
        bootstrap=scoring["bootstrap_samples"],
        confidence=scoring["confidence"],
        seed=scoring["seed"],
    )


def rules_from_text(text: str) -> Rules:
    """The scoring's rules of a definition file's text; `DefinitionError` names every problem of
    the file at once, `ScoringInputError` what the rules make of its values."""
    definition = parse(text, definition_model())
    return rules_of(json.loads(definition.model_dump_json()))
