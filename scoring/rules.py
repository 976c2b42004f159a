"""Every rule of the scoring, with the DCASE 2023 Task 7 values as defaults. No Django here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

# The rater-quality rules, their defaults among them (the anchor rule's are DCASE 2023 Task 7's).
from raters.rules import ANCHOR_ROLES, ANCHORS, CONDITIONS, RaterRules, RuleError

from .inputs import ScoringInputError
from .intervals import JACKKNIFE_T
from .intervals import METHODS as INTERVAL_METHODS


@dataclass(frozen=True)
class Rules:
    """Every rule of the scoring, with the DCASE 2023 Task 7 values as defaults."""

    # The anchor rule's parameters, its defaults the registry's (raters.rules.ANCHORS).
    low: float = ANCHORS.defaults["low"]  # a rating at or below this is "low"
    high: float = ANCHORS.defaults["high"]  # a rating at or above this is "high"
    misrating: Mapping[str, Sequence[str]] = field(
        default_factory=lambda: {k: list(v) for k, v in ANCHORS.defaults["misrating"].items()}
    )
    # A session with this many misrated anchors or more is excluded whole.
    exclude_at: int = ANCHORS.defaults["exclude_at"]
    # Checks a complete session holds; a session left part-way is held to the same share of
    # misrated anchors (0: sessions have no anchors, and none is excluded for lacking them).
    anchors_per_session: int = ANCHORS.defaults["anchors_per_session"]
    remove_self_ratings: bool = True
    # The other rater-quality rules and the anchor rule's action (see raters.rules); the
    # anchor rule's parameters are the fields above.
    rater_rules: Mapping[str, Mapping] = field(default_factory=dict)
    weight_quality: float = 1.0
    weight_fit: float = 1.0
    weight_diversity: float = 0.5
    bootstrap: int = 1000  # replicates of the bootstrap method; 0: no intervals at all
    confidence: float = 0.95
    seed: int = 2023
    # "jackknife-t" holds its coverage with few raters (scoring/intervals.py); "bootstrap", the
    # percentile bootstrap over raters and sounds, covers too little with 4 raters.
    intervals: str = JACKKNIFE_T

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ScoringInputError(f"low threshold {self.low} must be below high {self.high}")
        if self.exclude_at < 1:
            raise ScoringInputError("exclude_at must be at least 1")
        if self.anchors_per_session < 0:
            raise ScoringInputError("anchors_per_session must be 0 or more")
        if min(self.weight_quality, self.weight_fit, self.weight_diversity) < 0 or not (
            self.weight_quality + self.weight_fit + self.weight_diversity > 0
        ):
            raise ScoringInputError("weights must be non-negative and not all zero")
        if self.bootstrap < 0:
            raise ScoringInputError("bootstrap must be 0 (no intervals) or more")
        if not 0 < self.confidence < 1:
            raise ScoringInputError("confidence must be between 0 and 1")
        if self.intervals not in INTERVAL_METHODS:
            raise ScoringInputError(f"intervals must be one of {', '.join(INTERVAL_METHODS)}")
        for role, conditions in self.misrating.items():
            if role not in ANCHOR_ROLES:
                raise ScoringInputError(f"unknown anchor type {role!r} in misrating rules")
            for condition in conditions:
                if condition not in CONDITIONS:
                    raise ScoringInputError(
                        f"unknown condition {condition!r} for {role}; use one of {CONDITIONS}"
                    )

        try:
            self.for_raters()
        except RuleError as exc:
            raise ScoringInputError(str(exc)) from None

    def for_raters(self) -> RaterRules:
        """The rater-quality rules these settings make (raters.rules assesses sessions)."""
        return RaterRules.of(
            self.rater_rules,
            low=self.low,
            high=self.high,
            misrating=self.misrating,
            exclude_at=self.exclude_at,
            anchors_per_session=self.anchors_per_session,
        )

    def to_dict(self) -> dict:
        data = asdict(self)
        data["misrating"] = {k: list(v) for k, v in self.misrating.items()}
        # Every rater-quality rule as applied, defaults included (the anchor rule's settings
        # are the fields above): a snapshot's settings rescore it as it was published, whatever
        # a later version's defaults.
        data["rater_rules"] = {
            name: values
            for name, values in self.for_raters().to_dict().items()
            if name != "anchors"
        }
        return data

    @classmethod
    def from_dict(cls, data: Mapping | None) -> Rules:
        data = dict(data or {})
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ScoringInputError(f"unknown scoring settings: {', '.join(sorted(unknown))}")
        return cls(**data)
