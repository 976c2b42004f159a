"""Every refusal of the REST API has one shape, written by one handler from the service's error."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError as DjangoValidationError

from foley_platform.api_errors import exception_handler
from stimuli.errors import Conflict, Refused, page_status
from stimuli.models import Clip, Job
from tests.factories import make_wav
from tests.stimuli.uploads.test_endpoints import staged, upload_file


def test_an_upload_with_several_problems_lists_each_and_stores_nothing(
    api_client, challenge, media_root
):
    files = {"/abs/rain.wav": make_wav(), "../up/rain.wav": make_wav(seed=2)}
    response = api_client.post(
        f"/api/challenges/{challenge.slug}/uploads/",
        {"role": "development", "file": upload_file(files)},
        format="multipart",
    )
    assert response.status_code == 400
    body = response.json()
    assert len(body["errors"]) == 2
    assert body["detail"] == "; ".join(body["errors"])
    assert any("/abs/rain.wav" in e for e in body["errors"])
    assert any("../up/rain.wav" in e for e in body["errors"])
    assert Job.objects.count() == 0 and Clip.objects.count() == 0 and staged(media_root) == []


def test_a_model_check_raised_in_a_service_answers_400_not_500():
    by_field = exception_handler(DjangoValidationError({"name": ["too long"]}), {})
    assert by_field.status_code == 400 and by_field.data == {"name": ["too long"]}
    plain = exception_handler(DjangoValidationError("no such thing"), {})
    assert plain.status_code == 400 and plain.data == {"detail": ["no such thing"]}
    conflict = exception_handler(Conflict("the listening test is open"), {})
    assert conflict.status_code == 409
    assert conflict.data == {
        "detail": "the listening test is open",
        "errors": ["the listening test is open"],
    }


@pytest.mark.parametrize(
    ("refusal", "htmx", "status"),
    [
        (Refused("bad"), False, 400),
        (Conflict("phase"), False, 409),
        (Refused("busy", status=409), False, 409),
        (Conflict("phase"), True, 200),  # htmx swaps only 2xx answers: the panel shows it
        (None, False, 400),
    ],
)
def test_a_page_answers_a_refusal_with_its_status(refusal, htmx, status):
    assert page_status(htmx, refusal) == status


def test_several_problems_make_one_message():
    refusal = Refused(["a.wav: too long", "b.wav: not mono"])
    assert refusal.message == "a.wav: too long; b.wav: not mono"
    assert refusal.problems == ["a.wav: too long", "b.wav: not mono"]
    assert str(refusal) == refusal.message and refusal.status == 400


NESTED = "[" * 5000 + "]" * 5000  # past Python's recursion limit, 10 KB


def test_json_nested_too_deep_is_a_400_like_bad_json(api_client, challenge):
    from stimuli.models import System, Team, Track
    from stimuli.parsers import read_json

    with pytest.raises(ValueError, match="nested too deep"):
        read_json(NESTED)
    assert read_json("[[1]]") == [[1]]
    # The API's default parser, and a viewset's own list of parsers.
    for url in ("/api/challenges/", f"/api/challenges/{challenge.slug}/generators/"):
        response = api_client.post(url, NESTED, content_type="application/json")
        assert response.status_code == 400, url
        assert response.json()["detail"] == "JSON parse error - nested too deep"
    # JSON inside a form field: a generator's settings.
    track = Track.objects.get(challenge=challenge, code="A")
    team = Team.objects.create(challenge=challenge, name="Barkers")
    System.objects.create(challenge=challenge, track=track, team=team, name="Barker")
    response = api_client.post(
        f"/api/challenges/{challenge.slug}/generators/",
        {"system": "Barker", "module": "a.b", "config": NESTED},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == ["config is not JSON: nested too deep"]
    # And a team's declared settings on the submission page.
    from stimuli.submissions.forms import SubmissionForm

    form = SubmissionForm(data={"system": "Barker", "track": "A", "config": NESTED})
    assert not form.is_valid() and form.errors["config"] == ["not JSON: nested too deep"]
    # And a team's archive manifest, read on a worker: a refusal of the archive, not a crash.
    from sandbox.errors import SandboxError
    from sandbox.source import _parse_manifest

    with pytest.raises(SandboxError, match="is invalid"):
        _parse_manifest(NESTED.encode())
