"""The listening test: its settings, what is heard (stimuli and hidden anchors), who hears it
(raters), and what they answered (category sessions of trials and their ratings, and diversity
ratings).

Everything a browser sees of a trial is an opaque random token; which system, team, track or
anchor type stands behind it stays in these rows.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator, URLValidator
from django.db import models
from django.db.models import Q

from stimuli.models import (
    AudioFile,
    Category,
    Challenge,
    Clip,
    System,
    Team,
)

from ..rules import ANCHORS, RaterRules, RuleError

ANCHOR_KINDS = ("hq_goodfit", "hq_poorfit", "lq_poorfit")
# How a rater answers: sliders (DCASE's ratings of each sound) or pairs (A/B trials and votes).
DESIGNS = ("sliders", "pairs")
SLIDERS, PAIRS = DESIGNS
# What a gold sound of A/B trials asks for on both questions: its own side, the other, a tie.
GOLD_VOTES = ("this", "other", "tie")
TRIAL_ROLES = ("trial", "anchor_hq_goodfit", "anchor_hq_poorfit", "anchor_lq_poorfit", "gold")


def new_token() -> str:
    # 128 random bits: not guessable, and unrelated to anything it stands for.
    return secrets.token_urlsafe(16)


def new_rater_code() -> str:
    return "R" + secrets.token_hex(4).upper()


def new_completion_code() -> str:
    return "C" + secrets.token_hex(4).upper()


def new_seed() -> int:
    return secrets.randbits(62)


def default_misrating() -> dict:
    return {role: list(conditions) for role, conditions in ANCHORS.defaults["misrating"].items()}


class ListeningTest(models.Model):
    """The listening-test settings of one challenge (the DCASE 2023 Task 7 values by default)."""

    challenge = models.OneToOneField(
        Challenge, on_delete=models.CASCADE, related_name="listening_test"
    )
    is_open = models.BooleanField(default=False, help_text="Raters can start and answer trials.")
    design = models.CharField(
        max_length=8,
        choices=[
            ("sliders", "Sliders: each sound rated 0 to 10"),
            ("pairs", "Pairs: A/B trials, a vote between two systems' sounds"),
        ],
        default=SLIDERS,
        help_text="How raters answer: sliders (DCASE 2023 Task 7's ratings of each sound's "
        "quality and fit, 0 to 10) or pairs (A/B trials: two systems' sounds of a category, "
        "and per question a vote for A, B or a tie).",
    )
    pairs_per_session = models.PositiveSmallIntegerField(
        default=20, help_text="A/B trials per category session (the pairs design)."
    )
    anchor_pairs_per_session = models.PositiveSmallIntegerField(
        default=2,
        help_text="A/B trials per category session of a hidden anchor against a stimulus, the "
        "answer known (the pairs design): the poor-fit kinds of anchor, low quality first.",
    )
    target_votes = models.PositiveSmallIntegerField(
        default=10,
        help_text="Votes wanted per pair of systems in each category (the pairs design).",
    )
    categories_min = models.PositiveSmallIntegerField(
        default=4, help_text="Categories every rater is given."
    )
    categories_max = models.PositiveSmallIntegerField(
        default=7, help_text="Categories a rater may rate at most."
    )
    crowd_categories = models.PositiveSmallIntegerField(
        default=1,
        help_text="Categories each crowd worker rates (DCASE 2023's public phase gave one); "
        "participants and invited listeners rate between the minimum and the maximum.",
    )
    target_ratings = models.PositiveSmallIntegerField(
        default=10, help_text="Independent ratings wanted per stimulus."
    )
    anchors_per_session = models.PositiveSmallIntegerField(
        default=ANCHORS.defaults["anchors_per_session"],
        help_text="Hidden anchors per category session, a third of each type.",
    )
    familiarization_clips = models.PositiveSmallIntegerField(
        default=6, help_text="Development clips heard before the trials of a category."
    )
    gold_per_session = models.PositiveSmallIntegerField(
        default=0,
        help_text="Gold (trapping) trials per category session, at random places but never "
        "first: the organizer's gold sounds, or spoken instructions when there are none (the "
        "pairs design: spoken instructions asking for a vote, as A/B trials).",
    )
    loudness_alignment = models.BooleanField(
        default=True, help_text="Bring every stimulus to the target integrated loudness."
    )
    target_lufs = models.FloatField(default=-27.0, help_text="Target integrated loudness (LUFS).")
    diversity_gap_s = models.FloatField(
        default=0.5, help_text="Silence between the sounds of a diversity file (seconds)."
    )
    listened_fraction = models.FloatField(
        default=0.9,
        help_text="Share of a sound that must be heard, played in real time as the server saw "
        "it, before it can be rated or an example counts as heard.",
    )
    completion_url = models.URLField(
        blank=True,
        validators=[URLValidator(schemes=["https", "http"])],
        help_text="Where crowd-sourced raters are sent at the end (e.g. Prolific).",
    )
    completion_code = models.CharField(
        max_length=32,
        default=new_completion_code,
        validators=[RegexValidator(r"^[A-Za-z0-9_-]{4,32}$", "4 to 32 letters, digits, - or _.")],
        help_text="Shown to crowd-sourced raters at the end and added to the completion URL "
        "(as cc=..., Prolific's form): the proof of completion they are paid for.",
    )
    crowd_key = models.CharField(max_length=32, default=new_token, unique=True, editable=False)
    crowd_study_id = models.CharField(
        max_length=64,
        blank=True,
        validators=[RegexValidator(r"^[A-Za-z0-9_.-]{1,64}$", "Letters, digits, '.', '-', '_'.")],
        help_text="The crowd platform's study id (Prolific's STUDY_ID): a link arriving with "
        "another is refused. Empty: not checked.",
    )
    platform_export_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the crowd platform's submissions export was last loaded; from then on "
        "crowd workers it does not list as valid leave the scoring.",
    )
    # The rater-quality rules (raters/rules.py, whose registry holds their defaults): read with
    # the rater on every request, so an answer is assessed with no query of its own; scoring
    # reads them from here too.
    low_threshold = models.FloatField(
        default=ANCHORS.defaults["low"],
        help_text="An answer at or below this is low (the anchor rule).",
    )
    high_threshold = models.FloatField(
        default=ANCHORS.defaults["high"],
        help_text="An answer at or above this is high (the anchor rule).",
    )
    misrating_rules = models.JSONField(
        default=default_misrating,
        help_text="Per anchor type, the conditions (quality_low, quality_high, fit_low, "
        "fit_high: at or beyond a threshold; quality_not_high, quality_not_low, fit_not_high, "
        "fit_not_low: on the wrong half of the scale, the middle included) of which any one "
        "makes an anchor misrated.",
    )
    exclude_at = models.PositiveSmallIntegerField(
        default=ANCHORS.defaults["exclude_at"],
        help_text="A session with this many misrated anchors or more is excluded.",
    )
    rater_rules = models.JSONField(
        default=dict,
        blank=True,
        help_text="The other rater-quality rules (straight_lining, too_fast, not_listened, gold) "
        'and the anchor rule\'s action, e.g. {"too_fast": {"action": "exclude", '
        '"min_median_answer_s": 4}}; each action is exclude, flag or off (see raters.rules).',
    )
    consent_text = models.TextField(blank=True)
    instructions_text = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(categories_min__gte=1)
                & Q(categories_max__gte=models.F("categories_min")),
                name="listening_categories_range",
            ),
            models.CheckConstraint(
                condition=Q(crowd_categories__gte=1) & Q(crowd_categories__lte=100),
                name="listening_crowd_categories_range",
            ),
            models.CheckConstraint(
                condition=Q(target_ratings__gte=1) & Q(target_ratings__lte=1000),
                name="listening_target_range",
            ),
            models.CheckConstraint(condition=Q(design__in=DESIGNS), name="listening_design_valid"),
            models.CheckConstraint(
                condition=Q(pairs_per_session__gte=1) & Q(pairs_per_session__lte=200),
                name="listening_pairs_per_session_range",
            ),
            models.CheckConstraint(
                condition=Q(anchor_pairs_per_session__lte=20),
                name="listening_anchor_pairs_range",
            ),
            models.CheckConstraint(
                condition=Q(target_votes__gte=1) & Q(target_votes__lte=1000),
                name="listening_target_votes_range",
            ),
            models.CheckConstraint(
                condition=Q(anchors_per_session__in=list(range(0, 61, 3))),
                name="listening_anchors_multiple_of_three",
            ),
            models.CheckConstraint(
                condition=Q(familiarization_clips__lte=30), name="listening_familiarization_range"
            ),
            models.CheckConstraint(
                condition=Q(gold_per_session__lte=10), name="listening_gold_range"
            ),
            models.CheckConstraint(
                condition=Q(target_lufs__gte=-70) & Q(target_lufs__lte=-5),
                name="listening_target_lufs_range",
            ),
            models.CheckConstraint(
                condition=Q(diversity_gap_s__gte=0) & Q(diversity_gap_s__lte=5),
                name="listening_gap_range",
            ),
            models.CheckConstraint(
                condition=Q(listened_fraction__gte=0) & Q(listened_fraction__lte=1),
                name="listening_listened_fraction_range",
            ),
            models.CheckConstraint(
                condition=Q(low_threshold__lt=models.F("high_threshold")),
                name="listening_low_below_high",
            ),
            models.CheckConstraint(condition=Q(exclude_at__gte=1), name="listening_exclude_at_min"),
        ]

    def __str__(self) -> str:
        return f"Listening test of {self.challenge}"

    def rules(self) -> RaterRules:
        """The rater-quality rules of this test; the anchor rule expects the test's anchors per
        session of a complete session."""
        return RaterRules.of(
            self.rater_rules,
            low=self.low_threshold,
            high=self.high_threshold,
            misrating=self.misrating_rules,
            exclude_at=self.exclude_at,
            anchors_per_session=self.anchors_per_session,
        )

    def clean(self) -> None:
        problems = {}
        if not isinstance(self.misrating_rules, dict):
            problems["misrating_rules"] = "Must be an object of anchor type to list."
        if not isinstance(self.rater_rules, dict):
            problems["rater_rules"] = "Must be an object of rule name to settings."
        if self.anchors_per_session and self.exclude_at > self.anchors_per_session:
            problems["exclude_at"] = (
                f"{self.exclude_at} misrated anchors can never be reached with "
                f"{self.anchors_per_session} anchors per session."
            )
        if not problems:
            try:
                self.rules()
            except (RuleError, TypeError) as exc:
                problems["rater_rules"] = str(exc)
        if problems:
            raise ValidationError(problems)


class Stimulus(models.Model):
    """One system clip in the listening test (a finalist's medoid, or chosen by hand)."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="stimuli")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="stimuli")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="stimuli")
    clip = models.ForeignKey(Clip, on_delete=models.CASCADE, related_name="stimuli")
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        verbose_name_plural = "stimuli"
        ordering = ["category", "system", "position"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "clip"], name="stimulus_clip_unique"),
        ]

    def __str__(self) -> str:
        return f"stimulus {self.system} {self.category.slug} {self.position}"

    @property
    def code(self) -> str:
        """The stimulus column of the export: stable, and names the system for organizers."""
        return f"{self.system.name}/{self.category.slug}/{self.clip_id}"


