"""The text-prompt protocol's models: a second kind of listening test on the same raters."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from stimuli.models import (
    AudioFile,
    Challenge,
    DescribedClip,
    System,
    TextGeneration,
)

from .listening import Heard, HeardAtAnswer, Rater, new_seed, new_token

# --- The text-prompt protocol: a second kind of listening test -----------------------------------
#
# Judges are raters of the challenge (invitation links, rater cookies, audio by token and the
# server's listening checks are the listening test's); what they take is three tests of
# text-conditioned systems: interpretability, realism, and their own prompts.

MATCH_ANSWERS = ("yes", "no", "maybe")


class TextPromptStudy(models.Model):
    """A text-prompt study of a challenge: its systems, judges and per-test counts."""

    challenge = models.OneToOneField(
        Challenge, on_delete=models.CASCADE, related_name="text_prompt_study"
    )
    systems = models.ManyToManyField(System, related_name="text_prompt_studies")
    judges = models.PositiveSmallIntegerField(default=10, help_text="Judges wanted.")
    interpretability_clips = models.PositiveSmallIntegerField(
        default=10, help_text="Real clips, then as many generated clips, each judge describes."
    )
    realism_clips = models.PositiveSmallIntegerField(
        default=10, help_text="Clips, real and generated mixed, each judge marks."
    )
    prompts = models.PositiveSmallIntegerField(default=10, help_text="Prompts each judge types.")
    clips_per_prompt = models.PositiveSmallIntegerField(default=5)
    is_open = models.BooleanField(default=False)
    seed = models.BigIntegerField(default=new_seed)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(judges__gte=1) & Q(judges__lte=1000), name="text_study_judges_range"
            ),
            models.CheckConstraint(
                condition=Q(interpretability_clips__gte=1) & Q(interpretability_clips__lte=50),
                name="text_study_interpretability_range",
            ),
            models.CheckConstraint(
                condition=Q(realism_clips__gte=2) & Q(realism_clips__lte=50),
                name="text_study_realism_range",
            ),
            models.CheckConstraint(
                condition=Q(prompts__gte=1) & Q(prompts__lte=50), name="text_study_prompts_range"
            ),
            models.CheckConstraint(
                condition=Q(clips_per_prompt__gte=1) & Q(clips_per_prompt__lte=20),
                name="text_study_clips_per_prompt_range",
            ),
            models.CheckConstraint(condition=Q(seed__gte=0), name="text_study_seed_non_negative"),
        ]

    def __str__(self) -> str:
        return f"Text-prompt study of {self.challenge}"


class TextJudge(models.Model):
    """A rater who judges one system of a text-prompt study; `seed` fixes their draws."""

    study = models.ForeignKey(TextPromptStudy, on_delete=models.CASCADE, related_name="judge_set")
    rater = models.OneToOneField(Rater, on_delete=models.CASCADE, related_name="text_judge")
    system = models.ForeignKey(System, on_delete=models.PROTECT, related_name="text_judges")
    seed = models.BigIntegerField(default=new_seed)
    started_at = models.DateTimeField(null=True, blank=True)
    revealed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the true texts of the interpretability test showed."
    )
    reveal_submitted_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the judge submitted their marks of the reveal step; until then a mark "
        "may change.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["study", "rater__index"]
        constraints = [
            models.CheckConstraint(condition=Q(seed__gte=0), name="text_judge_seed_non_negative"),
        ]

    def __str__(self) -> str:
        return f"judge {self.rater.code}"


class TextTrial(Heard):
    """One clip of the interpretability or realism test, heard through `token` only: a real clip
    with its description, or one generated from a description for this judge."""

    class Test(models.TextChoices):
        INTERPRETABILITY = "interpretability", "Interpretability"
        REALISM = "realism", "Realism"

    judge = models.ForeignKey(TextJudge, on_delete=models.CASCADE, related_name="trials")
    test = models.CharField(max_length=16, choices=Test.choices)
    position = models.PositiveSmallIntegerField()
    is_real = models.BooleanField()
    described = models.ForeignKey(
        DescribedClip, on_delete=models.PROTECT, null=True, blank=True, related_name="trials"
    )
    generation = models.ForeignKey(
        TextGeneration, on_delete=models.PROTECT, null=True, blank=True, related_name="trials"
    )
    text = models.TextField(help_text="The true description (or the prompt it was made from).")
    audio = models.ForeignKey(
        AudioFile, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    token = models.CharField(max_length=32, unique=True, default=new_token)

    class Meta:
        ordering = ["judge", "test", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "test", "position"], name="text_trial_position_unique"
            ),
            models.CheckConstraint(
                condition=Q(test__in=["interpretability", "realism"]), name="text_trial_test_valid"
            ),
            # A real clip is a described clip, heard as it is; a generated one names its request.
            models.CheckConstraint(
                condition=(
                    Q(is_real=True)
                    & Q(described__isnull=False)
                    & Q(generation__isnull=True)
                    & Q(audio__isnull=False)
                )
                | (Q(is_real=False) & Q(described__isnull=True) & Q(generation__isnull=False)),
                name="text_trial_real_or_generated",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.test} {self.position} of {self.judge}"


class TextAnswer(models.Model):
    """What an answer of the text-prompt protocol shares: one per item, stored once per key."""

    idempotency_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True


class DescriptionAnswer(TextAnswer, HeardAtAnswer):
    """What a judge thinks an interpretability clip is, in their words."""

    trial = models.OneToOneField(TextTrial, on_delete=models.CASCADE, related_name="description")
    text = models.TextField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(text=""), name="description_answer_has_text"),
        ]

    def __str__(self) -> str:
        return f"description of {self.trial}"


class DescriptionMark(TextAnswer):
    """The judge's own verdict, once the true text shows, on their description."""

    trial = models.OneToOneField(TextTrial, on_delete=models.CASCADE, related_name="mark")
    correct = models.BooleanField()

    def __str__(self) -> str:
        return f"mark of {self.trial}"


