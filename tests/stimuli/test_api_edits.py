"""Editing and deleting through the REST API: bad values get a 400, edits that stored data does
not allow get a 409, and nothing is half-changed."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from raters.job_kinds import PREPARE_LISTENING
from scoring.job_kinds import PUBLISH
from stimuli.models import Challenge, Clip, Job, Team
from stimuli.services import create_system, create_team
from tests.factories import reference_set

pytestmark = pytest.mark.django_db


def store_clips(api_client, challenge) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in reference_set(["rain"], 1).items():
            archive.writestr(name, data)
    upload = SimpleUploadedFile("set.zip", buffer.getvalue(), content_type="application/zip")
    response = api_client.post(
        f"/api/challenges/{challenge.slug}/uploads/",
        {"role": "development", "file": upload},
        format="multipart",
    )
    assert response.status_code == 202 and Clip.objects.count() == 1


@pytest.mark.parametrize(
    "field, value", [("sample_rate", 5), ("bit_depth", 8), ("channels", 3), ("clip_duration_s", 0)]
)
def test_patching_an_impossible_clip_spec_is_a_400(api_client, challenge, field, value):
    before = Challenge.objects.filter(pk=challenge.pk).values().get()
    response = api_client.patch(f"/api/challenges/{challenge.slug}/", {field: value}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert Challenge.objects.filter(pk=challenge.pk).values().get() == before


@pytest.mark.parametrize("phase", ["setup", "listening", "published"])
def test_the_phase_cannot_be_written_through_the_api(api_client, challenge, phase):
    Challenge.objects.filter(pk=challenge.pk).update(phase=Challenge.Phase.PUBLISHED)
    url = f"/api/challenges/{challenge.slug}/"
    response = api_client.patch(url, {"phase": phase}, format="json")
    assert response.status_code == 400 and "phase" in response.json()
    assert Challenge.objects.get(pk=challenge.pk).phase == Challenge.Phase.PUBLISHED
    created = api_client.post(
        "/api/challenges/", {"slug": "new", "name": "New", "phase": "published"}, format="json"
    )
    assert created.status_code == 400 and not Challenge.objects.filter(slug="new").exists()


def test_the_clip_spec_is_fixed_once_clips_are_stored(api_client, challenge):
    url = f"/api/challenges/{challenge.slug}/"
    assert api_client.patch(url, {"sample_rate": 44_100}, format="json").status_code == 200
    assert api_client.patch(url, {"sample_rate": 22_050}, format="json").status_code == 200
    store_clips(api_client, challenge)
    for change in ({"sample_rate": 44_100}, {"clip_duration_s": 2.0}, {"bit_depth": 24}):
        response = api_client.patch(url, change, format="json")
        assert response.status_code == 409, response.content
        assert "were imported under it" in response.json()["detail"]
    challenge.refresh_from_db()
    assert (challenge.sample_rate, challenge.clip_duration_s, challenge.bit_depth) == (
        22_050,
        4.0,
        16,
    )
    # Other fields, and the spec's current values, can still be sent.
    response = api_client.patch(url, {"name": "Renamed", "sample_rate": 22_050}, format="json")
    assert response.status_code == 200 and response.json()["name"] == "Renamed"


def test_renaming_a_team_to_a_taken_name_is_a_400(api_client, challenge):
    create_team(challenge, name="Lab")
    other = create_team(challenge, name="Studio")
    url = f"/api/challenges/{challenge.slug}/teams/{other.pk}/"
    response = api_client.patch(url, {"name": "Lab"}, format="json")
    assert response.status_code == 400 and "already exists" in response.json()["name"][0]
    assert Team.objects.get(pk=other.pk).name == "Studio"
    assert api_client.patch(url, {"name": "Studio", "affiliation": "U"}).status_code == 200


def test_deleting_a_challenge_with_systems_is_a_409(api_client, challenge):
    team = create_team(challenge, name="Lab")
    create_system(team=team, track=challenge.tracks.first(), name="Lab_1")
    response = api_client.delete(f"/api/challenges/{challenge.slug}/")
    assert response.status_code == 409, response.content
    assert "systems" in response.json()["detail"]
    assert Challenge.objects.filter(pk=challenge.pk).exists()
    assert challenge.systems.count() == 1 and challenge.tracks.count() == 2


def test_retrying_a_job_without_a_task_leaves_it_failed(api_client, challenge):
    job = Job.objects.create(
        challenge=challenge, kind="retired_kind", state=Job.State.FAILED, params={}
    )
    response = api_client.post(f"/api/challenges/{challenge.slug}/jobs/{job.pk}/retry/")
    assert response.status_code == 400 and "No task is known" in response.json()["detail"]
    job.refresh_from_db()
    assert job.state == Job.State.FAILED  # not stranded in the queue with nothing to run it


@pytest.mark.parametrize("kind", [PUBLISH, PREPARE_LISTENING])
def test_publish_and_prepare_jobs_are_retried_by_the_api_as_the_page_allows(
    api_client, challenge, kind
):
    """They used to answer "No task is known": their tasks live in raters and scoring."""
    job = Job.objects.create(
        challenge=challenge, kind=kind, state=Job.State.FAILED, attempts=1, error="lost"
    )
    response = api_client.post(f"/api/challenges/{challenge.slug}/jobs/{job.pk}/retry/")
    assert response.status_code == 200, response.content
    job.refresh_from_db()
    # Without a broker the task ran at once: the job was claimed again by its own task.
    assert job.attempts == 2 and job.state in (Job.State.SUCCEEDED, Job.State.FAILED)
    assert job.error != "lost"


def test_a_running_job_is_not_retried(api_client, challenge):
    job = Job.objects.create(challenge=challenge, kind=PUBLISH, state=Job.State.RUNNING)
    response = api_client.post(f"/api/challenges/{challenge.slug}/jobs/{job.pk}/retry/")
    assert response.status_code == 400
    assert "only a failed job can be retried" in response.json()["detail"]
    job.refresh_from_db()
    assert job.state == Job.State.RUNNING and job.attempts == 0


def test_the_admin_cannot_move_the_phase_or_change_a_used_clip_spec(
    admin_client, api_client, challenge
):
    url = f"/admin/stimuli/challenge/{challenge.pk}/change/"
    page = admin_client.get(url).content.decode()
    assert 'name="phase"' not in page and 'name="sample_rate"' in page
    store_clips(api_client, challenge)
    page = admin_client.get(url).content.decode()
    assert 'name="sample_rate"' not in page and 'name="clip_duration_s"' not in page
