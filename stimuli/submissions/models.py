"""Teams' accounts, the challenge's dates and the teams' submissions.

Registered with the stimuli app (stimuli/models.py imports this module at its end), so the
tables are stimuli's and their migrations stimuli's. The base's models are named by string
("stimuli.Challenge"): importing them here would make the two modules import each other.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q

# The review window's rule of code, as a challenge starts (stimuli/submissions/review.py applies
# it). Source files a bug fix touches; not .txt, .json, .yaml, .toml, .cfg or .ini: those hold
# data and settings (a path to a checkpoint, a table of numbers) as easily as code does.
DEFAULT_CODE_SUFFIXES = ".py .pyi .pyx .pxd .c .h .cc .cpp .hpp .cu .cuh .sh .md .rst"
# Larger than any hand-written module a fix touches, far smaller than a model's weights.
DEFAULT_FILE_MAX_BYTES = 256 * 1024
# All the code a review window may add or change: weights split over small modules stop here.
DEFAULT_FIX_MAX_BYTES = 512 * 1024
SUFFIXES_PATTERN = r"^\.[a-z0-9_+-]{1,15}( \.[a-z0-9_+-]{1,15})*$"
# A code file is read whole to check and show it: the cap an organizer may set stays small.
REVIEW_FILE_MAX_BYTES_LIMIT = 16 * 1024**2


def new_invitation_token() -> str:
    return secrets.token_urlsafe(24)


class TeamMembership(models.Model):
    """A person's place in one team of a challenge: the one answer to "which team is this
    person" (team pages, submissions, the listening test's own-team rule)."""

    challenge = models.ForeignKey(
        "stimuli.Challenge", on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey("stimuli.Team", on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "joined_at"]
        constraints = [
            # One team per person and challenge: a member of two teams could rate either.
            models.UniqueConstraint(fields=["challenge", "user"], name="one_team_per_challenge"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"


class TeamInvitation(models.Model):
    """A link that makes whoever signs up from it a member of one team: at most `max_uses`
    people, until it expires or the organizers revoke it. A leaked link cannot make accounts
    without end."""

    team = models.ForeignKey("stimuli.Team", on_delete=models.CASCADE, related_name="invitations")
    token = models.CharField(max_length=64, unique=True, default=new_invitation_token)
    expires_at = models.DateTimeField()
    max_uses = models.PositiveIntegerField(default=5)
    uses = models.PositiveIntegerField(default=0)
    revoked = models.BooleanField(default=False)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # Two sign-ups at the same moment cannot both take the last use.
            models.CheckConstraint(
                condition=Q(max_uses__gte=1) & Q(uses__lte=F("max_uses")),
                name="invitation_uses_within_limit",
            ),
            models.CheckConstraint(
                condition=Q(revoked=False) | Q(revoked_at__isnull=False),
                name="invitation_revoked_when",
            ),
        ]

    def __str__(self) -> str:
        return f"invitation to {self.team}"

    @property
    def uses_left(self) -> int:
        return self.max_uses - self.uses


class TeamRegistration(models.Model):
    """A team that registered itself: it may submit once an organizer approves it. Teams the
    organizers create have no row and are approved."""

    class State(models.TextChoices):
        PENDING = "pending", "Waiting for approval"
        APPROVED = "approved", "Approved"
        REFUSED = "refused", "Refused"

    team = models.OneToOneField(
        "stimuli.Team", on_delete=models.CASCADE, related_name="registration"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    reason = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=["pending", "approved", "refused"]),
                name="team_registration_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"registration of {self.team} ({self.state})"


class TeamNotice(models.Model):
    """An e-mail sent to a team once (a deadline reminder): what keeps it from being sent twice."""

    team = models.ForeignKey("stimuli.Team", on_delete=models.CASCADE, related_name="notices")
    key = models.CharField(max_length=120, help_text="What it was about, like deadline:<iso>.")
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "key"], name="team_notice_once"),
        ]

    def __str__(self) -> str:
        return f"{self.key} to {self.team}"