class RealismAnswer(TextAnswer, HeardAtAnswer):
    trial = models.OneToOneField(TextTrial, on_delete=models.CASCADE, related_name="realism")
    says_real = models.BooleanField()

    def __str__(self) -> str:
        return f"realism answer of {self.trial}"


class PromptSet(models.Model):
    """A prompt a judge typed and the clips the judge's system makes of it."""

    judge = models.ForeignKey(TextJudge, on_delete=models.CASCADE, related_name="prompt_sets")
    position = models.PositiveSmallIntegerField()
    prompt = models.TextField()
    generation = models.OneToOneField(
        TextGeneration, on_delete=models.PROTECT, related_name="prompt_set"
    )
    token = models.CharField(max_length=32, unique=True, default=new_token)
    idempotency_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["judge", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["judge", "position"], name="prompt_set_position_unique"
            ),
            models.CheckConstraint(condition=~Q(prompt=""), name="prompt_set_has_prompt"),
        ]

    def __str__(self) -> str:
        return f"prompt {self.position} of {self.judge}"


class PromptClip(Heard):
    """One generated clip of a prompt set, heard through `token` only."""

    prompt_set = models.ForeignKey(PromptSet, on_delete=models.CASCADE, related_name="clips")
    index = models.PositiveSmallIntegerField()
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="+")
    token = models.CharField(max_length=32, unique=True, default=new_token)

    class Meta:
        ordering = ["prompt_set", "index"]
        constraints = [
            models.UniqueConstraint(fields=["prompt_set", "index"], name="prompt_clip_unique"),
        ]

    def __str__(self) -> str:
        return f"clip {self.index} of {self.prompt_set}"


class PromptAnswer(TextAnswer):
    """A judge's answer to a set: does any clip match the prompt, quality, diversity."""

    prompt_set = models.OneToOneField(PromptSet, on_delete=models.CASCADE, related_name="answer")
    match = models.CharField(max_length=8)
    quality = models.PositiveSmallIntegerField()
    diversity = models.PositiveSmallIntegerField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(match__in=MATCH_ANSWERS), name="prompt_answer_match_valid"
            ),
            models.CheckConstraint(
                condition=Q(quality__gte=1) & Q(quality__lte=5), name="prompt_answer_quality_range"
            ),
            models.CheckConstraint(
                condition=Q(diversity__gte=1) & Q(diversity__lte=5),
                name="prompt_answer_diversity_range",
            ),
        ]

    def __str__(self) -> str:
        return f"answer to {self.prompt_set}"
