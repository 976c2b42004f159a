"""Read-only public API of published results. Only public snapshots exist here (an interim one
kept for organizers does not), and a snapshot exists only once an organizer has published, so
nothing here needs a login."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from stimuli.models import Challenge

from . import selectors
from .models import Snapshot


class PublishedChallengeSerializer(serializers.ModelSerializer):
    latest_snapshot = serializers.IntegerField(read_only=True)

    class Meta:
        model = Challenge
        fields = ["slug", "name", "latest_snapshot"]


class SnapshotSummarySerializer(serializers.ModelSerializer):
    challenge = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Snapshot
        fields = [
            "challenge", "number", "final", "published_at", "code_version", "input_hashes",
            "settings", "definition_sha256",
        ]  # fmt: skip


class SnapshotSerializer(SnapshotSummarySerializer):
    class Meta(SnapshotSummarySerializer.Meta):
        fields = [*SnapshotSummarySerializer.Meta.fields, "definition", "result"]


class IntervalField(serializers.ListField):
    child = serializers.FloatField(allow_null=True)


class LeaderboardRowSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    system = serializers.CharField()
    team = serializers.CharField()
    fad_dev = serializers.FloatField(allow_null=True, help_text="Mean over categories.")
    fad_dev_min = serializers.FloatField(allow_null=True)
    fad_dev_max = serializers.FloatField(allow_null=True)
    fad_eval = serializers.FloatField(allow_null=True, help_text="Mean over categories.")
    fad_eval_min = serializers.FloatField(allow_null=True)
    fad_eval_max = serializers.FloatField(allow_null=True)
    # Present only where the objective settings computed FAD-inf (null: a set too small).
    fad_dev_inf = serializers.FloatField(
        required=False, help_text="FAD-inf, mean over categories; only with FAD-inf enabled."
    )
    fad_eval_inf = serializers.FloatField(
        required=False, help_text="FAD-inf, mean over categories; only with FAD-inf enabled."
    )
    # Present only where the objective stage computed KAD (its references were audio).
    kad_dev = serializers.FloatField(
        required=False, allow_null=True, help_text="KAD, mean over categories; may be below 0."
    )
    kad_dev_ci = IntervalField(required=False, allow_null=True)
    kad_eval = serializers.FloatField(
        required=False, allow_null=True, help_text="KAD, mean over categories; may be below 0."
    )
    kad_eval_ci = IntervalField(required=False, allow_null=True)
    # Present only where the challenge has learned predictor values (higher is better): the
    # mean over categories of each axis's mean over the clips, with its 95% interval.
    pq = serializers.FloatField(
        required=False, allow_null=True, help_text="Audiobox Aesthetics PQ, 1-10."
    )
    pq_ci = IntervalField(required=False, allow_null=True)
    pc = serializers.FloatField(
        required=False, allow_null=True, help_text="Audiobox Aesthetics PC, 1-10."
    )
    pc_ci = IntervalField(required=False, allow_null=True)
    ce = serializers.FloatField(
        required=False, allow_null=True, help_text="Audiobox Aesthetics CE, 1-10."
    )
    ce_ci = IntervalField(required=False, allow_null=True)
    cu = serializers.FloatField(
        required=False, allow_null=True, help_text="Audiobox Aesthetics CU, 1-10."
    )
    cu_ci = IntervalField(required=False, allow_null=True)
    pam = serializers.FloatField(required=False, allow_null=True, help_text="PAM, 0 to 1.")
    pam_ci = IntervalField(required=False, allow_null=True)
    quality = serializers.FloatField(allow_null=True)
    quality_ci = IntervalField(allow_null=True)
    fit = serializers.FloatField(allow_null=True)
    fit_ci = IntervalField(allow_null=True)
    diversity = serializers.FloatField(allow_null=True)
    diversity_ci = IntervalField(allow_null=True)
    final = serializers.FloatField(allow_null=True)
    final_ci = IntervalField(allow_null=True)
    quality_fit = serializers.FloatField(allow_null=True, help_text="First tie-break.")
    n_ratings = serializers.IntegerField()
    n_diversity = serializers.IntegerField()
    p_above_next = serializers.FloatField(allow_null=True)
    categories = serializers.DictField(child=serializers.DictField())


class LeaderboardSerializer(serializers.Serializer):
    challenge = serializers.CharField()
    snapshot = serializers.IntegerField()
    track = serializers.CharField()
    rows = LeaderboardRowSerializer(many=True)


class PublicMixin:
    permission_classes = [AllowAny]
    authentication_classes: list = []


class PublishedChallengeList(PublicMixin, generics.ListAPIView):
    """Challenges with published results."""

    serializer_class = PublishedChallengeSerializer

    def get_queryset(self):
        return selectors.published_challenges()


class SnapshotList(PublicMixin, generics.ListAPIView):
    """A challenge's publications, newest first."""

    serializer_class = SnapshotSummarySerializer

    def get_queryset(self):
        challenge = get_object_or_404(Challenge, slug=self.kwargs["slug"])
        found = selectors.snapshots(challenge).select_related("challenge")
        if not found.exists():  # before publication the challenge's results are not there
            raise Http404("No published results.")
        return found


class SnapshotDetail(PublicMixin, generics.RetrieveAPIView):
    """One publication with its whole frozen result; `latest` names the newest."""

    serializer_class = SnapshotSerializer

    def get_object(self) -> Snapshot:
        challenge = get_object_or_404(Challenge, slug=self.kwargs["slug"])
        number = self.kwargs.get("number")
        snap = (
            selectors.latest_snapshot(challenge)
            if number is None
            else selectors.snapshots(challenge).filter(number=number).first()
        )
        if snap is None:
            raise Http404("No published results.")
        return snap


class LeaderboardDetail(PublicMixin, APIView):
    """One track's leaderboard of a publication, ordered by rank, with 95% intervals."""

    @extend_schema(responses=LeaderboardSerializer)
    def get(self, request, slug: str, number: int, code: str) -> Response:
        snap = get_object_or_404(Snapshot, challenge__slug=slug, number=number, public=True)
        rows = snap.result["tracks"].get(code)
        if rows is None:
            raise Http404("No such track in these results.")
        data = {"challenge": slug, "snapshot": snap.number, "track": code, "rows": rows}
        return Response(LeaderboardSerializer(data).data)
