"""REST API of the objective stage (organizers only): settings, starting the FAD and medoid
pipelines and the learned predictors, published reference statistics, and the results (FAD per
system and category, the ranking with finalists, the medoids). Failed jobs are retried with the
jobs endpoint's `retry`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from .. import selectors
from ..api import ChallengeScopedMixin, JobSerializer
from ..models import FadResult, Medoid, ObjectiveSettings
from ..parsers import JSONParser
from . import config, reference_stats, services


class ObjectiveSettingsSerializer(serializers.ModelSerializer):
    class Meta:
        model = ObjectiveSettings
        exclude = ["id", "challenge"]


class FadResultSerializer(serializers.ModelSerializer):
    system = serializers.CharField(source="system.name")
    track = serializers.CharField(source="system.track.code")
    category = serializers.CharField(source="category.slug")

    class Meta:
        model = FadResult
        fields = [
            "system", "track", "category", "reference", "model_id", "value", "n_clips",
            "n_reference", "details", "computed_at",
        ]  # fmt: skip


class MedoidSerializer(serializers.ModelSerializer):
    system = serializers.CharField(source="system.name")
    category = serializers.CharField(source="category.slug")
    clip = serializers.CharField(source="clip.original_name")
    sha256 = serializers.CharField(source="clip.audio.sha256")

    class Meta:
        model = Medoid
        fields = ["system", "category", "position", "clip", "sha256"]


RANKING = inline_serializer(
    "ObjectiveRanking",
    {
        "model_id": serializers.CharField(allow_null=True),
        "tracks": serializers.DictField(child=serializers.ListField(child=serializers.DictField())),
    },
)


class StatsUploadSerializer(serializers.Serializer):
    files = serializers.ListField(
        child=serializers.FileField(), help_text="One <category>.npz (mu, sigma) per category."
    )
    model = serializers.CharField(
        default="vggish",
        help_text="The model the statistics were made with: a model id name:options@weights "
        "(weights * for any weights file), or vggish for DCASE 2023 Task 7's VGGish "
        f"({config.DCASE2023_VGGISH}). FAD refuses statistics of another configuration.",
    )
    reference = serializers.ChoiceField(choices=FadResult.Reference.values, default="evaluation")
    source = serializers.CharField(required=False, allow_blank=True, default="")


class ObjectiveViewSet(ChallengeScopedMixin, viewsets.ViewSet):
    """The objective stage of a challenge: `GET` gives the ranking by FAD with the finalists."""

    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(responses=RANKING)
    def list(self, request, challenge_slug=None):
        return Response(selectors.fad_ranking_table(self.get_challenge()))

    @extend_schema(request=ObjectiveSettingsSerializer, responses=ObjectiveSettingsSerializer)
    @action(detail=False, methods=["get", "patch"], url_path="settings")
    def objective_settings(self, request, challenge_slug=None):
        obj = config.objective_settings(self.get_challenge())
        if request.method == "PATCH":
            serializer = ObjectiveSettingsSerializer(obj, data=request.data, partial=True)
            serializer.is_valid(raise_exception=True)
            config.set_models(self.get_challenge(), **serializer.validated_data)
            obj.refresh_from_db()
        return Response(ObjectiveSettingsSerializer(obj).data)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=False, methods=["post"], url_path="rank-by-fad")
    def rank_by_fad(self, request, challenge_slug=None):
        """Rank by FAD: queue embeddings (gpu queue), then FAD and the finalists (cpu queue)."""
        return self._start(services.start_rank_by_fad, request)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=False, methods=["post"], url_path="select-medoids")
    def select_medoids(self, request, challenge_slug=None):
        """Queue the finalists' embeddings with the medoid model, then k-means medoids."""
        return self._start(services.start_select_medoids, request)

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=False, methods=["post"], url_path="run-predictors")
    def run_predictors(self, request, challenge_slug=None):
        """Run the predictors: queue the learned predictors over every system clip (gpu queue);
        their values come with the published results."""
        return self._start(services.start_predictors, request)

    def _start(self, start, request) -> Response:
        job = start(self.get_challenge(), user=request.user)
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=FadResultSerializer(many=True))
    @action(detail=False, methods=["get"])
    def fad(self, request, challenge_slug=None):
        rows = FadResult.objects.filter(challenge=self.get_challenge()).select_related(
            "system__track", "category"
        )
        return Response(FadResultSerializer(rows, many=True).data)

    @extend_schema(responses=MedoidSerializer(many=True))
    @action(detail=False, methods=["get"])
    def medoids(self, request, challenge_slug=None):
        medoids = selectors.medoids(self.get_challenge())
        return Response(MedoidSerializer(medoids, many=True).data)

    @extend_schema(
        request={"multipart/form-data": StatsUploadSerializer},
        responses={201: inline_serializer("StatsImported", {"stored": serializers.ListField()})},
    )
    @action(detail=False, methods=["post"], url_path="reference-stats")
    def reference_stats(self, request, challenge_slug=None):
        """Published statistics of a reference set, one `.npz` per category; all or nothing."""
        serializer = StatsUploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        files = {f.name.rsplit(".", 1)[0]: f for f in data["files"]}
        rows = reference_stats.import_reference_stats(
            self.get_challenge(),
            files,
            model=data["model"],
            reference=data["reference"],
            source=data["source"],
        )
        return Response(
            {
                "stored": [
                    {
                        "category": r.category.slug,
                        "model_id": r.model_id,
                        "dim": r.dim,
                        "count": r.count,
                    }
                    for r in rows
                ]
            },
            status=status.HTTP_201_CREATED,
        )