class ChallengeSchedule(models.Model):
    """The submission weeks of a challenge: its dates (stored in UTC, shown in `time_zone`)
    and the limits on what teams submit. The server's clock decides every deadline."""

    challenge = models.OneToOneField(
        "stimuli.Challenge", on_delete=models.CASCADE, related_name="schedule"
    )
    time_zone = models.CharField(max_length=64, default="UTC")
    registration_opens = models.DateTimeField(null=True, blank=True)
    development_opens = models.DateTimeField(null=True, blank=True)
    submission_deadline = models.DateTimeField(null=True, blank=True)
    review_days = models.PositiveSmallIntegerField(
        default=4, help_text="Days after the deadline in which only code fixes are accepted."
    )
    review_code_suffixes = models.CharField(
        max_length=300,
        default=DEFAULT_CODE_SUFFIXES,
        validators=[
            RegexValidator(
                SUFFIXES_PATTERN, "list the code suffixes, lower case, one space between them"
            )
        ],
        help_text="The review window's code: files with these suffixes (UTF-8 text, each within "
        "the cap) are the only ones a fix may change.",
    )
    review_file_max_bytes = models.PositiveIntegerField(
        default=DEFAULT_FILE_MAX_BYTES,
        validators=[MinValueValidator(1), MaxValueValidator(REVIEW_FILE_MAX_BYTES_LIMIT)],
        help_text="The largest a code file may be; a larger file is model data.",
    )
    review_fix_max_bytes = models.PositiveIntegerField(
        default=DEFAULT_FIX_MAX_BYTES,
        validators=[MinValueValidator(1)],
        help_text="The most bytes of code a fix may add or change since the frozen version.",
    )
    evaluation_opens = models.DateTimeField(null=True, blank=True)
    listening_opens = models.DateTimeField(null=True, blank=True)
    results_published = models.DateTimeField(null=True, blank=True)
    self_registration = models.BooleanField(
        default=False, help_text="Teams may register themselves; an organizer approves each."
    )
    audio_allowed = models.BooleanField(
        default=False, help_text="Teams may add a zip of generated audio to a submission."
    )
    systems_per_track = models.PositiveSmallIntegerField(default=4)
    submissions_per_day = models.PositiveSmallIntegerField(default=3)
    archive_max_bytes = models.PositiveBigIntegerField(default=2 * 1024**3)
    compute_budget_s = models.FloatField(
        default=12 * 3600.0,
        help_text="The longest a system may take for the evaluation set on the reference worker.",
    )
    evaluation_clips_per_category = models.PositiveIntegerField(
        default=100, help_text="Clips per category a system generates for the evaluation set."
    )
    examples_per_category = models.PositiveSmallIntegerField(default=5)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(systems_per_track__gte=1), name="schedule_systems_per_track"
            ),
            models.CheckConstraint(
                condition=Q(submissions_per_day__gte=1), name="schedule_submissions_per_day"
            ),
            models.CheckConstraint(condition=Q(compute_budget_s__gt=0), name="schedule_budget"),
            models.CheckConstraint(
                condition=Q(review_code_suffixes__regex=SUFFIXES_PATTERN),
                name="schedule_review_code_suffixes",
            ),
            models.CheckConstraint(
                condition=Q(review_file_max_bytes__gte=1)
                & Q(review_file_max_bytes__lte=REVIEW_FILE_MAX_BYTES_LIMIT),
                name="schedule_review_file_max_bytes",
            ),
            models.CheckConstraint(
                condition=Q(review_fix_max_bytes__gte=1), name="schedule_review_fix_max_bytes"
            ),
            models.CheckConstraint(
                condition=Q(examples_per_category__gte=1) & Q(examples_per_category__lte=20),
                name="schedule_examples_range",
            ),
        ]

    def __str__(self) -> str:
        return f"schedule of {self.challenge}"


