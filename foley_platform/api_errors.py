"""One answer to every refusal of the REST API, so that no viewset translates errors by hand."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from stimuli.errors import Refused


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """A service's refusal as `{"detail": message, "errors": [problem, ...]}` with its status.

    Both keys: `detail` is DRF's own key for one message, `errors` lists every problem of a
    request that had several (an upload's files, say). The model's own checks (Django's
    ValidationError) are 400s like a serializer's.
    """
    if isinstance(exc, Refused):
        return Response({"detail": exc.message, "errors": exc.problems}, status=exc.status)
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        exc = ValidationError(detail)
    return drf_exception_handler(exc, context)
