"""Organizer page and REST API for generators (tasks run in-process here)."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from stimuli.generators import services as generators
from stimuli.job_kinds import GENERATE
from stimuli.models import Challenge, Generator, Job
from stimuli.services import create_challenge, create_system, create_team
from tests import TESTS_DIR

pytestmark = pytest.mark.sandbox

FIXTURE_DIR = TESTS_DIR / "generator_fixtures"


@pytest.fixture
def small(db):
    challenge = create_challenge(
        name="Web", slug="web", clip_duration_s=1.0, categories=[("rain", "Rain")]
    )
    team = create_team(challenge, name="Team")
    create_system(team=team, track=challenge.tracks.first(), name="Zipped")
    return challenge


def generator_zip(
    broken: bool = False,
    weights: bytes = b"\0" * 16,
    compression: int = zipfile.ZIP_STORED,
) -> bytes:
    body = (FIXTURE_DIR / "_common.py").read_text() + (
        "\n\ndef load_model(path):\n    return Model()\n\n"
        "def generate(model, category, n, seed):\n"
        + ("    return tones(model, category, n, seed)[:, :100]\n" if broken else
           "    return tones(model, category, n, seed)\n")
    )  # fmt: skip
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as zf:
        zf.writestr("zipgen/__init__.py", body)
        zf.writestr("zipgen/weights.bin", weights)
    return buffer.getvalue()


def upload(client, challenge, system, data: bytes, name="gen.zip"):
    url = reverse("generators:code", args=[challenge.slug, system.pk])
    return client.post(url, {"archive": SimpleUploadedFile(name, data)}, HTTP_HX_REQUEST="true")


def test_page_includes_the_generators_panel(organizer_client, small):
    page = organizer_client.get(reverse("stimuli:challenge", args=[small.slug]))
    assert reverse("generators:panel", args=[small.slug]) in page.content.decode()
    panel = organizer_client.get(reverse("generators:panel", args=[small.slug]))
    assert "Zipped" in panel.content.decode() and "Attach code" in panel.content.decode()


def test_upload_validate_generate_on_the_page(organizer_client, small):
    system = small.systems.get()
    response = upload(organizer_client, small, system, generator_zip())
    html = response.content.decode()
    assert response.status_code == 200
    generator = Generator.objects.get(system=system)
    assert generator.state == Generator.State.VALID, generator.report
    assert generator.module == "zipgen" and len(generator.archive_sha256) == 64
    assert 'data-state="valid"' in html and "Valid generator" in html

    url = reverse("generators:generate", args=[small.slug, system.pk])
    response = organizer_client.post(
        url, {"n_per_category": 3, "seed": 5, "batch_size": 2}, HTTP_HX_REQUEST="true"
    )
    job = Job.objects.get(kind=GENERATE)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert system.clips.count() == 3
    assert f'id="generation-job-{job.pk}"' in response.content.decode()
    assert "rain: clips 3-3 stored" in response.content.decode()  # the latest log lines, shown

    polled = organizer_client.get(reverse("generators:job", args=[small.slug, job.pk]))
    assert polled["HX-Trigger"] == "job-finished"
    assert 'data-state="succeeded"' in polled.content.decode()


def test_broken_archive_report_is_shown(organizer_client, small):
    system = small.systems.get()
    html = upload(organizer_client, small, system, generator_zip(broken=True)).content.decode()
    assert Generator.objects.get(system=system).state == Generator.State.INVALID
    assert "wrong_shape" in html and "expected [2, 22050]" in html
    assert "Generate</button>" not in html  # an invalid generator cannot be started


def test_not_an_archive_is_refused_and_nothing_stored(organizer_client, small, media_root):
    system = small.systems.get()
    html = upload(organizer_client, small, system, b"hello", "gen.zip").content.decode()
    assert "not a zip archive" in html
    assert not Generator.objects.exists()
    assert not (media_root / "generators").exists()


def test_failed_generation_is_retried_from_the_page(organizer_client, small):
    system = small.systems.get()
    organizer_client.post(
        reverse("generators:code", args=[small.slug, system.pk]),
        {"module": "tests.generator_fixtures.raises"},
    )
    Generator.objects.update(state=Generator.State.PENDING)  # past validation, to fail in the job
    organizer_client.post(reverse("generators:generate", args=[small.slug, system.pk]))
    job = Job.objects.get(kind=GENERATE)
    assert job.state == Job.State.FAILED and "KeyError" in job.error
    html = organizer_client.get(reverse("generators:panel", args=[small.slug])).content.decode()
    assert "Retry" in html and "raises.py" in html  # the log with the traceback
    tail = html.split('class="log-tail"')[1].split("</pre>")[0]
    assert "Traceback" not in tail  # the tail shows progress lines; the traceback is in the log
    organizer_client.post(reverse("generators:retry", args=[small.slug, job.pk]))
    job.refresh_from_db()
    assert job.attempts == 2 and job.state == Job.State.FAILED


def test_pages_need_an_organizer(client, rater_user, small):
    client.force_login(rater_user)
    response = client.get(reverse("generators:panel", args=[small.slug]))
    assert response.status_code == 302


def test_api_upload_generate_and_retry(api_client, small):
    system = small.systems.get()
    base = f"/api/challenges/{small.slug}/generators/"
    response = api_client.post(
        base,
        {"system": system.name, "archive": SimpleUploadedFile("gen.zip", generator_zip())},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    assert response.json()["kind"] == "validate_generator"
    assert response.json()["generator"]["state"] == "valid"

    detail = api_client.get(f"{base}{system.pk}/").json()
    assert detail["report"]["ok"] is True and detail["module"] == "zipgen"

    response = api_client.post(
        f"{base}{system.pk}/generate/", {"n_per_category": 2, "seed": 1}, format="json"
    )
    assert response.status_code == 202
    job = Job.objects.get(pk=response.json()["id"])
    assert job.state == Job.State.SUCCEEDED and system.clips.count() == 2

    bad = api_client.post(base, {"system": system.name, "module": "x y"}, format="multipart")
    assert bad.status_code == 400 and "not a module path" in bad.json()["errors"][0]
    bad = api_client.post(base, {"system": "nobody", "module": "a.b"}, format="multipart")
    assert bad.status_code == 400 and "no system named" in bad.json()["errors"][0]


def test_api_retry_resumes_a_failed_generation(api_client, small):
    system = small.systems.get()
    base = f"/api/challenges/{small.slug}/generators/"
    api_client.post(
        base,
        {"system": system.name, "module": "tests.generator_fixtures.raises"},
        format="multipart",
    )
    Generator.objects.update(state=Generator.State.PENDING)
    job_id = api_client.post(f"{base}{system.pk}/generate/", {}, format="json").json()["id"]
    assert Job.objects.get(pk=job_id).state == Job.State.FAILED
    # Fix the code, then retry the same job through the jobs endpoint.
    Generator.objects.filter(system=system).update(
        module="tests.generator_fixtures.good", state=Generator.State.VALID
    )
    response = api_client.post(f"/api/challenges/{small.slug}/jobs/{job_id}/retry/")
    assert response.status_code == 200, response.content
    assert Job.objects.get(pk=job_id).state == Job.State.SUCCEEDED
    assert system.clips.count() == 100


def test_api_is_for_organizers_only_and_in_the_schema(client, rater_user, small, api_client):
    client.force_login(rater_user)
    assert client.get(f"/api/challenges/{small.slug}/generators/").status_code == 403
    schema = api_client.get("/api/schema/", HTTP_ACCEPT="application/json")
    paths = (
        json.loads(schema.content)["paths"]
        if schema["content-type"].startswith("application/json")
        else schema.content.decode()
    )
    assert "/api/challenges/{challenge_slug}/generators/{system_id}/generate/" in paths


def test_api_refuses_to_retry_an_older_job_over_a_newer_one(api_client, small):
    system = small.systems.get()
    generators.set_generator(system, module="tests.generator_fixtures.raises", validate=False)
    old = generators.generate_now(system, 2)
    assert old.state == Job.State.FAILED
    generators.set_generator(system, module="tests.generator_fixtures.good", validate=False)
    Generator.objects.update(state=Generator.State.VALID)
    new = generators.generate_now(system, 2)
    assert new.state == Job.State.SUCCEEDED and system.clips.count() == 2

    response = api_client.post(f"/api/challenges/{small.slug}/jobs/{old.pk}/retry/")
    assert response.status_code == 409, response.content
    assert f"job #{new.pk}" in response.json()["detail"]
    assert Job.objects.get(pk=old.pk).state == Job.State.FAILED
    assert set(system.clips.values_list("source_job", flat=True)) == {new.pk}


@pytest.mark.parametrize("phase", ["listening", "published"])
def test_api_refuses_generation_once_the_stimuli_are_fixed(api_client, small, phase):
    system = small.systems.get()
    generators.set_generator(system, module="tests.generator_fixtures.good", validate=False)
    Generator.objects.update(state=Generator.State.VALID)
    Challenge.objects.filter(pk=small.pk).update(phase=phase)
    url = f"/api/challenges/{small.slug}/generators/{system.pk}/generate/"
    response = api_client.post(url, {"n_per_category": 2}, format="json")
    assert response.status_code == 409, response.content
    assert phase[:7] in response.json()["errors"][0]
    assert not Job.objects.filter(kind=GENERATE).exists()


def test_a_replaced_archive_is_deleted_once_no_generator_uses_it(
    organizer_client, small, media_root, django_capture_on_commit_callbacks
):
    system = small.systems.get()
    other = create_system(team=small.teams.get(), track=small.tracks.first(), name="Shared")
    code = generator_zip()  # built once: a zip records the time its members were written
    with django_capture_on_commit_callbacks(execute=True):
        upload(organizer_client, small, system, code)
        upload(organizer_client, small, other, code)  # the same file, stored once
    first = Generator.objects.get(system=system).archive
    assert Generator.objects.get(system=other).archive == first
    assert (media_root / first).exists()

    with django_capture_on_commit_callbacks(execute=True):
        upload(organizer_client, small, system, generator_zip(broken=True))
    assert (media_root / first).exists()  # still the other system's code
    second = Generator.objects.get(system=system).archive
    assert second != first and (media_root / second).exists()

    with django_capture_on_commit_callbacks(execute=True):
        organizer_client.post(
            reverse("generators:code", args=[small.slug, other.pk]),
            {"module": "tests.generator_fixtures.good"},
            HTTP_HX_REQUEST="true",
        )
    assert not (media_root / first).exists()  # no generator names it any more
    assert (media_root / second).exists()


def api_upload(api_client, challenge, system, data: bytes):
    return api_client.post(
        f"/api/challenges/{challenge.slug}/generators/",
        {"system": system.name, "archive": SimpleUploadedFile("gen.zip", data)},
        format="multipart",
    )


def assert_nothing_stored(media_root):
    assert not Generator.objects.exists()
    assert not Job.objects.exists()
    assert not (media_root / "generators").exists()


def test_zip_bomb_is_refused_from_the_directory(api_client, small, media_root):
    """64 MiB of zeros packs into about 64 KiB: the ratio is read from the central directory
    and the upload refused before anything is unpacked."""
    bomb = generator_zip(weights=b"\0" * (64 * 1024**2), compression=zipfile.ZIP_DEFLATED)
    assert len(bomb) < 1024**2
    response = api_upload(api_client, small, small.systems.get(), bomb)
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error.startswith("zipgen/weights.bin: compression ratio") and "zip bomb" in error
    assert_nothing_stored(media_root)


def test_expanded_size_limit_comes_from_the_settings(api_client, small, media_root, settings):
    settings.FOLEY_GENERATOR_MAX_EXPANDED_BYTES = 1024**2
    weights = np.random.default_rng(0).bytes(2 * 1024**2)  # incompressible: ratio 1
    response = api_upload(api_client, small, small.systems.get(), generator_zip(weights=weights))
    assert response.status_code == 400
    assert "the limit is 1,048,576" in response.json()["errors"][0]
    assert_nothing_stored(media_root)


def with_method(data: bytes, method: int) -> bytes:
    """The archive with every member's compression method (local and central headers) changed."""
    patched = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        at = patched.find(signature)
        while at != -1:
            patched[at + offset : at + offset + 2] = method.to_bytes(2, "little")
            at = patched.find(signature, at + 4)
    return bytes(patched)


