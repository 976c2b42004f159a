from django.contrib import admin

from .job_kinds import KINDS
from .models import (
    CLIP_SPEC_FIELDS,
    AudioFile,
    Category,
    Challenge,
    ChallengeRole,
    Clip,
    DescribedClip,
    FadResult,
    Generator,
    Job,
    Medoid,
    System,
    Team,
    TextGeneration,
    Track,
)


class CategoryInline(admin.TabularInline):
    model = Category
    extra = 0


class TrackInline(admin.TabularInline):
    model = Track
    extra = 0


class RoleInline(admin.TabularInline):
    model = ChallengeRole
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Challenge)
class ChallengeAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "phase", "sample_rate", "clip_duration_s", "created_at"]
    list_filter = ["phase"]
    prepopulated_fields = {"slug": ["name"]}
    search_fields = ["name", "slug"]
    inlines = [CategoryInline, TrackInline, RoleInline]

    def get_readonly_fields(self, request, obj=None):
        # The phase moves only through the services that take the challenge's lock; the clip
        # spec is fixed once clips were checked against it (as in the API).
        fixed = ["phase"]
        if obj is not None and obj.clips.exists():
            fixed += CLIP_SPEC_FIELDS
        return fixed


@admin.register(Category)
class CategoryAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "challenge", "position"]
    list_filter = ["challenge"]


@admin.register(Track)
class TrackAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "challenge", "external_data_allowed"]
    list_filter = ["challenge"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "affiliation", "challenge"]
    list_filter = ["challenge"]
    search_fields = ["name"]


@admin.register(System)
class SystemAdmin(admin.ModelAdmin):
    list_display = ["name", "public_id", "team", "track", "kind", "release_audio", "challenge"]
    list_filter = ["challenge", "track__code", "kind", "release_audio"]
    search_fields = ["name", "public_id", "team__name"]
    readonly_fields = ["public_id"]


@admin.register(AudioFile)
class AudioFileAdmin(admin.ModelAdmin):
    list_display = [
        "sha256",
        "duration_s",
        "sample_rate",
        "loudness_lufs",
        "is_silent",
        "is_clipped",
    ]
    list_filter = ["is_silent", "is_clipped", "sample_rate"]
    search_fields = ["sha256"]
    readonly_fields = [f.name for f in AudioFile._meta.fields]


@admin.register(Clip)
class ClipAdmin(admin.ModelAdmin):
    list_display = ["id", "challenge", "category", "role", "system", "original_name"]
    list_filter = ["challenge", "role", "category__slug"]
    search_fields = ["original_name", "audio__sha256", "system__name"]
    raw_id_fields = ["audio", "source_job"]


class JobKindFilter(admin.SimpleListFilter):
    """The declared kinds of job, by their labels (stimuli/job_kinds.py)."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        return sorted(((k, kind.label) for k, kind in KINDS.items()), key=lambda item: item[1])

    def queryset(self, request, queryset):
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "kind_label",
        "challenge",
        "state",
        "done",
        "total",
        "created_at",
        "finished_at",
    ]
    list_filter = [JobKindFilter, "state", "challenge"]
    readonly_fields = ["created_at", "started_at", "finished_at", "updated_at"]


@admin.register(FadResult)
class FadResultAdmin(admin.ModelAdmin):
    list_display = ["system", "category", "reference", "model_id", "value", "n_clips"]
    list_filter = ["challenge", "reference", "model_id"]


@admin.register(Medoid)
class MedoidAdmin(admin.ModelAdmin):
    list_display = ["system", "category", "position", "clip"]
    list_filter = ["challenge", "category__slug"]
    raw_id_fields = ["clip"]


@admin.register(Generator)
class GeneratorAdmin(admin.ModelAdmin):
    list_display = ["system", "module", "archive_name", "state", "validated_at"]
    list_filter = ["state", "system__challenge"]
    readonly_fields = ["archive", "archive_sha256", "report", "validated_at", "created_at"]


@admin.register(DescribedClip)
class DescribedClipAdmin(admin.ModelAdmin):
    list_display = ["name", "challenge", "text"]
    list_filter = ["challenge"]
    search_fields = ["name", "text"]
    raw_id_fields = ["audio"]


@admin.register(TextGeneration)
class TextGenerationAdmin(admin.ModelAdmin):
    """Clips asked of text-conditioned systems; a failed request keeps its reason."""

    list_display = ["id", "system", "prompt", "n", "state", "created_at", "finished_at"]
    list_filter = ["state", "system__challenge"]
    readonly_fields = ["system", "prompt", "n", "seed", "state", "error", "job", "finished_at"]


# The teams' side registers its own models.
from .submissions import admin as _submissions_admin  # noqa: E402, F401
