"""Read-only API of the listening test for organizers: ratings and diversity ratings (JSON, or
CSV with `?format=csv`) and progress."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

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
        return selectors.to_csv(data, columns)


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


def _row_schema(name: str, columns: tuple[str, ...]):
    return inline_serializer(
        name=name, many=True, fields={c: serializers.CharField() for c in columns}
    )


@extend_schema(responses=_row_schema("RatingRow", selectors.RATING_COLUMNS))
class RatingsView(_RowsView):
    """One row per quality/fit rating: rater, rater_team, session, category, system, track,
    stimulus, role, quality, fit."""

    columns = selectors.RATING_COLUMNS
    name_part = "ratings"

    def rows(self, challenge):
        return selectors.rating_rows(challenge)


@extend_schema(responses=_row_schema("DiversityRow", selectors.DIVERSITY_COLUMNS))
class DiversityView(_RowsView):
    """One row per diversity rating: rater, rater_team, category, system, track, diversity."""

    columns = selectors.DIVERSITY_COLUMNS
    name_part = "diversity"

    def rows(self, challenge):
        return selectors.diversity_rows(challenge)


@extend_schema(
    responses=inline_serializer(
        name="ListeningProgress",
        fields={
            "is_open": serializers.BooleanField(),
            "target_ratings": serializers.IntegerField(allow_null=True),
            "categories": serializers.ListField(child=serializers.DictField()),
        },
    )
)
class ProgressView(APIView):
    """Per category: stimuli, fewest and most ratings so far, and sessions; plus the target."""

    permission_classes = [IsOrganizer]

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
                        "kind": row["rater"].kind,
                        "sessions_closed": row["closed"],
                        "answered": row["answered"],
                        "trials": row["trials"],
                        "sessions_failing_checks": row["failing"],
                        "diversity_ratings": row["diversity"],
                    }
                    for row in selectors.rater_progress(challenge)
                ],
            }
        )
