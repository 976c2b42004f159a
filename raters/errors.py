"""The one error the listening test refuses requests with."""

from __future__ import annotations

from stimuli.errors import Refused


class ListeningError(Refused):
    """A request the listening test refuses; `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message, status=status)