class DeadlineExtension(models.Model):
    """A later submission deadline for one team, with the organizer's reason; the latest
    extension of a team counts."""

    team = models.ForeignKey("stimuli.Team", on_delete=models.CASCADE, related_name="extensions")
    deadline = models.DateTimeField()
    reason = models.TextField()
    granted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    granted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "-granted_at"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="extension_has_reason"),
        ]

    def __str__(self) -> str:
        return f"extension of {self.team} to {self.deadline:%Y-%m-%d %H:%M}"


class Submission(models.Model):
    """One immutable version of a team's system: its archive, its declared settings and
    metadata, and what the worker found."""

    class State(models.TextChoices):
        QUEUED = "queued", "Queued"
        CHECKING = "checking", "Being checked"
        VALID = "valid", "Valid"
        INVALID = "invalid", "Invalid"
        # The platform failed (worker lost, disk full, sandbox unavailable): not the team's.
        PLATFORM_ERROR = "platform_error", "Platform error"

    challenge = models.ForeignKey(
        "stimuli.Challenge", on_delete=models.CASCADE, related_name="submissions"
    )
    team = models.ForeignKey("stimuli.Team", on_delete=models.CASCADE, related_name="submissions")
    track = models.ForeignKey("stimuli.Track", on_delete=models.PROTECT, related_name="submissions")
    system = models.ForeignKey(
        "stimuli.System", on_delete=models.CASCADE, related_name="submissions"
    )
    version = models.PositiveIntegerField()
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    day = models.DateField(help_text="The day of submission in the challenge's time zone.")
    in_review = models.BooleanField(default=False, help_text="Submitted as a review-window fix.")
    review_base = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="A fix's frozen version: what counted when the review window opened, the "
        "version every fix of the window is compared with.",
    )
    archive = models.CharField(max_length=300)
    archive_name = models.CharField(max_length=255)
    archive_sha256 = models.CharField(max_length=64)
    archive_bytes = models.PositiveBigIntegerField()
    audio_archive = models.CharField(max_length=300, blank=True)
    module = models.CharField(max_length=200)
    config = models.JSONField(default=dict, blank=True, help_text="Declared settings.")
    manifest = models.JSONField(
        default=dict,
        blank=True,
        help_text="Each file of the archive: sha256, size, and whether it is UTF-8 text.",
    )
    external_data = models.BooleanField(default=False)
    external_data_sources = models.TextField(blank=True)
    report_url = models.URLField(blank=True)
    description = models.TextField(blank=True)
    licence = models.CharField(max_length=120, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    counts_in_quota = models.BooleanField(default=True)
    report = models.JSONField(default=dict, blank=True)
    feedback = models.JSONField(default=dict, blank=True)
    job = models.ForeignKey(
        "stimuli.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    chosen = models.BooleanField(
        default=False, help_text="The team's choice of the version that counts."
    )
    disqualified_reason = models.TextField(blank=True)
    disqualified_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["team", "day"])]
        constraints = [
            models.UniqueConstraint(fields=["system", "version"], name="submission_version_unique"),
            models.UniqueConstraint(
                fields=["system"], condition=Q(chosen=True), name="submission_one_chosen"
            ),
            models.CheckConstraint(
                condition=Q(state__in=["queued", "checking", "valid", "invalid", "platform_error"]),
                name="submission_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(archive_sha256__regex=r"^[0-9a-f]{64}$"),
                name="submission_archive_sha256_hex",
            ),
            models.CheckConstraint(condition=Q(version__gte=1), name="submission_version_pos"),
            # Only a fix has a frozen version to be compared with.
            models.CheckConstraint(
                condition=Q(in_review=True) | Q(review_base__isnull=True),
                name="submission_review_base_of_fix",
            ),
            # A platform failure never counts against the team's quota.
            models.CheckConstraint(
                condition=~Q(state="platform_error") | Q(counts_in_quota=False),
                name="submission_platform_error_free",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.system} v{self.version}"

    @property
    def is_finished(self) -> bool:
        return self.state in (self.State.VALID, self.State.INVALID, self.State.PLATFORM_ERROR)


class SubmissionClip(models.Model):
    """An example clip a submission's generator made on the worker, for the team to hear."""

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="clips")
    category = models.ForeignKey("stimuli.Category", on_delete=models.CASCADE, related_name="+")
    index = models.PositiveSmallIntegerField()
    audio = models.ForeignKey("stimuli.AudioFile", on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["submission", "category", "index"]
        constraints = [
            models.UniqueConstraint(
                fields=["submission", "category", "index"], name="submission_clip_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"example {self.index} of {self.category_id} of {self.submission}"


class Disqualification(models.Model):
    """An organizer's disqualification of one version, and what it refuses afterwards.

    While it stands, the team may not submit again, as a version of any system or as a new one:
    the version's archive (its sha256), an archive holding every file of it (the same files
    repacked or renamed), or one holding any of its model data that none of the team's versions
    in good standing held when it was disqualified. An organizer lifts it with a reason; the row
    stays as the record."""

    challenge = models.ForeignKey(
        "stimuli.Challenge", on_delete=models.CASCADE, related_name="disqualifications"
    )
    team = models.ForeignKey(
        "stimuli.Team", on_delete=models.CASCADE, related_name="disqualifications"
    )
    system = models.ForeignKey(
        "stimuli.System", on_delete=models.CASCADE, related_name="disqualifications"
    )
    submission = models.ForeignKey(
        Submission, on_delete=models.CASCADE, related_name="disqualifications"
    )
    reason = models.TextField(help_text="Why, as the team reads it.")
    archive_sha256 = models.CharField(max_length=64)
    files = models.JSONField(
        default=list, blank=True, help_text="The sha256 of every file of the version, sorted."
    )
    model_data = models.JSONField(
        default=dict,
        blank=True,
        help_text="The model data refused on its own: sha256 -> the file's name in the version.",
    )
    disqualified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    disqualified_at = models.DateTimeField(auto_now_add=True)
    lifted_reason = models.TextField(blank=True)
    lifted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    lifted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-disqualified_at", "-pk"]
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="disqualification_has_reason"),
            models.CheckConstraint(
                condition=Q(archive_sha256__regex=r"^[0-9a-f]{64}$"),
                name="disqualification_archive_sha256_hex",
            ),
            # Lifted only with a reason, and a reason only when lifted.
            models.CheckConstraint(
                condition=(Q(lifted_at__isnull=True) & Q(lifted_reason=""))
                | (Q(lifted_at__isnull=False) & ~Q(lifted_reason="")),
                name="disqualification_lifted_with_reason",
            ),
            models.UniqueConstraint(
                fields=["submission"],
                condition=Q(lifted_at__isnull=True),
                name="disqualification_one_standing",
            ),
        ]

    def __str__(self) -> str:
        return f"disqualification of {self.submission}"

    @property
    def standing(self) -> bool:
        return self.lifted_at is None


class PendingSignUp(models.Model):
    """A sign-up (from an invitation link) or a team's registration, waiting for its e-mail link.
    The form's answer is the same whether the username or the address is in use; what is taken
    is told only to whoever follows the link, that is, to the address's owner. The password is
    kept as its hash, like an account's."""

    class Kind(models.TextChoices):
        JOIN = "join", "Sign up from an invitation"
        REGISTER = "register", "Register a team"

    token = models.CharField(max_length=64, unique=True, default=new_invitation_token)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    challenge = models.ForeignKey("stimuli.Challenge", on_delete=models.CASCADE, related_name="+")
    invitation = models.ForeignKey(
        TeamInvitation, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    team_name = models.CharField(max_length=120, blank=True)
    affiliation = models.CharField(max_length=200, blank=True)
    username = models.CharField(max_length=150)
    email = models.EmailField()
    password = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="join") & Q(invitation__isnull=False))
                | (Q(kind="register") & ~Q(team_name="")),
                name="pending_sign_up_has_its_team",
            ),
        ]

    def __str__(self) -> str:
        return f"pending {self.kind} of {self.username}"
