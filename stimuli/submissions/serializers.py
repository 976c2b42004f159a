"""The teams' API: a submission as the team (or an organizer) reads it, and what a POST takes."""

from __future__ import annotations

from rest_framework import serializers

from .models import Submission


class SubmissionSerializer(serializers.ModelSerializer):
    system = serializers.CharField(source="system.name")
    track = serializers.CharField(source="track.code")
    team = serializers.CharField(source="team.name")
    example_clips = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Submission
        fields = [
            "id", "team", "system", "track", "version", "created_at", "in_review", "state",
            "counts_in_quota", "archive_name", "archive_sha256", "archive_bytes", "config",
            "external_data", "external_data_sources", "report_url", "description", "licence",
            "report", "feedback", "chosen", "disqualified_reason", "example_clips", "progress",
        ]  # fmt: skip

    def get_example_clips(self, obj: Submission) -> int:
        return obj.clips.count()

    def get_progress(self, obj: Submission) -> int:
        return 100 if obj.is_finished else (obj.job.percent if obj.job else 0)


class SubmitSerializer(serializers.Serializer):
    system = serializers.CharField(max_length=120)
    track = serializers.CharField(max_length=8)
    archive = serializers.FileField()
    audio = serializers.FileField(required=False)
    licence = serializers.CharField(max_length=120)
    external_data = serializers.BooleanField(required=False, default=False)
    external_data_sources = serializers.CharField(required=False, default="", allow_blank=True)
    report_url = serializers.CharField(required=False, default="", allow_blank=True)
    description = serializers.CharField(required=False, default="", allow_blank=True)
    config = serializers.JSONField(required=False, default=dict)
