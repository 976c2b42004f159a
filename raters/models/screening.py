"""The screening stage's rows: each test's screening settings, every attempt at a step and every
trial of one.

The limits hold in the database: an attempt's number is unique per rater and step and at most
the limit copied onto it when it began, and a rater has one attempt open per step, so a retry
with the same participant id, two tabs racing or a replayed form cannot add one. What a trial's
answer is (`answer_key`) stays in these rows; the browser hears the sound through `token`."""

from __future__ import annotations

import secrets

from django.core.validators import RegexValidator, URLValidator
from django.db import models
from django.db.models import Q

from stimuli.models import AudioFile

from .listening import Heard, ListeningTest, Rater, new_token

STEPS = ("level", "headphones", "hearing")


def new_screen_out_code() -> str:
    return "S" + secrets.token_hex(4).upper()


class Screening(models.Model):
    """A listening test's screening stage: which checks run, for whom, and their thresholds.
    No row (the default): no screening."""

    class Who(models.TextChoices):
        CROWD = "crowd", "Crowd workers"
        EVERYONE = "everyone", "Every rater"

    test = models.OneToOneField(ListeningTest, on_delete=models.CASCADE, related_name="screening")
    who = models.CharField(max_length=8, choices=Who.choices, default=Who.CROWD)
    level_check = models.BooleanField(
        default=True, help_text="A reference sound at the test's loudness to set the level by."
    )
    headphone_check = models.BooleanField(
        default=True, help_text="The Huggins-pitch headphone check (Milne et al. 2021)."
    )
    headphone_trials = models.PositiveSmallIntegerField(default=6)
    headphone_pass = models.PositiveSmallIntegerField(
        default=5, help_text="Trials answered right to pass."
    )
    hearing_check = models.BooleanField(
        default=False, help_text="The digit-triplet hearing check (spoken digits in noise)."
    )
    hearing_triplets = models.PositiveSmallIntegerField(default=24)
    hearing_pass_db = models.FloatField(
        default=-7.0, help_text="Pass when the speech reception threshold is below this (dB SNR)."
    )
    attempts = models.PositiveSmallIntegerField(
        default=2, help_text="Attempts at each check per rater (per participant id)."
    )
    screen_out_code = models.CharField(
        max_length=32,
        default=new_screen_out_code,
        validators=[RegexValidator(r"^[A-Za-z0-9_-]{4,32}$", "4 to 32 letters, digits, - or _.")],
        help_text="Shown to a crowd worker screened out, and added to the screen-out URL as cc.",
    )
    screen_out_url = models.URLField(
        blank=True,
        validators=[URLValidator(schemes=["https", "http"])],
        help_text="Where a screened-out crowd worker is sent (e.g. Prolific's screen-out link).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(headphone_trials__gte=3) & Q(headphone_trials__lte=20),
                name="screening_headphone_trials_range",
            ),
            models.CheckConstraint(
                condition=Q(headphone_pass__gte=1)
                & Q(headphone_pass__lte=models.F("headphone_trials")),
                name="screening_headphone_pass_range",
            ),
            models.CheckConstraint(
                condition=Q(hearing_triplets__gte=8) & Q(hearing_triplets__lte=60),
                name="screening_hearing_triplets_range",
            ),
            models.CheckConstraint(
                condition=Q(hearing_pass_db__gte=-20) & Q(hearing_pass_db__lte=10),
                name="screening_hearing_pass_range",
            ),
            models.CheckConstraint(
                condition=Q(attempts__gte=1) & Q(attempts__lte=5),
                name="screening_attempts_range",
            ),
            models.CheckConstraint(
                condition=Q(who__in=["crowd", "everyone"]), name="screening_who"
            ),
        ]

    def __str__(self) -> str:
        return f"screening of {self.test}"

    def steps(self) -> list[str]:
        """The steps switched on, in the order a rater takes them."""
        on = {
            "level": self.level_check,
            "headphones": self.headphone_check,
            "hearing": self.hearing_check,
        }
        return [step for step in STEPS if on[step]]


class ScreeningAttempt(models.Model):
    """One go at one step by one rater: its result once finished (`score`: trials right for the
    headphone check, the SRT in dB for the hearing check)."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        PASSED = "passed", "Passed"
        FAILED = "failed", "Failed"

    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="screening_attempts")
    step = models.CharField(max_length=12)
    number = models.PositiveSmallIntegerField()
    limit = models.PositiveSmallIntegerField(help_text="The attempts allowed when it began.")
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN)
    score = models.FloatField(null=True, blank=True)
    summary = models.CharField(max_length=200, blank=True, help_text="The result, in words.")
    staircase = models.JSONField(default=dict, blank=True)
    seed = models.BigIntegerField()
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["rater", "started_at", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(step__in=list(STEPS)), name="screening_step_valid"),
            models.CheckConstraint(
                condition=Q(state__in=["open", "passed", "failed"]), name="screening_state_valid"
            ),
            models.UniqueConstraint(
                fields=["rater", "step", "number"], name="screening_attempt_number_unique"
            ),
            # The limit: no attempt numbered past the attempts allowed.
            models.CheckConstraint(
                condition=Q(number__gte=1) & Q(number__lte=models.F("limit")) & Q(limit__lte=5),
                name="screening_attempt_within_limit",
            ),
            # Two tabs racing open one attempt, not two.
            models.UniqueConstraint(
                fields=["rater", "step"], condition=Q(state="open"), name="screening_one_open"
            ),
            models.CheckConstraint(
                condition=Q(state="open", finished_at__isnull=True)
                | (~Q(state="open") & Q(finished_at__isnull=False)),
                name="screening_finished_when_closed",
            ),
            models.CheckConstraint(condition=Q(seed__gte=0), name="screening_seed_non_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.step} attempt {self.number} of {self.rater}"


class ScreeningTrial(Heard):
    """One sound of an attempt, heard through `token` only; its answer stored once."""

    attempt = models.ForeignKey(ScreeningAttempt, on_delete=models.CASCADE, related_name="trials")
    position = models.PositiveSmallIntegerField()
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="+")
    token = models.CharField(max_length=32, unique=True, default=new_token)
    answer_key = models.CharField(max_length=16, blank=True, help_text="Never sent to a browser.")
    snr_db = models.FloatField(null=True, blank=True)
    answer = models.CharField(max_length=16, blank=True)
    correct = models.BooleanField(null=True, blank=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["attempt", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["attempt", "position"], name="screening_trial_position_unique"
            ),
            models.CheckConstraint(
                condition=Q(answered_at__isnull=True, correct__isnull=True)
                | Q(answered_at__isnull=False),
                name="screening_trial_answered",
            ),
        ]

    def __str__(self) -> str:
        return f"screening trial {self.position} of {self.attempt}"
