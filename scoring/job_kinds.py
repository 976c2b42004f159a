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


class ReleaseResult(TypedDict):
    snapshot: int  # the released snapshot's number
    version: str  # the release's version, e.g. "1.0.0+snapshot.2"


# Making a release again makes the next version: nothing to undo before a retry.
RELEASE = declare(
    "data_release", "Make the data release",
    task="scoring.tasks.data_release", queue="cpu",
    run="scoring.release.run_release_job", result=ReleaseResult,
)  # fmt: skip