def test_unsupported_compression_method_is_a_clear_400(api_client, small, media_root):
    data = with_method(generator_zip(), 98)  # PPMd: zipfile cannot read it
    response = api_upload(api_client, small, small.systems.get(), data)
    assert response.status_code == 400, response.content
    assert "compression method 98 is not supported" in response.json()["errors"][0]
    assert_nothing_stored(media_root)


def test_damaged_member_is_reported_by_the_validation_not_a_500(api_client, small, media_root):
    """A bad CRC shows only when the member is unpacked, which happens on the worker: the upload
    is accepted (its directory is sound) and the validation job reports the damage."""
    weights = b"\x01" * 4096
    data = generator_zip(weights=weights).replace(weights, b"\x01" * 4095 + b"\x02")
    response = api_upload(api_client, small, small.systems.get(), data)
    assert response.status_code == 202, response.content
    generator = Generator.objects.get()
    assert generator.state == Generator.State.INVALID
    [problem] = generator.report["problems"]
    assert problem["code"] == "archive"
    assert "zipgen/weights.bin: damaged (Bad CRC-32" in problem["message"]


def test_damaged_manifest_is_a_clear_400(api_client, small, media_root):
    manifest = json.dumps({"module": "zipgen"}).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("zipgen/__init__.py", "")
        zf.writestr("foley-generator.json", manifest)
    data = buffer.getvalue().replace(manifest, manifest.replace(b"zipgen", b"zipgem"))
    response = api_upload(api_client, small, small.systems.get(), data)
    assert response.status_code == 400, response.content
    assert "foley-generator.json: damaged (Bad CRC-32" in response.json()["errors"][0]
    assert_nothing_stored(media_root)
