"""How long the listening test takes a rater: the figure announced before consent and copied by
the organizer into the crowd platform's study settings (Prolific pays by the expected time)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db.models import Count

from stimuli.models import Challenge

from .models import PAIRS, ListeningTest, Stimulus

# Moving two scales and pressing Next after the sound has been heard: DCASE 2023's 92 trials of
# 4-s sounds took raters about 20 minutes a category, (20 * 60) / 92 - 4 ~ 9 s.
ANSWER_S = 9.0
# Consent and instructions, once.
INTRO_S = 120.0
# Reading the examples page of a category, beside hearing its examples.
EXAMPLES_S = 30.0


@dataclass(frozen=True)
class Workload:
    categories: int
    per_category_s: float
    total_s: float

    @property
    def minutes_per_category(self) -> int:
        return max(1, math.ceil(self.per_category_s / 60))

    @property
    def total_minutes(self) -> int:
        return max(1, math.ceil(self.total_s / 60))


def workload(challenge: Challenge, test: ListeningTest, categories: int) -> Workload:
    """The expected time of `categories` category sessions, from the largest category's trials
    (a worker may be given it; the pairs design: a session's A/B trials, two sounds each) and the
    clip duration, with the examples and the introduction."""
    largest = (
        Stimulus.objects.filter(category__challenge=challenge)
        .values("category")
        .annotate(n=Count("id"))
        .order_by("-n")
        .values_list("n", flat=True)
        .first()
    ) or 0
    duration = float(challenge.clip_duration_s)
    if test.design == PAIRS:  # two sounds an A/B trial, then two choices
        a_b_trials = test.pairs_per_session + test.anchor_pairs_per_session
        heard = a_b_trials * (2 * duration + ANSWER_S)
    else:
        heard = (largest + test.anchors_per_session) * (duration + ANSWER_S)
    per_category = heard + test.familiarization_clips * duration + EXAMPLES_S
    return Workload(categories, per_category, INTRO_S + categories * per_category)
