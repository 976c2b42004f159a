"""What is heard: challenges, their categories and tracks, teams and systems, and audio clips.

Audio is content-addressed: an `AudioFile` is one distinct sound (keyed by the sha256 of its
canonical 16-bit WAV encoding) stored once however often it is used, and a `Clip` is one use of it
in a challenge (a development, evaluation, system-output or anchor clip of a category).
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q, Value
from django.db.models.functions import Concat
from django.utils import timezone

from .job_kinds import kind_label
from .names import name_key, normalise_name

LOOK_ALIKE_NAME = (
    "a team of this challenge has a name that looks the same (case, accents, spacing and "
    "look-alike letters of other scripts are not told apart): choose another"
)

# What stored clips were checked against: changing it would leave clips that break the spec.
CLIP_SPEC_FIELDS = ("clip_duration_s", "sample_rate", "channels", "bit_depth")


class Challenge(models.Model):
    class Phase(models.TextChoices):
        SETUP = "setup", "Setup"
        OBJECTIVE = "objective", "Objective stage"
        LISTENING = "listening", "Listening test"
        PUBLISHED = "published", "Published"

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    description = models.TextField(blank=True)
    clip_duration_s = models.FloatField(default=4.0, help_text="Clip duration in seconds.")
    sample_rate = models.PositiveIntegerField(default=22_050, help_text="Sample rate in Hz.")
    channels = models.PositiveSmallIntegerField(default=1)
    bit_depth = models.PositiveSmallIntegerField(default=16)
    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.SETUP)
    contact_email = models.EmailField(
        blank=True,
        help_text="Where teams and volunteers write to the organizers; shown on the public pages.",
    )
    fad_model_id = models.CharField(
        max_length=200,
        blank=True,
        help_text="The embedding model whose FAD picked the finalists, set by the ranking by FAD; "
        "the leaderboards' FAD columns are its.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(clip_duration_s__gt=0) & Q(clip_duration_s__lte=60),
                name="challenge_duration_range",
            ),
            models.CheckConstraint(
                condition=Q(sample_rate__gte=8_000) & Q(sample_rate__lte=192_000),
                name="challenge_sample_rate_range",
            ),
            models.CheckConstraint(
                condition=Q(channels__gte=1) & Q(channels__lte=2), name="challenge_channels_range"
            ),
            models.CheckConstraint(
                condition=Q(bit_depth__in=[16, 24]), name="challenge_bit_depth_supported"
            ),
            models.CheckConstraint(
                condition=Q(phase__in=["setup", "objective", "listening", "published"]),
                name="challenge_phase_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def clip_frames(self) -> int:
        return round(self.clip_duration_s * self.sample_rate)


class ChallengeRole(models.Model):
    """Who organizes a challenge: an owner and organizers change it, a viewer only reads it.
    Site staff organize every challenge without a row here."""

    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        ORGANIZER = "organizer", "Organizer"
        VIEWER = "viewer", "Viewer"

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="roles")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="challenge_roles"
    )
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["challenge", "user"], name="one_role_per_challenge"),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "organizer", "viewer"]), name="challenge_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.challenge}"


class Category(models.Model):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="categories")
    slug = models.SlugField(max_length=80)
    name = models.CharField(max_length=120)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["challenge", "position", "slug"]
        verbose_name_plural = "categories"
        constraints = [
            models.UniqueConstraint(fields=["challenge", "slug"], name="category_slug_unique"),
            models.UniqueConstraint(fields=["challenge", "name"], name="category_name_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class Track(models.Model):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="tracks")
    code = models.CharField(max_length=8, help_text="Short code, e.g. A or B.")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    external_data_allowed = models.BooleanField(default=False)

    class Meta:
        ordering = ["challenge", "code"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "code"], name="track_code_unique"),
        ]

    def __str__(self) -> str:
        return f"Track {self.code}"


class Team(models.Model):
    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="teams")
    name = models.CharField(max_length=120)
    # The name's skeleton (stimuli/names.py), set on every save: names that look alike share it,
    # and the database refuses a second one in a challenge.
    name_key = models.CharField(max_length=255, editable=False)
    affiliation = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["challenge", "name"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "name"], name="team_name_unique"),
            models.UniqueConstraint(
                fields=["challenge", "name_key"],
                name="team_name_unlike_others",
                violation_error_message=LOOK_ALIKE_NAME,
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        # Every way a team is stored (the services, the admin, a fixture) stores the key.
        self.name = normalise_name(self.name)
        self.name_key = name_key(self.name)
        super().save(*args, **kwargs)

    def clean(self) -> None:
        self.name = normalise_name(self.name)
        self.name_key = name_key(self.name)
        if not self.name:
            raise ValidationError({"name": "name the team"})


def new_public_id() -> str:
    # Random, not derived from the row id or the name, so it reveals nothing about the system.
    return "S" + secrets.token_hex(4).upper()


class System(models.Model):
    class Kind(models.TextChoices):
        AUDIO = "audio", "Uploaded audio"
        GENERATOR = "generator", "Generator code"

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="systems")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="systems")
    track = models.ForeignKey(Track, on_delete=models.PROTECT, related_name="systems")
    name = models.CharField(max_length=120)
    public_id = models.CharField(max_length=16, unique=True, default=new_public_id, editable=False)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.AUDIO)
    is_finalist = models.BooleanField(
        default=False, help_text="Chosen by the objective stage for the listening test."
    )
    release_audio = models.BooleanField(
        default=False,
        help_text="The team consents to its listening-test sounds' audio going into the data "
        "release (always referenced by sha256 there, with or without).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["challenge", "track", "name"]
        constraints = [
            models.UniqueConstraint(fields=["challenge", "name"], name="system_name_unique"),
            models.CheckConstraint(
                condition=Q(kind__in=["audio", "generator"]), name="system_kind_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class AudioFile(models.Model):
    """One distinct sound, stored once as a canonical PCM WAV named by its sha256."""

    sha256 = models.CharField(max_length=64, unique=True)
    file = models.CharField(max_length=200, help_text="Storage name of the canonical WAV.")
    size_bytes = models.PositiveBigIntegerField()
    sample_rate = models.PositiveIntegerField()
    channels = models.PositiveSmallIntegerField()
    bit_depth = models.PositiveSmallIntegerField()
    frames = models.PositiveIntegerField()
    duration_s = models.FloatField()
    loudness_lufs = models.FloatField(
        null=True, blank=True, help_text="Integrated loudness (ITU-R BS.1770); empty when silent."
    )
    peak_dbfs = models.FloatField(null=True, blank=True)
    is_silent = models.BooleanField(default=False)
    is_clipped = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(sha256__regex=r"^[0-9a-f]{64}$"), name="audiofile_sha256_hex"
            ),
            models.CheckConstraint(condition=Q(frames__gt=0), name="audiofile_frames_positive"),
        ]

    def __str__(self) -> str:
        return self.sha256[:12]


class Clip(models.Model):
    class Role(models.TextChoices):
        DEVELOPMENT = "development", "Development set"
        EVALUATION = "evaluation", "Evaluation set"
        SYSTEM = "system", "System output"
        # Kept private by the organizer, so no team can match an anchor against them.
        ANCHOR = "anchor", "Anchor source (private, high quality)"
        ANCHOR_LQ = "anchor_lq", "Anchor source (private, low quality)"

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="clips")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="clips")
    role = models.CharField(max_length=16, choices=Role.choices)
    system = models.ForeignKey(
        System, on_delete=models.CASCADE, null=True, blank=True, related_name="clips"
    )
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="clips")
    original_name = models.CharField(max_length=255, blank=True)
    source_job = models.ForeignKey(
        "Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="clips"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["challenge", "role", "category", "id"]
        indexes = [models.Index(fields=["challenge", "role", "category"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(
                    role__in=["development", "evaluation", "system", "anchor", "anchor_lq"]
                ),
                name="clip_role_valid",
            ),
            # System output always names its system; reference and anchor clips never do.
            models.CheckConstraint(
                condition=(Q(role="system") & Q(system__isnull=False))
                | (~Q(role="system") & Q(system__isnull=True)),
                name="clip_system_iff_system_role",
            ),
            # The same sound is one clip per set: re-uploading it adds nothing.
            models.UniqueConstraint(
                fields=["challenge", "role", "category", "audio"],
                condition=Q(system__isnull=True),
                name="clip_unique_in_reference_set",
            ),
            models.UniqueConstraint(
                fields=["system", "category", "audio"],
                condition=Q(system__isnull=False),
                name="clip_unique_in_system_set",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_role_display()} {self.category.slug} {self.audio.sha256[:12]}"

    @property
    def sha256(self) -> str:
        return self.audio.sha256


class Job(models.Model):
    """A unit of background work whose progress the pages poll; Celery tasks take its id."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    challenge = models.ForeignKey(
        Challenge, on_delete=models.CASCADE, null=True, blank=True, related_name="jobs"
    )
    kind = models.CharField(max_length=32)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    message = models.CharField(max_length=300, blank=True)
    error = models.TextField(blank=True)
    log = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["challenge", "kind", "state"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["queued", "running", "succeeded", "failed"]),
                name="job_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in (self.State.SUCCEEDED, self.State.FAILED)

    @property
    def kind_label(self) -> str:
        return kind_label(self.kind)

    @property
    def percent(self) -> int:
        if self.state == self.State.SUCCEEDED:
            return 100
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    @property
    def elapsed_s(self) -> float:
        """Seconds since the job was asked for, to its end or to now: what a person waited."""
        end = self.finished_at or timezone.now()
        return max((end - self.created_at).total_seconds(), 0.0)


