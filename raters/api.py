"""Read-only API of the listening test for organizers: ratings and diversity ratings (JSON, or
CSV with `?format=csv`) and progress."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from stimuli.exports import to_csv
from stimuli.models import Challenge
from stimuli.permissions import IsOrganizer

from . import selectors


class CSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        view = (renderer_context or {}).get("view")
        columns = getattr(view, "columns", None)
        if not isinstance(data, list) or columns is None:  # an error body
            return str(data.get("detail", data) if isinstance(data, dict) else data)
        return to_csv(data, columns)


class RatingRowSerializer(serializers.Serializer):
    rater = serializers.CharField()
    participant_id = serializers.CharField(
        allow_blank=True, help_text="A crowd worker's id on the recruiting platform."
    )
    rater_team = serializers.CharField(allow_blank=True)
    session = serializers.CharField()
    category = serializers.CharField()
    system = serializers.CharField(allow_blank=True)
    track = serializers.CharField(allow_blank=True)
    stimulus = serializers.CharField()
    role = serializers.ChoiceField(
        choices=["trial", "anchor_hq_goodfit", "anchor_hq_poorfit", "anchor_lq_poorfit"]
    )
    quality = serializers.IntegerField(min_value=0, max_value=10)
    fit = serializers.IntegerField(min_value=0, max_value=10)


class DiversityRowSerializer(serializers.Serializer):
    rater = serializers.CharField()
    rater_team = serializers.CharField(allow_blank=True)
    category = serializers.CharField()
    system = serializers.CharField()
    track = serializers.CharField()
    diversity = serializers.IntegerField(min_value=0, max_value=10)


FORMAT = OpenApiParameter("format", str, enum=["json", "csv"], description="csv for a download")


class _RowsView(APIView):
    permission_classes = [IsOrganizer]
    renderer_classes = [JSONRenderer, CSVRenderer]
    columns: tuple[str, ...] = ()

    def rows(self, challenge: Challenge) -> list[dict]:
        raise NotImplementedError

    def get(self, request, challenge_slug: str, format=None):
        challenge = get_object_or_404(Challenge, slug=challenge_slug)
        response = Response(self.rows(challenge))
        if getattr(request.accepted_renderer, "format", "") == "csv":
            response["Content-Disposition"] = (
                f'attachment; filename="{challenge.slug}-{self.name_part}.csv"'
            )
        return response


class RatingsView(_RowsView):
    """One row per quality/fit rating: rater, participant_id, rater_team, session, category,
    system, track, stimulus, role, quality, fit."""

    columns = selectors.EXPORT_RATING_COLUMNS
    name_part = "ratings"

    def rows(self, challenge):
        return selectors.export_rating_rows(challenge)

    @extend_schema(responses=RatingRowSerializer(many=True), parameters=[FORMAT])
    def get(self, request, challenge_slug: str, format=None):
        return super().get(request, challenge_slug, format)


class DiversityView(_RowsView):
    """One row per diversity rating: rater, rater_team, category, system, track, diversity."""

    columns = selectors.DIVERSITY_COLUMNS
    name_part = "diversity"

    def rows(self, challenge):
        return selectors.diversity_rows(challenge)

    @extend_schema(responses=DiversityRowSerializer(many=True), parameters=[FORMAT])
    def get(self, request, challenge_slug: str, format=None):
        return super().get(request, challenge_slug, format)


class CrowdDecisionSerializer(serializers.Serializer):
    participant_id = serializers.CharField()
    submission_id = serializers.CharField(allow_blank=True, help_text="Prolific's SESSION_ID.")
    study_id = serializers.CharField(allow_blank=True)
    action = serializers.ChoiceField(choices=["APPROVE", "REJECT", ""])
    rejection_category = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    rater = serializers.CharField()
    categories_done = serializers.IntegerField()
    checks_misrated = serializers.IntegerField()


class CrowdView(_RowsView):
    """One row per crowd worker: the submission to approve or reject on the recruiting platform
    (Prolific's actions and rejection category), with the reason."""

    columns = selectors.CROWD_COLUMNS
    name_part = "crowd"

    def rows(self, challenge):
        return selectors.crowd_decisions(challenge)

    @extend_schema(responses=CrowdDecisionSerializer(many=True), parameters=[FORMAT])
    def get(self, request, challenge_slug: str, format=None):
        return super().get(request, challenge_slug, format)


class ProgressView(APIView):
    """Per category: stimuli, fewest and most ratings so far, and sessions; plus the target."""

    permission_classes = [IsOrganizer]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, challenge_slug: str):
        challenge = get_object_or_404(Challenge, slug=challenge_slug)
        test = getattr(challenge, "listening_test", None)
        return Response(
            {
                "is_open": bool(test and test.is_open),
                "target_ratings": test.target_ratings if test else None,
                "categories": [
                    {
                        "category": row["category"].slug,
                        "stimuli": row["stimuli"],
                        "min_ratings": row["min"],
                        "max_ratings": row["max"],
                        "stimuli_at_target": row["reached"],
                        "sessions": row["sessions"],
                    }
                    for row in selectors.category_progress(challenge)
                ],
                "raters": [
                    {
                        "rater": row["rater"].code,
                        "participant_id": row["rater"].participant_id,
                        "kind": row["rater"].kind,
                        "sessions_closed": row["closed"],
                        "answered": row["answered"],
                        "trials": row["trials"],
                        "sessions_failing_checks": row["failing"],
                        "sessions_flagged": row["flagged"],
                        "flags": [
                            {
                                "session": session.code,
                                "category": session.category.slug,
                                "excluded": session.verdict.excluded,
                                "reasons": [str(flag) for flag in session.verdict.flags],
                            }
                            for session in row["sessions"]
                            if session.verdict.flags
                        ],
                        "diversity_ratings": row["diversity"],
                    }
                    for row in selectors.rater_progress(challenge)
                ],
            }
        )
