"""The teams' API, for a team's CI: submit a version, list the team's submissions, read one.

A member sees their own team's submissions only (another team's is a 404); the challenge's
organizers read all of them. Refusals come in the API's one error format (the services raise
`Refused`; foley_platform/api_errors.py answers it).
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.exceptions import PermissionDenied
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from . import services
from .access import IsTeamMemberOrOrganizer
from .models import Submission
from .serializers import SubmissionSerializer, SubmitSerializer


class SubmissionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = SubmissionSerializer
    permission_classes = [IsTeamMemberOrOrganizer]
    authentication_classes = [SessionAuthentication, TokenAuthentication]
    parser_classes = [MultiPartParser, FormParser]
    lookup_value_regex = r"\d+"

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema's look at the viewset
            return Submission.objects.none()
        found = Submission.objects.filter(challenge=self.challenge).select_related(
            "system", "track", "team", "job"
        )
        if self.team is not None:
            return found.filter(team=self.team)
        return found

    def get_object(self) -> Submission:
        found = self.get_queryset().filter(pk=self.kwargs["pk"]).first()
        if found is None:
            raise Http404("No such submission.")
        return services.settle(found)

    @extend_schema(request=SubmitSerializer, responses={201: SubmissionSerializer})
    def create(self, request, *args, **kwargs) -> Response:
        if self.team is None:
            raise PermissionDenied("Submissions come from the members of a team.")
        form = SubmitSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = dict(form.validated_data)
        archive, audio = data.pop("archive"), data.pop("audio", None)
        submission = services.submit(
            self.team, request.user, services.Metadata(**data), archive, audio
        )
        submission.refresh_from_db()
        return Response(SubmissionSerializer(submission).data, status=status.HTTP_201_CREATED)