class Anchor(models.Model):
    """A hidden anchor for sessions of `category`; `audio` is what raters hear."""

    class Kind(models.TextChoices):
        HQ_GOODFIT = "hq_goodfit", "High quality, good fit"
        HQ_POORFIT = "hq_poorfit", "High quality, poor fit"
        LQ_POORFIT = "lq_poorfit", "Low quality, poor fit"

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="anchors")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="anchors")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    source = models.ForeignKey(Clip, on_delete=models.CASCADE, related_name="anchor_uses")
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="anchor_uses")

    class Meta:
        ordering = ["category", "kind", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=ANCHOR_KINDS), name="anchor_kind_valid"),
            models.UniqueConstraint(
                fields=["category", "kind", "source"], name="anchor_source_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"anchor {self.kind} for {self.category.slug}"


class GoldSound(models.Model):
    """A gold (trapping) sound in the ITU-T P.808 sense: one whose answer is known, such as a
    spoken "set both sliders to two". A session's gold trials are drawn from these; the gold
    rule (`raters.rules`) judges the answers against the ranges."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="gold_sounds")
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="gold_uses")
    label = models.CharField(max_length=200, help_text="What it asks, for organizers.")
    builtin = models.BooleanField(
        default=False, help_text="A spoken instruction made by the platform, not uploaded."
    )
    # A built-in sound is heard by one trial only: made ahead (`gold.make_pool`), then taken.
    placed_at = models.DateTimeField(
        null=True, blank=True, help_text="When a trial took this built-in sound (heard once)."
    )
    quality_min = models.PositiveSmallIntegerField()
    quality_max = models.PositiveSmallIntegerField()
    fit_min = models.PositiveSmallIntegerField()
    fit_max = models.PositiveSmallIntegerField()
    # The pairs design's gold sounds ask for a vote instead (the ranges then span the scales).
    vote = models.CharField(
        max_length=5,
        blank=True,
        default="",
        choices=[(v, v) for v in GOLD_VOTES],
        help_text="A gold sound of A/B trials: the answer it asks for on both questions, 'this' "
        "(its own side), 'other' (the other side) or 'tie'; empty for a slider's gold sound.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["challenge", "id"]
        constraints = [
            models.CheckConstraint(condition=Q(vote__in=("", *GOLD_VOTES)), name="gold_vote_valid"),
            models.CheckConstraint(
                condition=Q(quality_min__lte=models.F("quality_max"))
                & Q(quality_max__lte=10)
                & Q(fit_min__lte=models.F("fit_max"))
                & Q(fit_max__lte=10),
                name="gold_ranges_valid",
            ),
            models.UniqueConstraint(fields=["challenge", "audio"], name="gold_audio_unique"),
        ]

    def __str__(self) -> str:
        return f"gold {self.label}"


class Rater(models.Model):
    """Someone who listens: a participant account, an invited listener or a crowd worker."""

    class Kind(models.TextChoices):
        PARTICIPANT = "participant", "Participant account"
        INVITED = "invited", "Invited listener"
        CROWD = "crowd", "Crowd-sourced"
        ORGANIZER = "organizer", "Organizer"

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="raters")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # An account cannot be deleted while it holds a rater: its answers would go with it.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="raters",
    )
    team = models.ForeignKey(
        Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="raters"
    )
    code = models.CharField(max_length=16, unique=True, default=new_rater_code, editable=False)
    index = models.PositiveIntegerField(help_text="Order of enrolment in the challenge.")
    access_key = models.CharField(max_length=32, unique=True, default=new_token, editable=False)
    participant_id = models.CharField(max_length=64, blank=True)
    study_id = models.CharField(max_length=64, blank=True)
    crowd_session_id = models.CharField(max_length=64, blank=True)
    network = models.CharField(
        max_length=49,
        blank=True,
        help_text="A crowd worker's network on arrival (IPv4 /24, IPv6 /64), never the address.",
    )
    label = models.CharField(max_length=120, blank=True, help_text="Organizers' note.")
    diversity_role = models.BooleanField(
        default=False, help_text="Rates diversity only (an organizer who rates no quality or fit)."
    )
    consented_at = models.DateTimeField(null=True, blank=True)
    instructed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The rater's one sound playing by the server's record (see `raters.listening`): which
    # (`playing_kind` indexes `listening.KINDS`), from which media time, since when, and how far
    # its stretch has been credited; `listened_until` is the wall time that the listening
    # credited so far has used up, so all the rater's sounds together are never credited more
    # than the time that passed. Every event changes `listening_version`, so an event whose
    # reading is stale writes nothing.
    playing_kind = models.PositiveSmallIntegerField(null=True, blank=True)
    playing_id = models.BigIntegerField(null=True, blank=True)
    playing_from = models.FloatField(null=True, blank=True)
    playing_since = models.DateTimeField(null=True, blank=True)
    playing_credited = models.FloatField(null=True, blank=True)
    listened_until = models.DateTimeField(null=True, blank=True)
    listening_version = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["challenge", "index"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["participant", "invited", "crowd", "organizer"]),
                name="rater_kind_valid",
            ),
            models.UniqueConstraint(fields=["challenge", "index"], name="rater_index_unique"),
            models.UniqueConstraint(
                fields=["challenge", "user"],
                condition=Q(user__isnull=False),
                name="rater_user_unique",
            ),
            models.UniqueConstraint(
                fields=["challenge", "participant_id"],
                condition=~Q(participant_id=""),
                name="rater_participant_unique",
            ),
            models.CheckConstraint(
                condition=~Q(kind="crowd") | ~Q(participant_id=""),
                name="rater_crowd_has_participant_id",
            ),
            models.CheckConstraint(
                condition=~Q(kind__in=["participant", "organizer"]) | Q(user__isnull=False),
                name="rater_account_has_user",
            ),
        ]

    def __str__(self) -> str:
        return self.code


class CategorySession(models.Model):
    """One rater's trials of one category, in an order fixed by `seed` and `latin_row`."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="sessions")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="sessions")
    order = models.PositiveSmallIntegerField(help_text="Place among the rater's categories.")
    ordinal = models.PositiveIntegerField(help_text="How many sessions of the category came first.")
    seed = models.BigIntegerField(default=new_seed)
    latin_row = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN)
    familiarized_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    # Kept up to date by each answer, in the answer's transaction, so that assigning categories
    # reads one row per session instead of every rating of the challenge.
    last_answer_at = models.DateTimeField(
        null=True, blank=True, help_text="When the latest answer of the session was stored."
    )
    excluded = models.BooleanField(
        default=False, help_text="Set aside by the rater-quality rules named by assessed_with."
    )
    assessed_with = models.CharField(
        max_length=64,
        blank=True,
        help_text="Hash of the rater-quality rules `excluded` was judged by; empty: not judged.",
    )

    class Meta:
        ordering = ["rater", "order"]
        constraints = [
            models.UniqueConstraint(fields=["rater", "category"], name="session_category_unique"),
            models.UniqueConstraint(fields=["rater", "order"], name="session_order_unique"),
            models.UniqueConstraint(fields=["category", "ordinal"], name="session_ordinal_unique"),
            models.CheckConstraint(
                condition=Q(state__in=["open", "closed"]), name="session_state_valid"
            ),
            models.CheckConstraint(condition=Q(seed__gte=0), name="session_seed_non_negative"),
            # A rater rates one category at a time: a double click must not open a second one.
            models.UniqueConstraint(
                fields=["rater"], condition=Q(state="open"), name="session_one_open_per_rater"
            ),
            models.CheckConstraint(
                condition=Q(state="open", closed_at__isnull=True)
                | Q(state="closed", closed_at__isnull=False),
                name="session_closed_at_when_closed",
            ),
            models.CheckConstraint(
                condition=Q(excluded=False) | ~Q(assessed_with=""),
                name="session_excluded_when_assessed",
            ),
            models.CheckConstraint(
                condition=Q(assessed_with="") | Q(last_answer_at__isnull=False),
                name="session_assessed_when_answered",
            ),
        ]

    def __str__(self) -> str:
        return f"session {self.pk} ({self.rater.code}, {self.category.slug})"

    @property
    def code(self) -> str:
        return f"{self.rater.code}-{self.pk}"


