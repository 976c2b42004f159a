from django.contrib import admin

from stimuli.models import Clip

from .models import (
    Anchor,
    CategorySession,
    DiversityItem,
    ListeningTest,
    PromptSet,
    Rater,
    Rating,
    Screening,
    ScreeningAttempt,
    Stimulus,
    TextJudge,
    TextPromptStudy,
    Vote,
)


@admin.register(ListeningTest)
class ListeningTestAdmin(admin.ModelAdmin):
    list_display = ["challenge", "is_open", "categories_min", "categories_max", "target_ratings"]


@admin.register(Screening)
class ScreeningAdmin(admin.ModelAdmin):
    list_display = ["test", "who", "level_check", "headphone_check", "hearing_check", "attempts"]


@admin.register(ScreeningAttempt)
class ScreeningAttemptAdmin(admin.ModelAdmin):
    """Read only: attempts are the rater's, and their limit is the database's."""

    list_display = ["rater", "step", "number", "limit", "state", "summary", "finished_at"]
    list_filter = ["step", "state"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Stimulus)
class StimulusAdmin(admin.ModelAdmin):
    """Organizers pick a stimulus set by hand here while no medoids exist."""

    list_display = ["challenge", "category", "system", "position", "clip"]
    list_filter = ["challenge", "category__slug", "system__track__code"]
    raw_id_fields = ["clip"]
    fields = ["clip", "position"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "clip":
            kwargs["queryset"] = Clip.objects.filter(role=Clip.Role.SYSTEM)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        # The clip decides the rest, so the set cannot disagree with it.
        obj.challenge_id = obj.clip.challenge_id
        obj.category_id = obj.clip.category_id
        obj.system_id = obj.clip.system_id
        super().save_model(request, obj, form, change)


@admin.register(Anchor)
class AnchorAdmin(admin.ModelAdmin):
    list_display = ["challenge", "category", "kind", "source"]
    list_filter = ["challenge", "kind"]
    raw_id_fields = ["source", "audio"]


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ["code", "challenge", "kind", "user", "team", "diversity_role", "created_at"]
    list_filter = ["challenge", "kind", "diversity_role"]
    readonly_fields = ["code", "index", "access_key"]


@admin.register(CategorySession)
class CategorySessionAdmin(admin.ModelAdmin):
    list_display = ["id", "rater", "category", "order", "state", "created_at"]
    list_filter = ["state"]
    readonly_fields = ["seed", "latin_row", "ordinal"]


@admin.register(Rating)
class RatingAdmin(admin.ModelAdmin):
    list_display = ["trial", "quality", "fit", "created_at"]
    readonly_fields = ["trial", "quality", "fit", "idempotency_key"]


@admin.register(Vote)
class VoteAdmin(admin.ModelAdmin):
    list_display = ["pair", "quality", "fit", "created_at"]
    readonly_fields = ["pair", "quality", "fit", "idempotency_key"]


@admin.register(DiversityItem)
class DiversityItemAdmin(admin.ModelAdmin):
    list_display = ["challenge", "system", "category", "n_sounds"]


@admin.register(TextPromptStudy)
class TextPromptStudyAdmin(admin.ModelAdmin):
    list_display = ["challenge", "is_open", "judges", "interpretability_clips", "realism_clips"]
    filter_horizontal = ["systems"]
    readonly_fields = ["seed"]


@admin.register(TextJudge)
class TextJudgeAdmin(admin.ModelAdmin):
    list_display = ["rater", "study", "system", "started_at", "revealed_at"]
    readonly_fields = ["rater", "study", "system", "seed", "started_at", "revealed_at"]


@admin.register(PromptSet)
class PromptSetAdmin(admin.ModelAdmin):
    """Judges' prompts; what they answered is read-only, as ratings are."""

    list_display = ["judge", "position", "prompt", "created_at"]
    readonly_fields = ["judge", "position", "prompt", "generation", "token", "idempotency_key"]
