"""Uploads as a job: stage the zip and check its structure at once, then check and store every
file on a worker. Shared by the upload page, the API and the tests."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.db import transaction

from stimuli.job_kinds import IMPORT

from ..errors import Refused
from ..jobs import Failed, JobProgress, create_job, enqueue, run_job
from ..models import Challenge, Job, System
from .imports import ImportRequestError, check_request, check_structure, import_clips


class UploadRejected(Refused):
    """The upload failed the structural checks (one problem per file or rule); nothing was stored."""


@contextmanager
def _as_local_file(name: str):
    """A local path for a stored file: the file itself on disk storage, else a temporary copy."""
    try:
        local = Path(default_storage.path(name))
    except NotImplementedError:  # storage without local files
        local = None
    # Yielded outside the try: what the caller's block raises must reach the caller untouched.
    if local is not None:
        yield local
        return
    with tempfile.NamedTemporaryFile(suffix=Path(name).suffix) as tmp:
        with default_storage.open(name, "rb") as handle:
            shutil.copyfileobj(handle, tmp)
        tmp.flush()
        yield Path(tmp.name)


def start_import(
    challenge: Challenge,
    upload: File,
    *,
    role: str,
    system: System | None = None,
    convert: bool = False,
    strict: bool = False,
    user: AbstractBaseUser | None = None,
) -> Job:
    """Stage an uploaded zip, check its structure at once, and queue the audio checks.

    An upload that cannot be read safely (not a zip, hostile names, a bomb) or holds no audio
    raises UploadRejected before anything is kept; where files sit (unknown folders) is
    reported by the job with the audio checks; a good one becomes an import job. A challenge whose
    listening test is open or whose results are published takes no upload (ImportPhaseError).
    """
    check_request(challenge, role, system)
    limit = settings.FOLEY_UPLOAD_MAX_BYTES
    if upload.size is not None and upload.size > limit:
        raise UploadRejected([f"the upload is {upload.size:,} bytes; the limit is {limit:,}"])
    staging_name = default_storage.save(f"staging/{uuid.uuid4().hex}.zip", upload)
    try:
        with _as_local_file(staging_name) as path:
            problems = check_structure(challenge, path, strict=strict)
    except BaseException:
        default_storage.delete(staging_name)
        raise
    if problems:
        default_storage.delete(staging_name)
        raise UploadRejected(problems)

    with transaction.atomic():
        job = create_job(
            IMPORT,
            challenge=challenge,
            params={
                "staging": staging_name,
                "filename": os.path.basename(getattr(upload, "name", "") or "upload.zip"),
                "role": role,
                "system_id": system.pk if system else None,
                "convert": convert,
                "strict": strict,
            },
            by=user,
        )
        enqueue(job)
    return job


def run_import_job(job_id: int) -> Job:
    """Worker side of an upload: check every file and store all of them or none."""

    def work(job: Job, progress: JobProgress) -> dict:
        params = job.params
        staging = params["staging"]
        if not default_storage.exists(staging):
            return Failed("The uploaded file is no longer available.")
        try:
            system = None
            if params.get("system_id"):
                system = System.objects.filter(pk=params["system_id"]).first()
                if system is None:
                    return Failed("The system of this upload was deleted.")
            with _as_local_file(staging) as path:
                report = import_clips(
                    job.challenge,
                    path,
                    role=params["role"],
                    system=system,
                    convert=params.get("convert", False),
                    strict=params.get("strict", False),
                    job=job,
                    progress=progress,
                )
        except ImportRequestError as exc:
            return Failed(str(exc))
        finally:
            default_storage.delete(staging)
        result = report.to_dict()
        return result if report.accepted else Failed(report.summary(), result)

    return run_job(job_id, work)
