"""REST API for organizers: challenges, teams, systems, clips and jobs. Each stage of stimuli
(uploads, objective, generators) has its own API in its package, on these viewsets' mixin.

Every endpoint calls the same services as the pages and the command line.
"""

from __future__ import annotations

import copy

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import ProtectedError, RestrictedError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from . import jobs, selectors, services
from .errors import Conflict
from .models import CLIP_SPEC_FIELDS, Category, Challenge, Clip, Job, System, Team, Track
from .permissions import may_create_challenges, readable_challenges

# What every refusal of the API looks like (foley_platform/api_errors.py writes it).
REFUSAL = inline_serializer(
    "Refusal", {"detail": serializers.CharField(), "errors": serializers.ListField()}
)


def _protected_detail(what: str, exc: ProtectedError | RestrictedError) -> str:
    blocking = getattr(exc, "protected_objects", None) or getattr(exc, "restricted_objects", ())
    kinds = sorted({str(obj._meta.verbose_name_plural) for obj in blocking})
    return f"{what} cannot be deleted: {', '.join(kinds)} depend on it; delete those first."


class CategorySerializer(serializers.ModelSerializer):
    class Meta:
        model = Category
        fields = ["slug", "name", "position"]


class TrackSerializer(serializers.ModelSerializer):
    class Meta:
        model = Track
        fields = ["code", "name", "description", "external_data_allowed"]


class ChallengeSerializer(serializers.ModelSerializer):
    categories = CategorySerializer(many=True, read_only=True)
    tracks = TrackSerializer(many=True, read_only=True)

    class Meta:
        model = Challenge
        fields = [
            "slug", "name", "description", "phase", "clip_duration_s", "sample_rate",
            "channels", "bit_depth", "categories", "tracks", "created_at",
        ]  # fmt: skip
        read_only_fields = ["phase", "created_at"]
        # The ranges the model's constraints enforce, as messages that name the field.
        extra_kwargs = {
            "clip_duration_s": {"max_value": 60},
            "sample_rate": {"min_value": 8_000, "max_value": 192_000},
            "channels": {"min_value": 1, "max_value": 2},
        }

    def validate_clip_duration_s(self, value: float) -> float:
        if value <= 0:
            raise ValidationError("Ensure this value is greater than 0.")
        return value

    def validate_bit_depth(self, value: int) -> int:
        if value not in (16, 24):
            raise ValidationError("Clips are stored as 16-bit or 24-bit PCM.")
        return value

    def validate(self, attrs):
        # The phase changes only through the services that take the challenge's lock (opening
        # the listening test, publishing): written here it would bypass both.
        if "phase" in getattr(self, "initial_data", {}):
            raise ValidationError(
                {
                    "phase": "The phase cannot be set here: it changes when the listening test "
                    "opens or the results are published."
                }
            )
        # The model's checks (ranges, supported bit depths) as 400s; the database's constraints
        # would otherwise fail the save with a 500. Creation is checked by the service.
        if self.instance is not None:
            candidate = copy.copy(self.instance)
            for name, value in attrs.items():
                setattr(candidate, name, value)
            try:
                candidate.full_clean()
            except DjangoValidationError as exc:
                raise ValidationError(exc.message_dict) from None
        return attrs

    def create(self, validated_data):
        try:
            request = self.context["request"]
            if not may_create_challenges(request.user):
                raise PermissionDenied("Only the organizers group can create challenges.")
            return services.create_challenge(**validated_data, owner=request.user)
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None


class TeamSerializer(serializers.ModelSerializer):
    class Meta:
        model = Team
        fields = ["id", "name", "affiliation"]

    def validate_name(self, value: str) -> str:
        challenge = self.context.get("challenge")
        if challenge is not None:
            taken = Team.objects.filter(challenge=challenge, name=value)
            if self.instance is not None:
                taken = taken.exclude(pk=self.instance.pk)
            if taken.exists():
                raise ValidationError("A team with this name already exists.")
        return value


class SystemSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="name", queryset=Team.objects.none())
    track = serializers.SlugRelatedField(slug_field="code", queryset=Track.objects.none())
    clip_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = System
        fields = [
            "id", "name", "public_id", "team", "track", "kind", "is_finalist", "release_audio",
            "clip_count",
        ]  # fmt: skip
        read_only_fields = ["public_id", "is_finalist"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        challenge = self.context.get("challenge")
        if challenge is not None:
            self.fields["team"].queryset = Team.objects.filter(challenge=challenge)
            self.fields["track"].queryset = Track.objects.filter(challenge=challenge)


class ClipSerializer(serializers.ModelSerializer):
    category = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    system = serializers.SlugRelatedField(slug_field="name", read_only=True)
    sha256 = serializers.CharField(source="audio.sha256", read_only=True)
    duration_s = serializers.FloatField(source="audio.duration_s", read_only=True)
    sample_rate = serializers.IntegerField(source="audio.sample_rate", read_only=True)
    loudness_lufs = serializers.FloatField(source="audio.loudness_lufs", read_only=True)
    is_silent = serializers.BooleanField(source="audio.is_silent", read_only=True)
    is_clipped = serializers.BooleanField(source="audio.is_clipped", read_only=True)

    class Meta:
        model = Clip
        fields = [
            "id", "category", "role", "system", "original_name", "sha256", "duration_s",
            "sample_rate", "loudness_lufs", "is_silent", "is_clipped", "created_at",
        ]  # fmt: skip


class JobSerializer(serializers.ModelSerializer):
    percent = serializers.IntegerField(read_only=True)

    class Meta:
        model = Job
        fields = [
            "id", "kind", "state", "done", "total", "percent", "message", "error", "params",
            "result", "attempts", "created_at", "started_at", "finished_at",
        ]  # fmt: skip


class ChallengeViewSet(viewsets.ModelViewSet):
    serializer_class = ChallengeSerializer
    lookup_field = "slug"

    def get_queryset(self):
        # The challenges the user organizes or views; another's is a 404, as if it were not.
        return readable_challenges(self.request.user).prefetch_related("categories", "tracks")

    def perform_update(self, serializer):
        challenge = serializer.instance
        changed = [
            name
            for name in CLIP_SPEC_FIELDS
            if name in serializer.validated_data
            and serializer.validated_data[name] != getattr(challenge, name)
        ]
        with transaction.atomic():
            Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
            if changed and (refusal := services.clip_spec_refusal(challenge)):
                raise Conflict(refusal)
            try:
                serializer.save()
            except IntegrityError:  # a slug taken by a request that committed meanwhile
                raise ValidationError({"slug": ["A challenge with this slug exists."]}) from None

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except (ProtectedError, RestrictedError) as exc:
            raise Conflict(_protected_detail(f"Challenge '{instance.slug}'", exc)) from None


class ChallengeScopedMixin:
    """Nested under /challenges/{challenge_slug}/: every query is limited to that challenge."""

    def get_challenge(self) -> Challenge:
        if not hasattr(self, "_challenge"):
            self._challenge = get_object_or_404(Challenge, slug=self.kwargs["challenge_slug"])
        return self._challenge

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no challenge
            return self.model.objects.none()
        return self.scoped_queryset(self.get_challenge())

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if "challenge_slug" in self.kwargs:
            context["challenge"] = self.get_challenge()
        return context


class TeamViewSet(ChallengeScopedMixin, viewsets.ModelViewSet):
    serializer_class = TeamSerializer
    model = Team

    def scoped_queryset(self, challenge):
        return Team.objects.filter(challenge=challenge)

    def perform_create(self, serializer):
        # The model's checks (Django's ValidationError) answer 400 through the API's handler.
        serializer.instance = services.create_team(
            self.get_challenge(), **serializer.validated_data
        )

    def perform_update(self, serializer):
        try:
            with transaction.atomic():
                serializer.save()
        except IntegrityError:  # the same name taken by a request that committed meanwhile
            raise ValidationError({"name": ["A team with this name already exists."]}) from None

    def perform_destroy(self, instance):
        try:
            instance.delete()
        except (ProtectedError, RestrictedError) as exc:
            raise Conflict(_protected_detail(f"Team '{instance.name}'", exc)) from None


class SystemViewSet(ChallengeScopedMixin, viewsets.ModelViewSet):
    serializer_class = SystemSerializer
    model = System

    def scoped_queryset(self, challenge):
        return selectors.systems_with_counts(challenge)

    def perform_create(self, serializer):
        serializer.instance = services.create_system(**serializer.validated_data)

    def perform_update(self, serializer):
        try:
            serializer.save()
        except IntegrityError:
            raise ValidationError({"name": ["A system with this name already exists."]}) from None


class ClipViewSet(ChallengeScopedMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = ClipSerializer
    model = Clip

    def scoped_queryset(self, challenge):
        params = self.request.query_params
        return selectors.clips(
            challenge,
            role=params.get("role"),
            category=params.get("category"),
            system=params.get("system"),
        )


class JobViewSet(ChallengeScopedMixin, viewsets.ReadOnlyModelViewSet):
    serializer_class = JobSerializer
    model = Job

    def scoped_queryset(self, challenge):
        return Job.objects.filter(challenge=challenge)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def retry(self, request, challenge_slug=None, pk=None):
        job = jobs.retry(self.get_object())  # the pages' retry, with each stage's rules
        job.refresh_from_db()
        return Response(JobSerializer(job).data)
