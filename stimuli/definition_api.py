"""REST API of a challenge's definition file (challenge.yaml): read it, apply a changed one with
its diff (or only check it), create a challenge from one, and the file's JSON Schema.

The same steps as the challenge page's and `manage.py challenge` (stimuli/definition_files.py,
stimuli/definition/); refusals are answered by the API's one handler, every problem at once.
"""

from __future__ import annotations

import json

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from . import definition, definition_files
from .api import REFUSAL
from .definition import Applied, DefinitionError
from .models import Challenge
from .parsers import JSONParser, TextParser, YAMLParser
from .permissions import may_create_challenges, readable_challenges


class YAMLRenderer(BaseRenderer):
    """The definition file as it is: YAML text."""

    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None) -> bytes:
        if isinstance(data, str):
            return data.encode()
        return json.dumps(data).encode()  # JSON is YAML (refusals are answered as JSON anyway)


DEFINITION = inline_serializer(
    "Definition",
    {
        "definition": serializers.CharField(help_text="The file's text (YAML)."),
        "sha256": serializers.CharField(help_text="Of the text, as UTF-8."),
    },
)
DEFINITION_IN = inline_serializer(
    "DefinitionIn", {"definition": serializers.CharField(help_text="The file's text (YAML).")}
)
APPLIED = inline_serializer(
    "DefinitionApplied",
    {
        "created": serializers.BooleanField(help_text="The file created its challenge."),
        "dry_run": serializers.BooleanField(help_text="Only checked: nothing was changed."),
        "changes": serializers.ListField(
            child=serializers.CharField(),
            help_text="One line per key that changes: `~ path: old -> new`, `+ path: value`, "
            "`- path: value`.",
        ),
        "diff": serializers.CharField(help_text="The changes as text; `no changes` when none."),
    },
)
DRY_RUN = OpenApiParameter(
    "dry_run", bool, description="1: check the file and report its changes; change nothing."
)
BODY = {
    "application/yaml": OpenApiTypes.STR,
    "text/plain": OpenApiTypes.STR,
    "application/json": DEFINITION_IN,
}
# 400: the file, every problem with its key's path and line; 409: what the challenge's state
# forbids changing.
REFUSALS = {400: REFUSAL, 409: REFUSAL}


def _posted(request) -> str:
    """The file from the body: YAML or plain text as it is, or JSON's `definition`."""
    data = request.data
    if isinstance(data, dict) and "definition" in data:
        data = data["definition"]
        if not isinstance(data, str):
            raise DefinitionError(["definition: the file's text (a string) needed"])
    elif not isinstance(data, bytes | str) or not data:
        raise DefinitionError(
            [
                "(the file): none sent; send the file as the body (Content-Type "
                'application/yaml), or JSON {"definition": text}'
            ]
        )
    return definition_files.text_of(data)


def _dry_run(request) -> bool:
    return request.query_params.get("dry_run", "").lower() in ("1", "true", "yes", "on")


def _applied(applied: Applied) -> dict:
    return {
        "created": applied.created,
        "dry_run": applied.dry_run,
        "changes": [str(change) for change in applied.changes],
        "diff": applied.diff,
    }


class ChallengeDefinitionView(APIView):
    """The challenge's definition file: GET it, PUT a changed one (its organizers)."""

    parser_classes = [YAMLParser, TextParser, JSONParser]

    def get_renderers(self):
        # The file itself by default (`?format=json` or Accept: application/json for JSON);
        # what PUT answers is JSON.
        if getattr(getattr(self, "request", None), "method", "GET") in ("GET", "HEAD"):
            return [YAMLRenderer(), JSONRenderer()]
        return [JSONRenderer()]

    def finalize_response(self, request, response, *args, **kwargs):
        # A refusal is JSON, as everywhere in the API, even where the file was asked for.
        if getattr(response, "exception", False) and isinstance(
            getattr(request, "accepted_renderer", None), YAMLRenderer
        ):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)

    def _challenge(self, slug: str) -> Challenge:
        return get_object_or_404(readable_challenges(self.request.user), slug=slug)

    @extend_schema(
        summary="The challenge's definition file",
        description="YAML by default; `?format=json` or `Accept: application/json` answers the "
        "text and its sha256 (also the ETag).",
        parameters=[
            OpenApiParameter("format", str, enum=["yaml", "json"], description="json for JSON")
        ],
        responses={
            (200, "application/yaml"): OpenApiTypes.STR,
            (200, "application/json"): DEFINITION,
        },
    )
    def get(self, request, challenge_slug: str):
        text = definition.export(self._challenge(challenge_slug))
        digest = definition.sha256(text)
        headers = {"ETag": f'"{digest}"'}
        if getattr(request.accepted_renderer, "format", "") == "yaml":
            return Response(text, headers=headers)
        return Response({"definition": text, "sha256": digest}, headers=headers)

    @extend_schema(
        summary="Apply a changed definition file",
        description="The file's `slug` must be this challenge's. Every problem of the file is "
        "named at once with its key's path and line (400), every change the challenge's state "
        "forbids (409); nothing is changed then. `?dry_run=1` only reports the changes.",
        request=BODY,
        parameters=[DRY_RUN],
        responses={200: APPLIED, **REFUSALS},
    )
    def put(self, request, challenge_slug: str):
        challenge = self._challenge(challenge_slug)
        text = _posted(request)
        applied = definition_files.apply_to(
            challenge, text, by=request.user, dry_run=_dry_run(request)
        )
        return Response(_applied(applied))


class NewChallengeDefinitionView(APIView):
    """A new challenge from a definition file; its creator becomes its owner."""

    parser_classes = [YAMLParser, TextParser, JSONParser]
    renderer_classes = [JSONRenderer]

    def check_permissions(self, request):
        super().check_permissions(request)
        if not may_create_challenges(request.user):  # before the body is read
            self.permission_denied(request, "Only the organizers group can create challenges.")

    @extend_schema(
        summary="Create a challenge from a definition file",
        description="For those who may create challenges; the file's slug must be free (a "
        "challenge's own file is PUT at its address). `?dry_run=1` only reports what would be "
        "created.",
        request=BODY,
        parameters=[DRY_RUN],
        responses={201: APPLIED, 200: APPLIED, **REFUSALS},
    )
    def post(self, request):
        text = _posted(request)
        applied = definition_files.create(text, by=request.user, dry_run=_dry_run(request))
        return Response(_applied(applied), status=200 if applied.dry_run else 201)


class ChallengeSchemaView(APIView):
    """The definition file's JSON Schema: public, as the manual's page of the format is."""

    permission_classes = [AllowAny]
    authentication_classes: list = []
    renderer_classes = [JSONRenderer]

    @extend_schema(summary="The definition file's JSON Schema", responses=OpenApiTypes.OBJECT)
    def get(self, request):
        return Response(definition.schema())
