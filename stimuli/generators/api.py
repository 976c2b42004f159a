"""REST API for generators (organizers only): attach code to a system, read the validation
report, start a generation job. Failed jobs are retried with the jobs endpoint's `retry`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from stimuli.job_kinds import VALIDATE_GENERATOR

from ..api import REFUSAL, ChallengeScopedMixin, JobSerializer
from ..errors import Refused
from ..models import Generator, Job, System
from ..parsers import JSONParser, read_json
from . import services


class GeneratorSerializer(serializers.ModelSerializer):
    system = serializers.CharField(source="system.name", read_only=True)
    system_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = Generator
        fields = [
            "system_id", "system", "module", "archive_name", "archive_sha256", "config",
            "trusted", "state", "report", "validated_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = fields


class GeneratorUploadSerializer(serializers.Serializer):
    system = serializers.CharField(help_text="System name.")
    archive = serializers.FileField(
        required=False, help_text="A .zip holding the module and its weights, or a wheel."
    )
    module = serializers.CharField(
        required=False, allow_blank=True, help_text="Or a module path installed on the workers."
    )
    config = serializers.CharField(
        required=False, allow_blank=True, help_text="JSON settings passed to load_model."
    )
    trusted = serializers.BooleanField(
        default=False,
        help_text="Vouch for this code: it may run where a worker cannot isolate it.",
    )


class TrustSerializer(serializers.Serializer):
    trusted = serializers.BooleanField(
        help_text="Trusted code may run where a worker cannot isolate it; submitted code never "
        "runs without isolation otherwise."
    )


class GenerateSerializer(serializers.Serializer):
    n_per_category = serializers.IntegerField(default=100, min_value=1, max_value=10_000)
    seed = serializers.IntegerField(default=0, min_value=0, max_value=2**31 - 1)
    batch_size = serializers.IntegerField(default=services.DEFAULT_BATCH_SIZE, min_value=1)


class GeneratorViewSet(
    ChallengeScopedMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet
):
    """Generators of a challenge's systems, looked up by the system's id."""

    serializer_class = GeneratorSerializer
    model = Generator
    lookup_field = "system_id"
    parser_classes = [MultiPartParser, FormParser, JSONParser]

    def scoped_queryset(self, challenge):
        return Generator.objects.filter(system__challenge=challenge).select_related("system")

    @extend_schema(
        request=GeneratorUploadSerializer,
        responses={202: JobSerializer, 400: REFUSAL},
        description="Attach code to a system. The archive's layout is checked at once (400, "
        "nothing stored); loading and generating a few clips run as a validation job (202).",
    )
    def create(self, request, challenge_slug=None):
        challenge = self.get_challenge()
        serializer = GeneratorUploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        system = System.objects.filter(challenge=challenge, name=data["system"]).first()
        if system is None:
            raise Refused(f"no system named '{data['system']}' in this challenge")
        config = None
        if data.get("config"):
            try:
                config = read_json(data["config"])
            except ValueError as exc:
                raise Refused(f"config is not JSON: {exc}") from None
            if not isinstance(config, dict):
                raise Refused("config must be a JSON object")
        generator = services.set_generator(
            system,
            module=data.get("module") or "",
            archive=data.get("archive"),
            config=config,
            user=request.user,
            trusted=data["trusted"],
        )
        job = Job.objects.filter(kind=VALIDATE_GENERATOR, params__system_id=system.pk).first()
        body = JobSerializer(job).data
        body["generator"] = GeneratorSerializer(generator).data
        return Response(body, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=TrustSerializer, responses={200: GeneratorSerializer, 400: REFUSAL})
    @action(detail=True, methods=["post"])
    def trust(self, request, challenge_slug=None, system_id=None):
        """Mark the system's code trusted, or not (cleared whenever the code is replaced)."""
        serializer = TrustSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        generator = services.set_trusted(self.get_object(), serializer.validated_data["trusted"])
        return Response(GeneratorSerializer(generator).data)

    @extend_schema(
        request=GenerateSerializer, responses={202: JobSerializer, 400: REFUSAL, 409: REFUSAL}
    )
    @action(detail=True, methods=["post"])
    def generate(self, request, challenge_slug=None, system_id=None):
        """Queue a generation job (or return the one under way for this system)."""
        generator = self.get_object()
        serializer = GenerateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        job = services.start_generation(
            generator.system, user=request.user, **serializer.validated_data
        )
        job.refresh_from_db()
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
