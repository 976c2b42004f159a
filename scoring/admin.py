from django.contrib import admin

from .models import DataRelease, ScoringSettings, Snapshot


@admin.register(ScoringSettings)
class ScoringSettingsAdmin(admin.ModelAdmin):
    list_display = ["challenge", "weight_diversity", "bootstrap_samples", "confidence"]


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin):
    list_display = ["challenge", "number", "published_at", "published_by", "code_version"]
    readonly_fields = [f.name for f in Snapshot._meta.fields]

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DataRelease)
class DataReleaseAdmin(admin.ModelAdmin):
    list_display = ["snapshot", "version", "created_at", "created_by", "audio_files"]
    readonly_fields = [f.name for f in DataRelease._meta.fields]

    def has_change_permission(self, request, obj=None) -> bool:
        return False