class Heard(models.Model):
    """What the server knows of one sound's listening: the byte ranges it delivered and when,
    and the stretches of media time the page reported as played, each no longer than the wall
    time the server saw pass (see `raters.listening`)."""

    served_at = models.DateTimeField(
        null=True, blank=True, help_text="When bytes of it were first sent to the browser."
    )
    delivered_ranges = models.JSONField(
        default=list, blank=True, help_text="Merged inclusive byte ranges served: [[a, b], ...]."
    )
    delivered_at = models.DateTimeField(
        null=True, blank=True, help_text="When the served ranges first covered the whole file."
    )
    plays = models.PositiveIntegerField(default=0)
    seeks = models.PositiveIntegerField(default=0)
    heard = models.JSONField(
        default=list, blank=True, help_text="Merged media-time intervals played: [[s, e], ...]."
    )
    first_played_at = models.DateTimeField(
        null=True, blank=True, help_text="When the page first reported playing it."
    )

    class Meta:
        abstract = True


class HeardAtAnswer(models.Model):
    """What an answer keeps of its sound's `Heard` when it was given: plays, share heard, seeks
    and time on the item; empty for answers stored before these were recorded."""

    plays = models.PositiveIntegerField(null=True, blank=True)
    seeks = models.PositiveIntegerField(null=True, blank=True)
    heard_fraction = models.FloatField(null=True, blank=True)
    answer_s = models.FloatField(
        null=True, blank=True, help_text="Seconds from the item's turn to the answer."
    )

    class Meta:
        abstract = True


