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
