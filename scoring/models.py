"""Scoring settings per challenge and the frozen snapshots that publishing makes."""

from __future__ import annotations

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q

from stimuli.models import Challenge, Job

from .compute import DEFAULT_MISRATING, Rules, ScoringInputError


def default_misrating() -> dict:
    return {role: list(conditions) for role, conditions in DEFAULT_MISRATING.items()}


class ScoringSettings(models.Model):
    """The rules a challenge is scored by; every default is the DCASE 2023 Task 7 value."""

    challenge = models.OneToOneField(
        Challenge, on_delete=models.CASCADE, related_name="scoring_settings"
    )
    low_threshold = models.FloatField(default=3.0, help_text="A rating at or below this is low.")
    high_threshold = models.FloatField(default=7.0, help_text="A rating at or above this is high.")
    misrating_rules = models.JSONField(
        default=default_misrating,
        help_text="Per anchor type, the conditions (quality_low, quality_high, fit_low, "
        "fit_high: at or beyond a threshold; quality_not_high, quality_not_low, fit_not_high, "
        "fit_not_low: on the wrong half of the scale, the middle included) of which any one "
        "makes a check misrated.",
    )
    exclude_at = models.PositiveSmallIntegerField(
        default=5, help_text="A session with this many misrated checks or more is excluded."
    )
    checks_per_session = models.PositiveSmallIntegerField(default=12)
    quality_rules = models.JSONField(
        default=dict,
        blank=True,
        help_text="The other rater-quality rules (straight_lining, too_fast, not_listened, gold) "
        'and the anchor rule\'s action, e.g. {"too_fast": {"action": "exclude", '
        '"min_median_answer_s": 4}}; each action is exclude, flag or off (see raters.quality).',
    )
    remove_self_ratings = models.BooleanField(default=True)
    weight_quality = models.FloatField(default=1.0)
    weight_fit = models.FloatField(default=1.0)
    weight_diversity = models.FloatField(default=0.5)
    bootstrap_samples = models.PositiveIntegerField(default=1000)
    confidence = models.FloatField(default=0.95)
    seed = models.PositiveIntegerField(default=2023)

    class Meta:
        verbose_name_plural = "scoring settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(low_threshold__lt=F("high_threshold")),
                name="scoring_low_below_high",
            ),
            models.CheckConstraint(condition=Q(exclude_at__gte=1), name="scoring_exclude_at_min"),
            models.CheckConstraint(
                condition=Q(weight_quality__gte=0, weight_fit__gte=0, weight_diversity__gte=0),
                name="scoring_weights_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(confidence__gt=0, confidence__lt=1), name="scoring_confidence_range"
            ),
        ]

    def __str__(self) -> str:
        return f"Scoring settings of {self.challenge}"

    def rules(self) -> Rules:
        return Rules(
            low=self.low_threshold,
            high=self.high_threshold,
            misrating=self.misrating_rules,
            exclude_at=self.exclude_at,
            checks_per_session=self.checks_per_session,
            remove_self_ratings=self.remove_self_ratings,
            quality=self.quality_rules or {},
            weight_quality=self.weight_quality,
            weight_fit=self.weight_fit,
            weight_diversity=self.weight_diversity,
            bootstrap=self.bootstrap_samples,
            confidence=self.confidence,
            seed=self.seed,
        )

    def clean(self) -> None:
        if not isinstance(self.misrating_rules, dict):
            raise ValidationError({"misrating_rules": "Must be an object of anchor type to list."})
        if not isinstance(self.quality_rules, dict):
            raise ValidationError({"quality_rules": "Must be an object of rule name to settings."})
        try:
            self.rules()
        except (ScoringInputError, TypeError) as exc:
            raise ValidationError(str(exc)) from exc


class Snapshot(models.Model):
    """A published result, frozen: what was computed, from which inputs, by which rules and code."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="snapshots")
    number = models.PositiveIntegerField(help_text="1 for the first publication, then 2, ...")
    result = models.JSONField()
    input_hashes = models.JSONField(help_text="sha256 of each input table.")
    settings = models.JSONField(help_text="The scoring rules used.")
    code_version = models.CharField(max_length=80)
    published_at = models.DateTimeField()
    published_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    job = models.OneToOneField(
        Job,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="snapshot",
        help_text="The publish job that made it (a redelivered job finds it and stops).",
    )
    final = models.BooleanField(
        default=True,
        help_text="Final results close the listening test for good; interim ones leave it open.",
    )
    public = models.BooleanField(
        default=True, help_text="Off: an interim snapshot only organizers see."
    )

    class Meta:
        ordering = ["challenge", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "number"], name="snapshot_number_unique"),
            models.CheckConstraint(condition=Q(number__gte=1), name="snapshot_number_positive"),
            models.CheckConstraint(
                condition=Q(final=False) | Q(public=True), name="snapshot_final_is_public"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.challenge} results #{self.number}"

    def save(self, *args, **kwargs) -> None:
        # A published result never changes; republishing makes a new snapshot.
        if self.pk is not None and not kwargs.pop("_allow_update", False):
            raise ValueError("A published snapshot is frozen and cannot be changed.")
        super().save(*args, **kwargs)


class SnapshotPlot(models.Model):
    """A plot of a snapshot, drawn once when it was published and frozen with it."""

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="plots")
    track = models.CharField(max_length=50, help_text='A track code, or "all" for every track.')
    kind = models.SlugField(max_length=30)
    svg = models.TextField()
    png = models.BinaryField()

    class Meta:
        ordering = ["snapshot", "track", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["snapshot", "track", "kind"], name="snapshot_plot_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.snapshot} {self.track} {self.kind}"