class FamiliarizationClip(Heard):
    """A development clip heard before the trials of a session open."""

    session = models.ForeignKey(
        CategorySession, on_delete=models.CASCADE, related_name="familiarization"
    )
    position = models.PositiveSmallIntegerField()
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="+")
    token = models.CharField(max_length=32, unique=True, default=new_token)

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "position"], name="familiarization_position_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"familiarization {self.position} of {self.session}"


class Trial(Heard):
    """One item of a session: a stimulus or a hidden anchor, heard through `token` only."""

    class Role(models.TextChoices):
        TRIAL = "trial", "Trial"
        ANCHOR_HQ_GOODFIT = "anchor_hq_goodfit", "Anchor: high quality, good fit"
        ANCHOR_HQ_POORFIT = "anchor_hq_poorfit", "Anchor: high quality, poor fit"
        ANCHOR_LQ_POORFIT = "anchor_lq_poorfit", "Anchor: low quality, poor fit"
        GOLD = "gold", "Gold (trapping) trial"

    session = models.ForeignKey(CategorySession, on_delete=models.CASCADE, related_name="trials")
    position = models.PositiveSmallIntegerField()
    role = models.CharField(max_length=20, choices=Role.choices)
    stimulus = models.ForeignKey(
        Stimulus, on_delete=models.PROTECT, null=True, blank=True, related_name="trials"
    )
    anchor = models.ForeignKey(
        Anchor, on_delete=models.PROTECT, null=True, blank=True, related_name="trials"
    )
    gold = models.ForeignKey(
        GoldSound, on_delete=models.PROTECT, null=True, blank=True, related_name="trials"
    )
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="+")
    token = models.CharField(max_length=32, unique=True, default=new_token)

    class Meta:
        ordering = ["session", "position"]
        constraints = [
            models.UniqueConstraint(fields=["session", "position"], name="trial_position_unique"),
            models.CheckConstraint(condition=Q(role__in=TRIAL_ROLES), name="trial_role_valid"),
            # A trial is a stimulus; an anchor role always names its anchor, a gold trial its
            # gold sound, and nothing else.
            models.CheckConstraint(
                condition=(
                    Q(role="trial")
                    & Q(stimulus__isnull=False)
                    & Q(anchor__isnull=True)
                    & Q(gold__isnull=True)
                )
                | (
                    ~Q(role__in=["trial", "gold"])
                    & Q(stimulus__isnull=True)
                    & Q(anchor__isnull=False)
                    & Q(gold__isnull=True)
                )
                | (
                    Q(role="gold")
                    & Q(stimulus__isnull=True)
                    & Q(anchor__isnull=True)
                    & Q(gold__isnull=False)
                ),
                name="trial_stimulus_or_anchor",
            ),
        ]

    def __str__(self) -> str:
        return f"trial {self.position} of {self.session}"


