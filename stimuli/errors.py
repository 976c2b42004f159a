"""The platform's refusals: one family of errors that services raise and the web answers.

A service refuses a request it cannot carry out by raising `Refused` (or a subclass named for its
stage) with a message that says why and what to do, and nothing stored half-way. `status` is the
HTTP status the refusal means: 400 for a request that cannot work, 409 (`Conflict`) for one that
is well formed but clashes with the state of the challenge. The REST API answers every refusal
through one exception handler (foley_platform/api_errors.py); pages show the message in their
own panel.
"""

from __future__ import annotations


class Refused(Exception):
    """A request the platform refuses; `problems` lists each reason when there are several."""

    status: int = 400

    def __init__(
        self,
        message: str | list[str],
        *,
        status: int | None = None,
        problems: list[str] | None = None,
    ):
        if isinstance(message, list):  # several problems, none more important than another
            problems, message = message, "; ".join(message)
        super().__init__(message)
        self.message = message
        self.problems = list(problems) if problems else [message]
        if status is not None:
            self.status = status


class Conflict(Refused):
    """Well formed, but the state of the challenge or of its jobs does not allow it now."""

    status = 409


def page_status(htmx: bool, refusal: Refused | None = None) -> int:
    """The status of a page that shows a refusal in its panel.

    htmx swaps only 2xx answers by default, so its requests get 200 and the panel shows the
    message; a plain form post gets the refusal's own status (400 for bad input).
    """
    if htmx:
        return 200
    return refusal.status if refusal is not None else 400