class FadResult(models.Model):
    """FAD of one system's clips of one category against one reference set, for one model."""

    class Reference(models.TextChoices):
        EVALUATION = "evaluation", "Evaluation set"
        DEVELOPMENT = "development", "Development set"

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="fad_results")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="fad_results")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="fad_results")
    reference = models.CharField(max_length=16, choices=Reference.choices)
    model_id = models.CharField(max_length=200, help_text="Embedding model and its parameters.")
    value = models.FloatField()
    n_clips = models.PositiveIntegerField()
    n_reference = models.PositiveIntegerField(help_text="Clips (or embeddings) in the reference.")
    details = models.JSONField(default=dict, blank=True)
    computed_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["system", "category", "reference"]
        constraints = [
            models.UniqueConstraint(
                fields=["system", "category", "reference", "model_id"], name="fad_result_unique"
            ),
            models.CheckConstraint(condition=Q(value__gte=0), name="fad_result_non_negative"),
            models.CheckConstraint(
                condition=Q(reference__in=["evaluation", "development"]),
                name="fad_result_reference_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"FAD {self.system} {self.category.slug} vs {self.reference}: {self.value:.3f}"


class Medoid(models.Model):
    """One of the clips chosen to represent a finalist system's category in the listening test."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="medoids")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="medoids")
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="medoids")
    clip = models.ForeignKey(Clip, on_delete=models.CASCADE, related_name="medoid_of")
    position = models.PositiveSmallIntegerField(help_text="Order of the k-means cluster (0-based).")

    class Meta:
        ordering = ["system", "category", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["system", "category", "position"], name="medoid_position_unique"
            ),
            models.UniqueConstraint(
                fields=["system", "category", "clip"], name="medoid_clip_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"medoid {self.position} of {self.system} {self.category.slug}"


class Generator(models.Model):
    """The code of a system submitted as a generator: a module path or an uploaded archive."""

    class State(models.TextChoices):
        PENDING = "pending", "Not validated yet"
        VALID = "valid", "Valid"
        INVALID = "invalid", "Invalid"

    system = models.OneToOneField(System, on_delete=models.CASCADE, related_name="generator")
    module = models.CharField(
        max_length=200, blank=True, help_text="Module path; for an archive, the module inside it."
    )
    archive = models.CharField(
        max_length=300, blank=True, help_text="Storage name of the uploaded .zip or wheel."
    )
    archive_name = models.CharField(max_length=255, blank=True)
    archive_sha256 = models.CharField(max_length=64, blank=True)
    config = models.JSONField(
        default=dict, blank=True, help_text="Settings passed to load_model as a JSON file."
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    trusted = models.BooleanField(
        default=False,
        help_text="An organizer vouches for this code: it may run where the workers cannot "
        "isolate it. Cleared whenever the code is replaced.",
    )
    report = models.JSONField(default=dict, blank=True)
    validated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=~Q(module="") | ~Q(archive=""), name="generator_module_or_archive"
            ),
            models.CheckConstraint(
                condition=Q(archive_sha256="") | Q(archive_sha256__regex=r"^[0-9a-f]{64}$"),
                name="generator_archive_sha256_hex",
            ),
            models.CheckConstraint(
                condition=Q(state__in=["pending", "valid", "invalid"]), name="generator_state_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"generator of {self.system}"

    @property
    def label(self) -> str:
        return self.archive_name or self.module


class ObjectiveSettings(models.Model):
    """How a challenge's objective stage runs: embedding models, finalists and medoids.

    Defaults are DCASE 2023 Task 7's: FAD on VGGish, the top 4 per track as finalists, 20 medoids
    per finalist and category from k-means on OpenL3 embeddings.
    """

    challenge = models.OneToOneField(
        Challenge, on_delete=models.CASCADE, related_name="objective_settings"
    )
    fad_model = models.CharField(
        max_length=200,
        default="vggish",
        help_text="Built-in (vggish, openl3, logmel) or the import path of a HEAR module.",
    )
    fad_model_options = models.JSONField(default=dict, blank=True)
    fad_weights = models.CharField(
        max_length=500, blank=True, help_text="Weights file; empty: the model's default file."
    )
    fad_development = models.BooleanField(
        default=True, help_text="Also compute FAD against the development set (FAD-Dev)."
    )
    fad_bootstrap = models.PositiveSmallIntegerField(
        default=200,
        help_text="Resamples of clips for each FAD's 95% basic bootstrap interval (0: none).",
    )
    fad_infinity = models.BooleanField(
        default=False,
        help_text="Also FAD-inf (Chong & Forsyth's extrapolation to infinitely many embeddings), "
        "where a set has more than 2 x d embeddings (at least 100).",
    )
    league_models = models.JSONField(
        default=list,
        blank=True,
        help_text="Further embedding models whose FAD enters the embedding league (which "
        'model\'s FAD ranks systems as listeners do), e.g. [{"name": "logmel", "options": '
        '{"n_mels": 128}}, {"name": "hearbaseline.torchcrepe"}]; each computes FAD-Eval and '
        "FAD-Dev like the FAD model, which alone picks the finalists.",
    )
    medoid_model = models.CharField(max_length=200, default="openl3")
    medoid_model_options = models.JSONField(
        default=dict,
        blank=True,
        help_text='A new challenge takes {"content_type": "env"}: OpenL3\'s environmental-sound '
        "weights, trained on AudioSet's non-music videos, suit Foley sounds better than its music "
        'weights. e.g. {"input_repr": "mel256", "content_type": "env", "embedding_size": 512}',
    )
    medoid_weights = models.CharField(max_length=500, blank=True)
    finalists_per_track = models.PositiveSmallIntegerField(default=4)
    medoids_per_category = models.PositiveSmallIntegerField(default=20)
    kmeans_seed = models.PositiveIntegerField(default=0)
    kmeans_n_init = models.PositiveSmallIntegerField(default=10)

    class Meta:
        verbose_name_plural = "objective settings"
        constraints = [
            models.CheckConstraint(
                condition=Q(finalists_per_track__gte=1), name="objective_finalists_positive"
            ),
            models.CheckConstraint(
                condition=Q(medoids_per_category__gte=1), name="objective_medoids_positive"
            ),
            models.CheckConstraint(condition=Q(kmeans_n_init__gte=1), name="objective_n_init"),
        ]

    def __str__(self) -> str:
        return f"objective settings of {self.challenge}"

    def clean(self) -> None:
        entries = self.league_models
        if not isinstance(entries, list) or not all(
            isinstance(e, dict)
            and isinstance(e.get("name"), str)
            and e["name"].strip()
            and set(e) <= {"name", "options", "weights"}
            and isinstance(e.get("options", {}), dict)
            and isinstance(e.get("weights", ""), str)
            for e in entries
        ):
            raise ValidationError(
                {
                    "league_models": 'a list of {"name": ..., "options": {...}, "weights": ...} '
                    "(options and weights optional)"
                }
            )


class Embedding(models.Model):
    """One clip's frame embeddings under one model, computed once and kept as a .npy file.

    Keyed on the audio (so on its sha256) and the model id, which holds the model's name, its
    options and its weights' hash: a change of any of them is a different embedding.
    """

    audio = models.ForeignKey(AudioFile, on_delete=models.CASCADE, related_name="embeddings")
    model_id = models.CharField(max_length=200)
    file = models.CharField(
        max_length=300, help_text="Storage name of the float32 .npy [frames, d]."
    )
    frames = models.PositiveIntegerField()
    dim = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["audio", "model_id"], name="embedding_unique"),
            models.CheckConstraint(
                condition=Q(frames__gte=1) & Q(dim__gte=1), name="embedding_shape"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} of {self.audio_id}"


class PromptScore(models.Model):
    """The CLAP score of a clip against a text prompt: the cosine of their CLAP embeddings.

    A row is asked for (cosine empty) where the web process knows the pairs, and filled by a
    GPU worker, which records the model that computed it; one score per clip and prompt.
    """

    audio = models.ForeignKey(AudioFile, on_delete=models.CASCADE, related_name="+")
    prompt = models.TextField()
    prompt_sha256 = models.CharField(max_length=64)
    model_id = models.CharField(max_length=200, blank=True, default="")
    cosine = models.FloatField(null=True, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["audio", "prompt_sha256"], name="prompt_score_unique"),
            models.CheckConstraint(
                condition=Q(cosine__isnull=True)
                | (Q(cosine__gte=-1.001) & Q(cosine__lte=1.001) & ~Q(model_id="")),
                name="prompt_score_cosine",
            ),
        ]

    def __str__(self) -> str:
        return f"CLAP score of {self.audio_id} against {self.prompt_sha256[:8]}"


class ReferenceStats(models.Model):
    """Published statistics (mean and covariance) of a reference set, used in place of its audio.

    `model_id` names the model the statistics were made with, in the form of the embedding
    models' ids (`name:options@weights`); published statistics may leave the weights open
    (`@*`) where the platform cannot hash the file their makers used. A FAD job uses them only
    when its model matches and refuses them otherwise. `model` is the name part: one set of
    statistics per category, reference and model name, so importing another configuration
    replaces the earlier one.
    """

    challenge = models.ForeignKey(
        Challenge, on_delete=models.CASCADE, related_name="reference_stats"
    )
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="reference_stats")
    reference = models.CharField(max_length=16, choices=FadResult.Reference.choices)
    model = models.CharField(max_length=200)
    model_id = models.CharField(
        max_length=200, help_text="The model the statistics were made with: name:options@weights."
    )
    dim = models.PositiveIntegerField()
    count = models.PositiveIntegerField(default=0, help_text="Embeddings behind the statistics.")
    data = models.BinaryField(help_text="An .npz with mu and sigma (float64).")
    source = models.CharField(max_length=255, blank=True)
    sha256 = models.CharField(max_length=64)
    imported_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["category", "reference", "model"], name="reference_stats_unique"
            ),
            models.CheckConstraint(
                condition=Q(reference__in=["evaluation", "development"]),
                name="reference_stats_reference_valid",
            ),
            models.CheckConstraint(condition=Q(dim__gte=1), name="reference_stats_dim_positive"),
            models.CheckConstraint(
                condition=Q(model_id__startswith=Concat("model", Value(":")))
                & Q(model_id__contains="@"),
                name="reference_stats_model_id_names_model",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model_id} statistics of {self.category} ({self.reference})"


# --- The text-prompt protocol: real clips with their descriptions, and clips made from text ----


class DescribedClip(models.Model):
    """A real clip of a challenge's text reference set, with its text description (as in the
    training data of text-conditioned systems)."""

    challenge = models.ForeignKey(
        Challenge, on_delete=models.CASCADE, related_name="described_clips"
    )
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="described_uses")
    name = models.CharField(max_length=255, help_text="The file's path in the upload.")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["challenge", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["challenge", "name"], name="described_clip_name_unique"
            ),
            models.CheckConstraint(condition=~Q(text=""), name="described_clip_has_text"),
        ]

    def __str__(self) -> str:
        return f"described clip {self.name}"


class TextGeneration(models.Model):
    """A request for `n` clips of one text prompt from a system: pending until a GPU worker
    generates them (or records why it could not)."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Generated"
        FAILED = "failed", "Failed"

    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="text_generations")
    prompt = models.TextField()
    n = models.PositiveSmallIntegerField()
    seed = models.BigIntegerField()
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    error = models.TextField(blank=True)
    job = models.ForeignKey(
        Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="text_generations"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["system", "id"]
        indexes = [models.Index(fields=["system", "state"])]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["pending", "done", "failed"]),
                name="text_generation_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(n__gte=1) & Q(n__lte=100), name="text_generation_n_range"
            ),
            models.CheckConstraint(condition=~Q(prompt=""), name="text_generation_has_prompt"),
            models.CheckConstraint(condition=Q(seed__gte=0), name="text_generation_seed_positive"),
            # A failure always says why; only a finished request has a finishing time.
            models.CheckConstraint(
                condition=~Q(state="failed") | ~Q(error=""), name="text_generation_failure_told"
            ),
            models.CheckConstraint(
                condition=Q(state="pending", finished_at__isnull=True)
                | (~Q(state="pending") & Q(finished_at__isnull=False)),
                name="text_generation_finished_at",
            ),
        ]

    def __str__(self) -> str:
        return f"text generation {self.pk} ({self.state})"


class TextClip(models.Model):
    """Clip `index` of a text generation."""

    generation = models.ForeignKey(TextGeneration, on_delete=models.CASCADE, related_name="clips")
    index = models.PositiveSmallIntegerField()
    audio = models.ForeignKey(AudioFile, on_delete=models.PROTECT, related_name="text_uses")

    class Meta:
        ordering = ["generation", "index"]
        constraints = [
            models.UniqueConstraint(fields=["generation", "index"], name="text_clip_index_unique"),
        ]

    def __str__(self) -> str:
        return f"text clip {self.index} of {self.generation_id}"


# Registered with this app from their own modules: the learned predictors' values of each clip,
# the teams' accounts and submissions.
from .predictor_models import PredictorScore  # noqa: E402, F401
from .submissions.models import (  # noqa: E402, F401
    ChallengeSchedule,
    DeadlineExtension,
    Disqualification,
    Submission,
    SubmissionClip,
    TeamInvitation,
    TeamMembership,
    TeamNotice,
    TeamRegistration,
)
