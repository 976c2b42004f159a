"""The raters' kinds of job (the registry: stimuli/job_kinds.py)."""

from __future__ import annotations

from typing import TypedDict

from stimuli.job_kinds import declare


class PrepareResult(TypedDict, total=False):
    """What `preparation.prepare` made: its counts, by what."""

    stimuli: int
    anchors_added: int
    trapping_sounds: int
    rendered: int
    diversity: int


# Preparing is idempotent: a failed preparation may run again whenever the page allows
# preparing, which is always.
PREPARE_LISTENING = declare(
    "prepare_listening", "Prepare the listening test",
    task="raters.tasks.prepare_listening_test", queue="cpu",
    run="raters.preparation.run_prepare_job", result=PrepareResult,
)  # fmt: skip
