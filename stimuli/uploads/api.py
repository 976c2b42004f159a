"""REST API for uploads (organizers only): a zip of clips becomes an import job."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from ..api import REFUSAL, ChallengeScopedMixin, JobSerializer
from ..errors import Refused
from ..models import Clip, System
from . import services


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A zip with one folder per category.")
    role = serializers.ChoiceField(choices=[r for r in Clip.Role.values])
    system = serializers.CharField(required=False, allow_blank=True, help_text="System name.")
    convert = serializers.BooleanField(
        default=False,
        help_text="Convert like DCASE (mono, resample, pad or cut) instead of rejecting.",
    )
    strict = serializers.BooleanField(
        default=False,
        help_text="Reject files that are not audio instead of skipping them with a note.",
    )


class UploadViewSet(ChallengeScopedMixin, mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Upload a development set, an evaluation set or a system's audio as a zip.

    Whether the archive can be read safely is checked at once (400 with one message per
    problem, nothing stored; 409 while the challenge's listening test is open or its results are
    published); the audio checks run as a job whose URL the response gives (202). The job ends
    `succeeded` with a per-file report, or `failed` with every problem at once (where files sit
    and every bad file), having stored nothing. Files that are not audio are skipped with a note
    unless `strict`.
    """

    serializer_class = UploadSerializer
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        request=UploadSerializer,
        responses={
            202: JobSerializer,
            400: REFUSAL,
            409: REFUSAL,
        },
    )
    def create(self, request, challenge_slug=None):
        challenge = self.get_challenge()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        system = None
        if data.get("system"):
            system = System.objects.filter(challenge=challenge, name=data["system"]).first()
            if system is None:
                raise Refused(f"no system named '{data['system']}' in this challenge")
        job = services.start_import(
            challenge,
            data["file"],
            role=data["role"],
            system=system,
            convert=data["convert"],
            strict=data["strict"],
            user=request.user,
        )
        job.refresh_from_db()
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
