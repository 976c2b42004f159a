"""The pairs design's A/B trials: two trials of one session heard side by side (A on the left,
B on the right), and the vote that answers them.

Each side is an ordinary `Trial` with its own token and audio, so the server verifies the
listening of each side exactly as it verifies a slider trial's (`raters.listening`); the pair
adds the order of the session's A/B trials and the token its vote is posted with. Neither token
says which system, team or anchor is behind a side.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from .listening import CategorySession, Trial, new_token

# A vote's answer to one question: the sound on the left (A) is better, the one on the right
# (B), or neither.
VOTE_CHOICES = ("left", "right", "tie")
VOTE_QUESTIONS = ("quality", "fit")


class Pair(models.Model):
    """One A/B trial of a session: its two sides' trials, in the session's order."""

    session = models.ForeignKey(CategorySession, on_delete=models.CASCADE, related_name="pairs")
    position = models.PositiveSmallIntegerField()
    left = models.OneToOneField(Trial, on_delete=models.CASCADE, related_name="pair_as_left")
    right = models.OneToOneField(Trial, on_delete=models.CASCADE, related_name="pair_as_right")
    token = models.CharField(max_length=32, unique=True, default=new_token)

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="pair_position_unique"),
            models.CheckConstraint(condition=~Q(left=F("right")), name="pair_two_sides"),
        ]

    def __str__(self) -> str:
        return f"A/B trial {self.position} of {self.session}"


class Vote(models.Model):
    """The answer to one A/B trial: per question, left, right or tie; a second vote on the same
    pair cannot exist. With what the server had verified of each side when it was given."""

    pair = models.OneToOneField(Pair, on_delete=models.CASCADE, related_name="vote")
    quality = models.CharField(max_length=5, choices=[(c, c) for c in VOTE_CHOICES])
    fit = models.CharField(max_length=5, choices=[(c, c) for c in VOTE_CHOICES])
    idempotency_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    answer_s = models.FloatField(
        null=True, blank=True, help_text="Seconds from the A/B trial's turn to the vote."
    )
    left_plays = models.PositiveIntegerField(null=True, blank=True)
    left_seeks = models.PositiveIntegerField(null=True, blank=True)
    left_heard_fraction = models.FloatField(null=True, blank=True)
    right_plays = models.PositiveIntegerField(null=True, blank=True)
    right_seeks = models.PositiveIntegerField(null=True, blank=True)
    right_heard_fraction = models.FloatField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(quality__in=VOTE_CHOICES), name="vote_quality_valid"
            ),
            models.CheckConstraint(condition=Q(fit__in=VOTE_CHOICES), name="vote_fit_valid"),
        ]

    def __str__(self) -> str:
        return f"vote q={self.quality} f={self.fit} of {self.pair}"
