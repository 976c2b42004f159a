"""Scoring settings per challenge and the frozen snapshots that publishing makes."""

from __future__ import annotations

from django.conf import settings as django_settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from raters.models import ListeningTest
from stimuli.models import Challenge, Job

from .inputs import ScoringInputError
from .rules import Rules


class ScoringSettings(models.Model):
    """The rules a challenge is scored by; every default is the DCASE 2023 Task 7 value. The
    rater-quality rules are the listening test's (`raters.models.ListeningTest`)."""

    challenge = models.OneToOneField(
        Challenge, on_delete=models.CASCADE, related_name="scoring_settings"
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
        """Every rule of the scoring: the rater-quality rules as the listening test holds them
        (each answer is assessed by them as it is stored), the rest from here."""
        test, _ = ListeningTest.objects.get_or_create(challenge_id=self.challenge_id)
        return Rules(
            low=test.low_threshold,
            high=test.high_threshold,
            misrating=test.misrating_rules,
            exclude_at=test.exclude_at,
            anchors_per_session=test.anchors_per_session,
            remove_self_ratings=self.remove_self_ratings,
            rater_rules=test.rater_rules or {},
            weight_quality=self.weight_quality,
            weight_fit=self.weight_fit,
            weight_diversity=self.weight_diversity,
            bootstrap=self.bootstrap_samples,
            confidence=self.confidence,
            seed=self.seed,
        )

    def clean(self) -> None:
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
    # What an organizer had set, whole (stimuli.definition.export at publication): the same
    # challenge applied anywhere scores these inputs to this result. Blank before it was kept.
    definition = models.TextField(
        blank=True,
        help_text="The challenge's definition file (challenge.yaml) when it was published.",
    )
    definition_sha256 = models.CharField(
        max_length=64, blank=True, help_text="sha256 of the definition's text (UTF-8)."
    )
    plots_missing = models.JSONField(
        default=list,
        blank=True,
        help_text='Plots that could not be drawn, each {"track", "kind", "title"}: the results '
        "were published without them (the worker's log says why).",
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


class DataRelease(models.Model):
    """A versioned data release of a snapshot (scoring/release.py): the zip of its bundle, kept
    in the default storage."""

    snapshot = models.ForeignKey(Snapshot, on_delete=models.CASCADE, related_name="releases")
    version = models.CharField(max_length=40, help_text='e.g. "1.0.0+snapshot.2".')
    archive = models.CharField(max_length=200, help_text="Storage name of the zip.")
    sha256 = models.CharField(max_length=64)
    size_bytes = models.PositiveBigIntegerField()
    audio_files = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )

    class Meta:
        ordering = ["snapshot", "-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "version"], name="release_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.snapshot} data release {self.version}"

    @property
    def file_name(self) -> str:
        return self.archive.rsplit("/", 1)[-1]