class Rating(HeardAtAnswer):
    """The answer to one trial; a second answer to the same trial cannot exist."""

    trial = models.OneToOneField(Trial, on_delete=models.CASCADE, related_name="rating")
    quality = models.PositiveSmallIntegerField()
    fit = models.PositiveSmallIntegerField()
    idempotency_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(quality__gte=0) & Q(quality__lte=10), name="rating_quality_range"
            ),
            models.CheckConstraint(
                condition=Q(fit__gte=0) & Q(fit__lte=10), name="rating_fit_range"
            ),
        ]

    def __str__(self) -> str:
        return f"rating q={self.quality} f={self.fit} of {self.trial}"


class DiversityItem(models.Model):
    """One system's sounds of one category played in sequence as one file (rendered by a worker)."""

    challenge = models.ForeignKey(
        Challenge, on_delete=models.CASCADE, related_name="diversity_items"
    )
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="diversity_items")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="diversity_items")
    audio = models.ForeignKey(
        AudioFile, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    n_sounds = models.PositiveSmallIntegerField(default=0)
    sounds_key = models.CharField(
        max_length=64,
        blank=True,
        help_text="sha256 of the delivered sounds in order and the gap: the file is rendered "
        "again when they change, until someone rates it.",
    )

    class Meta:
        ordering = ["category", "system"]
        constraints = [
            models.UniqueConstraint(fields=["system", "category"], name="diversity_item_unique"),
        ]

    def __str__(self) -> str:
        return f"diversity {self.system.public_id} {self.category.slug}"


class DiversityTrial(Heard):
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="diversity_trials")
    item = models.ForeignKey(DiversityItem, on_delete=models.PROTECT, related_name="trials")
    position = models.PositiveSmallIntegerField()
    token = models.CharField(max_length=32, unique=True, default=new_token)

    class Meta:
        ordering = ["rater", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["rater", "position"], name="diversity_trial_position_unique"
            ),
            models.UniqueConstraint(fields=["rater", "item"], name="diversity_trial_item_unique"),
        ]

    def __str__(self) -> str:
        return f"diversity trial {self.position} of {self.rater}"


class DiversityRating(HeardAtAnswer):
    trial = models.OneToOneField(DiversityTrial, on_delete=models.CASCADE, related_name="rating")
    diversity = models.PositiveSmallIntegerField()
    idempotency_key = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(diversity__gte=0) & Q(diversity__lte=10),
                name="diversity_rating_range",
            ),
        ]

    def __str__(self) -> str:
        return f"diversity {self.diversity} of {self.trial}"


class DeliveredAudio(models.Model):
    """A sound as raters receive it: 16-bit WAV at the challenge rate, loudness-aligned or not."""

    source = models.ForeignKey(AudioFile, on_delete=models.CASCADE, related_name="deliveries")
    aligned = models.BooleanField()
    target_lufs = models.FloatField(default=0.0, help_text="Used only when aligned.")
    sample_rate = models.PositiveIntegerField()
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="+")
    gain_db = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "aligned", "target_lufs", "sample_rate"],
                name="delivered_audio_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source} as delivered"
