"""The learned predictors' values of each clip (stimuli/objective/predictor_scores.py).

Registered with the stimuli app (stimuli/models.py imports this module at its end), so the table
is stimuli's and its migration stimuli's. The clip is named by string ("stimuli.Clip"):
importing the base's models here would make the two modules import each other.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class PredictorScore(models.Model):
    """One clip's value on one axis of a learned predictor: Audiobox Aesthetics' `PQ`, `PC`,
    `CE`, `CU` (its 1-10 scale) or PAM's `PAM` (0 to 1), with the files that gave it.

    One row per clip, predictor and axis; a run with other files replaces the values.
    """

    clip = models.ForeignKey(
        "stimuli.Clip", on_delete=models.CASCADE, related_name="predictor_scores"
    )
    predictor = models.CharField(max_length=32, help_text="aesthetics or pam.")
    axis = models.CharField(max_length=8, help_text="PQ, PC, CE, CU (aesthetics) or PAM.")
    value = models.FloatField()
    model_id = models.CharField(
        max_length=200, help_text="The predictor and its files' sha256 prefixes."
    )
    computed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["clip", "predictor", "axis"]
        constraints = [
            models.UniqueConstraint(
                fields=["clip", "predictor", "axis"], name="predictor_score_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.predictor} {self.axis} of clip {self.clip_id}: {self.value:.3f}"
