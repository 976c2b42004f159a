"""The scoring app's kinds of job (the registry: stimuli/job_kinds.py)."""

from __future__ import annotations

from typing import TypedDict

from stimuli.job_kinds import declare


class PublishResult(TypedDict):
    snapshot: int  # the published snapshot's number


# A failed publication may run again, as the page's publish button may be pressed again.
PUBLISH = declare(
    "publish_results", "Publish results",
    task="scoring.tasks.publish_results", queue="cpu",
    run="scoring.services.run_publish_job", result=PublishResult,
)  # fmt: skip
