"""An upload checked by a real Celery worker process over Redis, on PostgreSQL."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from stimuli.models import Clip, Job
from stimuli.services import create_challenge
from stimuli.uploads.services import start_import
from tests.conftest import wait_for_job
from tests.factories import make_wav, make_zip, reference_set

pytestmark = [pytest.mark.integration]


def test_worker_imports_an_upload_and_rejects_a_bad_one(celery_worker, tmp_path, media_root):
    challenge = create_challenge(name="Integration", slug="integration")
    good = make_zip(tmp_path / "good.zip", reference_set(["rain", "footstep"], 2)).read_bytes()
    job = start_import(challenge, SimpleUploadedFile("good.zip", good), role="evaluation")
    assert Job.objects.get(pk=job.pk).state in {"queued", "running", "succeeded"}
    job = wait_for_job(job.pk)
    assert job.state == Job.State.SUCCEEDED, (job.error, celery_worker.log())
    assert job.result["created_clips"] == 4
    assert Clip.objects.filter(challenge=challenge, role="evaluation").count() == 4

    bad_files = {"rain/x.wav": make_wav(seed=50), "rain/y.wav": make_wav(sample_rate=16000)}
    bad = make_zip(tmp_path / "bad.zip", bad_files).read_bytes()
    job = wait_for_job(
        start_import(challenge, SimpleUploadedFile("bad.zip", bad), role="development").pk
    )
    assert job.state == Job.State.FAILED
    assert job.result["files"][1]["errors"] == ["sample rate is 16,000 Hz; expected 22,050 Hz"]
    assert Clip.objects.filter(challenge=challenge, role="development").count() == 0
    assert not list((media_root / "staging").glob("*"))
