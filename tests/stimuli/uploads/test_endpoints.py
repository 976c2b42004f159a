"""Uploads through the organizer page, the REST API and the command line: one code path, one set
of rules, and only organizers may use them."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework.test import APIClient

from stimuli.models import AudioFile, Challenge, Clip, Job
from tests.factories import make_wav, make_zip, reference_set

pytestmark = pytest.mark.django_db


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def upload_file(files: dict[str, bytes], name: str = "set.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, zip_bytes(files), content_type="application/zip")


def staged(media_root) -> list:
    return list((media_root / "staging").glob("*")) if (media_root / "staging").exists() else []


# --- organizer page ---------------------------------------------------------------------------


def test_page_upload_runs_the_checks_and_shows_the_job(organizer_client, challenge, media_root):
    url = reverse("stimuli:upload", args=[challenge.slug])
    response = organizer_client.post(
        url,
        {"role": "development", "file": upload_file(reference_set(["rain", "gunshot"], 2))},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200
    job = Job.objects.get()
    assert job.state == Job.State.SUCCEEDED  # in-process tasks: already done
    assert job.result["created_clips"] == 4
    assert f'id="job-{job.pk}"' in response.content.decode()
    assert "Imported 4 new clips from 4 files." in response.content.decode()
    assert Clip.objects.filter(role="development").count() == 4
    assert staged(media_root) == []


def test_page_upload_of_a_hostile_zip_shows_errors_and_keeps_nothing(
    organizer_client, challenge, media_root
):
    url = reverse("stimuli:upload", args=[challenge.slug])
    response = organizer_client.post(
        url,
        {"role": "development", "file": upload_file({"../evil/x.wav": make_wav()})},
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert "Upload rejected; nothing was stored." in body
    assert "../evil/x.wav: path traversal (&#x27;..&#x27;) is not allowed" in body
    assert Job.objects.count() == 0 and Clip.objects.count() == 0
    assert staged(media_root) == []


def test_page_upload_with_a_bad_file_fails_the_job_with_a_per_file_report(
    organizer_client, challenge, media_root
):
    files = {**reference_set(["rain"], 2), "rain/loud.wav": make_wav(channels=2)}
    response = organizer_client.post(
        reverse("stimuli:upload", args=[challenge.slug]),
        {"role": "evaluation", "file": upload_file(files)},
        HTTP_HX_REQUEST="true",
    )
    job = Job.objects.get()
    assert job.state == Job.State.FAILED
    assert job.error == "Upload rejected: 1 of 3 files are invalid. Nothing was stored."
    body = response.content.decode()
    assert "rain/loud.wav" in body and "has 2 channels; expected mono" in body
    assert Clip.objects.count() == 0 and AudioFile.objects.count() == 0
    assert [p for p in media_root.rglob("*") if p.is_file()] == []


def test_job_partial_polls_until_finished(organizer_client, challenge):
    job = Job.objects.create(challenge=challenge, kind="import", total=10, done=3)
    body = organizer_client.get(reverse("stimuli:job", args=[job.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in body and 'value="30"' in body
    Job.objects.filter(pk=job.pk).update(state=Job.State.SUCCEEDED, done=10)
    body = organizer_client.get(reverse("stimuli:job", args=[job.pk])).content.decode()
    assert "hx-trigger" not in body


def test_organizer_creates_challenge_team_and_system_from_the_pages(organizer_client):
    response = organizer_client.post(
        reverse("stimuli:challenges"),
        {"name": "Foley 2026", "slug": "foley-2026", "clip_duration_s": 4.0,
         "sample_rate": 22050, "channels": 1, "bit_depth": 16},
    )  # fmt: skip
    assert response.status_code == 302
    challenge = Challenge.objects.get(slug="foley-2026")
    assert challenge.categories.count() == 7 and challenge.tracks.count() == 2
    organizer_client.post(reverse("stimuli:add_team", args=["foley-2026"]), {"name": "Lab"})
    team = challenge.teams.get()
    response = organizer_client.post(
        reverse("stimuli:add_system", args=["foley-2026"]),
        {"name": "Lab_1", "team": team.pk, "track": challenge.tracks.get(code="B").pk,
         "kind": "audio"},
    )  # fmt: skip
    assert "Lab_1" in response.content.decode()
    system = challenge.systems.get()
    assert system.track.code == "B" and len(system.public_id) == 9
    page = organizer_client.get(reverse("stimuli:challenge", args=["foley-2026"]))
    assert system.public_id in page.content.decode()


def test_organizer_can_listen_to_stored_clips(organizer_client, challenge, tmp_path):
    from stimuli.uploads.imports import import_clips

    import_clips(
        challenge, make_zip(tmp_path / "u.zip", {"rain/a.wav": make_wav()}), role="development"
    )
    audio = AudioFile.objects.get()
    response = organizer_client.get(reverse("stimuli:audio", args=[audio.sha256]))
    assert response.status_code == 200 and response["Content-Type"] == "audio/wav"
    assert b"".join(response.streaming_content)[:4] == b"RIFF"
    listing = organizer_client.get(
        reverse("stimuli:clips", args=[challenge.slug]) + "?role=development"
    )
    assert audio.sha256[:12] in listing.content.decode()


# --- REST API ---------------------------------------------------------------------------------


def test_api_upload_returns_the_job(api_client, challenge):
    url = f"/api/challenges/{challenge.slug}/uploads/"
    response = api_client.post(
        url, {"role": "development", "file": upload_file(reference_set(["keyboard"], 3))},
        format="multipart",
    )  # fmt: skip
    assert response.status_code == 202, response.content
    job = response.json()
    assert job["state"] == "succeeded" and job["result"]["created_clips"] == 3
    detail = api_client.get(f"/api/challenges/{challenge.slug}/jobs/{job['id']}/").json()
    assert detail["result"]["summary"] == "Imported 3 new clips from 3 files."
    clips = api_client.get(f"/api/challenges/{challenge.slug}/clips/?category=keyboard").json()
    assert clips["count"] == 3
    assert {c["duration_s"] for c in clips["results"]} == {4.0}


def test_api_rejects_hostile_upload_with_400_and_stores_nothing(api_client, challenge, media_root):
    response = api_client.post(
        f"/api/challenges/{challenge.slug}/uploads/",
        {"role": "development", "file": upload_file({"/abs/rain.wav": make_wav()})},
        format="multipart",
    )
    assert response.status_code == 400
    message = "/abs/rain.wav: absolute path is not allowed"
    assert response.json() == {"detail": message, "errors": [message]}
    assert Job.objects.count() == 0 and Clip.objects.count() == 0 and staged(media_root) == []


def crafted_zip(kind: str) -> bytes:
    """A zip whose second member is crafted: a name, a method or data the reader chokes on."""
    data = bytearray(zip_bytes({"rain/ok.wav": make_wav(), "rain/é.wav": make_wav(seed=1)}))
    if kind == "name":
        return bytes(data).replace("é".encode(), b"\xff\xfe")  # marked UTF-8, not UTF-8
    local = data.find("rain/é.wav".encode()) - 30
    central = data.rfind("rain/é.wav".encode()) - 46
    if kind == "method":
        data[local + 8 : local + 10] = data[central + 10 : central + 12] = b"\x63\x00"  # 99
    else:  # the first deflate block names block type 3, which does not exist
        data[local + 30 + len("rain/é.wav".encode())] = 0xFF
    return bytes(data)


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (
            "name",
            "the upload is not a readable zip archive (a file name is marked as UTF-8 but is "
            "not valid UTF-8)",
        ),
        (
            "method",
            "rain/é.wav: compression method 99 is not supported; use stored, deflate, bzip2, lzma",
        ),
    ],
)
def test_api_rejects_a_crafted_zip_with_400_and_stores_nothing(
    api_client, challenge, media_root, kind, error
):
    upload = SimpleUploadedFile("set.zip", crafted_zip(kind), content_type="application/zip")
    response = api_client.post(
        f"/api/challenges/{challenge.slug}/uploads/",
        {"role": "development", "file": upload},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json() == {"detail": error, "errors": [error]}
    assert Job.objects.count() == 0 and Clip.objects.count() == 0 and staged(media_root) == []


def test_api_upload_with_corrupt_member_data_reports_that_file(api_client, challenge, media_root):
    upload = SimpleUploadedFile("set.zip", crafted_zip("data"), content_type="application/zip")
    response = api_client.post(
        f"/api/challenges/{challenge.slug}/uploads/",
        {"role": "development", "file": upload},
        format="multipart",
    )
    assert response.status_code == 202
    job = Job.objects.get()
    assert job.state == Job.State.FAILED
    assert job.error == "Upload rejected: 1 of 2 files are invalid. Nothing was stored."
    assert [(f["path"], f["errors"]) for f in job.result["files"]] == [
        ("rain/ok.wav", []),
        (
            "rain/é.wav",
            ["corrupt archive entry (Error -3 while decompressing data: invalid block type)"],
        ),
    ]
    assert Clip.objects.count() == 0 and [p for p in media_root.rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("phase", ["listening", "published"])
def test_uploads_conflict_with_an_open_listening_test_or_published_results(
    api_client, organizer_client, challenge, media_root, phase
):
    Challenge.objects.filter(pk=challenge.pk).update(phase=phase)
    message = {
        "listening": "the listening test is open: its stimuli are fixed, so no clips can be added",
        "published": "the results of this challenge are published; nothing can change",
    }[phase]
    response = api_client.post(
        f"/api/challenges/{challenge.slug}/uploads/",
        {"role": "development", "file": upload_file(reference_set(["rain"], 1))},
        format="multipart",
    )
    assert response.status_code == 409
    assert response.json() == {"detail": message, "errors": [message]}
    response = organizer_client.post(
        reverse("stimuli:upload", args=[challenge.slug]),
        {"role": "development", "file": upload_file(reference_set(["rain"], 1))},
    )
    assert response.status_code == 409
    assert message in response.content.decode()
    assert Job.objects.count() == 0 and Clip.objects.count() == 0 and staged(media_root) == []


def test_api_system_upload_checks_the_system(api_client, challenge):
    url = f"/api/challenges/{challenge.slug}/uploads/"
    files = reference_set(["rain"], 1)
    response = api_client.post(
        url, {"role": "system", "system": "Nope", "file": upload_file(files)}, format="multipart"
    )
    message = "no system named 'Nope' in this challenge"
    assert response.json() == {"detail": message, "errors": [message]}
    response = api_client.post(
        url, {"role": "system", "file": upload_file(files)}, format="multipart"
    )
    message = "system output needs a system"
    assert response.json() == {"detail": message, "errors": [message]}
    api_client.post(f"/api/challenges/{challenge.slug}/teams/", {"name": "Lab"})
    created = api_client.post(
        f"/api/challenges/{challenge.slug}/systems/", {"name": "Lab_1", "team": "Lab", "track": "A"}
    )
    assert created.status_code == 201, created.content
    response = api_client.post(
        url, {"role": "system", "system": "Lab_1", "file": upload_file(files)}, format="multipart"
    )
    assert response.status_code == 202
    assert Clip.objects.get().system.name == "Lab_1"


def test_api_creates_a_challenge_with_default_categories(api_client):
    response = api_client.post("/api/challenges/", {"name": "New", "slug": "new"})
    assert response.status_code == 201
    assert [c["slug"] for c in response.json()["categories"]][:2] == ["dog_bark", "footstep"]
    duplicate = api_client.post("/api/challenges/", {"name": "New", "slug": "new"})
    assert duplicate.status_code == 400


def test_openapi_schema_is_served(organizer_client):
    response = organizer_client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/challenges/{challenge_slug}/uploads/" in response.content


# --- who may upload ---------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["anonymous", "rater"])
def test_api_refuses_non_organizers_with_403(who, challenge, rater_user):
    client = APIClient()
    if who == "rater":
        from rest_framework.authtoken.models import Token

        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=rater_user).key}")
    url = f"/api/challenges/{challenge.slug}/uploads/"
    response = client.post(
        url,
        {"role": "development", "file": upload_file(reference_set(["rain"], 1))},
        format="multipart",
    )
    assert response.status_code == 403
    assert client.get("/api/challenges/").status_code == 403
    assert client.post("/api/challenges/", {"name": "X", "slug": "x"}).status_code == 403
    assert client.delete(f"/api/challenges/{challenge.slug}/").status_code == 403
    assert Clip.objects.count() == 0 and Challenge.objects.count() == 1


@pytest.mark.parametrize("who", ["anonymous", "rater"])
def test_pages_redirect_non_organizers_to_login(who, client, challenge, rater_user):
    if who == "rater":
        client.force_login(rater_user)
    for url in [
        reverse("stimuli:challenges"),
        reverse("stimuli:challenge", args=[challenge.slug]),
        reverse("stimuli:clips", args=[challenge.slug]),
    ]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    response = client.post(
        reverse("stimuli:upload", args=[challenge.slug]),
        {"role": "development", "file": upload_file(reference_set(["rain"], 1))},
    )
    assert response.status_code == 302
    assert Clip.objects.count() == 0 and Job.objects.count() == 0


# --- command line -----------------------------------------------------------------------------


def test_cli_import_prints_a_per_file_report(challenge, tmp_path, capsys):
    path = make_zip(tmp_path / "dev.zip", reference_set(["rain"], 2))
    call_command("import_clips", challenge.slug, str(path), "--role", "development")
    out = capsys.readouterr().out
    assert "OK     rain/0.wav" in out and "Imported 2 new clips from 2 files." in out
    assert Clip.objects.count() == 2


def test_cli_import_fails_on_a_bad_file_and_stores_nothing(challenge, tmp_path, capsys):
    path = make_zip(tmp_path / "dev.zip", {"rain/a.wav": make_wav(seconds=2.0)})
    with pytest.raises(CommandError, match="Upload rejected: 1 of 1 files are invalid"):
        call_command("import_clips", challenge.slug, str(path), "--role", "evaluation")
    out = capsys.readouterr().out
    assert "ERROR  rain/a.wav: duration is 2.000 s (44,100 samples)" in out
    assert Clip.objects.count() == 0


def test_cli_import_json_report(challenge, tmp_path, capsys):
    path = make_zip(tmp_path / "dev.zip", reference_set(["rain"], 1))
    call_command("import_clips", challenge.slug, str(path), "--role", "development", "--json")
    report = json.loads(capsys.readouterr().out)
    assert report["accepted"] is True and report["files"][0]["status"] == "stored"


def test_cli_import_refuses_a_published_challenge(challenge, tmp_path):
    Challenge.objects.filter(pk=challenge.pk).update(phase="published")
    path = make_zip(tmp_path / "dev.zip", reference_set(["rain"], 1))
    with pytest.raises(CommandError, match="results of this challenge are published"):
        call_command("import_clips", challenge.slug, str(path), "--role", "development")
    assert Clip.objects.count() == 0


# --- every organizer page of a challenge is under /organize/<challenge>/ ------------------------


@pytest.mark.parametrize("slug", ["objective", "generators", "listening", "text-prompts", "jobs"])
def test_a_challenge_named_like_a_stage_has_every_page_of_its_own(slug, organizer_client):
    from stimuli.services import create_challenge

    other = create_challenge(name="Other", slug="other")
    challenge = create_challenge(name="Stage", slug=slug)
    assert organizer_client.get(f"/organize/{slug}/").context["challenge"] == challenge
    for stage in ("objective", "generators", "listen", "text-prompts"):
        page = organizer_client.get(f"/organize/{slug}/{stage}/")
        assert page.status_code == 200 and page.context["challenge"] == challenge, stage
        # ... and another challenge's stage pages are that challenge's.
        assert organizer_client.get(f"/organize/other/{stage}/").context["challenge"] == other


def test_the_earlier_stage_first_addresses_redirect(organizer_client):
    from stimuli.services import create_challenge

    create_challenge(name="Moved", slug="moved")
    page = organizer_client.get("/organize/listening/moved/progress/?x=1")
    assert page.status_code == 301 and page["Location"] == "/organize/moved/listen/progress/?x=1"
    assert organizer_client.get(page["Location"]).status_code == 200
    posted = organizer_client.post("/organize/objective/moved/settings/", {})
    assert posted.status_code == 308
    assert posted["Location"] == "/organize/moved/objective/settings/"


def test_the_listening_tests_earlier_addresses_redirect(organizer_client):
    """The listening test's organizer page and API were at .../listening/; they share the
    raters' word now, and the earlier addresses (bookmarks, scripts) keep working."""
    from stimuli.services import create_challenge

    create_challenge(name="Moved", slug="moved")
    page = organizer_client.get("/organize/moved/listening/progress/?x=1")
    assert page.status_code == 301 and page["Location"] == "/organize/moved/listen/progress/?x=1"
    assert organizer_client.get(page["Location"]).status_code == 200
    posted = organizer_client.post("/organize/moved/listening/open/", {"open": "1"})
    assert posted.status_code == 308 and posted["Location"] == "/organize/moved/listen/open/"
    api = organizer_client.get("/api/listening/challenges/moved/progress/")
    assert api.status_code == 301
    assert api["Location"] == "/api/listen/challenges/moved/progress/"


def test_a_challenge_named_like_a_stage_prefix_in_part_keeps_its_pages(organizer_client):
    # "objective-2" is no stage: its clips page is its own.
    from stimuli.services import create_challenge

    challenge = create_challenge(name="Two", slug="objective-2")
    assert organizer_client.get(f"/organize/{challenge.slug}/clips/").status_code == 200
