"""The teams' API for their CI: a token per member, submit and read the team's submissions,
another team's is a 404, refusals in the API's one error format."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from stimuli.submissions import schedule

from .conftest import baseline_archive, upload

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def _client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def _post(client, slug="teams", **fields):
    data = {"system": "CI system", "track": "A", "licence": "MIT",
            "archive": upload(baseline_archive()), **fields}  # fmt: skip
    return client.post(f"/api/challenges/{slug}/submissions/", data, format="multipart")


def test_ci_submits_and_reads_its_team_only(open_challenge, make_member, organizer):
    ann, bob = make_member("Team A", "ann"), make_member("Team B", "bob")
    response = _post(_client(ann))
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "valid" and body["version"] == 1 and body["example_clips"] == 4
    pk = body["id"]
    assert [
        s["id"] for s in _client(ann).get("/api/challenges/teams/submissions/").json()["results"]
    ] == [pk]
    assert _client(ann).get(f"/api/challenges/teams/submissions/{pk}/").status_code == 200
    assert _client(bob).get(f"/api/challenges/teams/submissions/{pk}/").status_code == 404
    assert _client(bob).get("/api/challenges/teams/submissions/").json()["results"] == []
    # The organizers read every team's.
    assert _client(organizer).get("/api/challenges/teams/submissions/").json()["count"] == 1
    assert _client(organizer).get(f"/api/challenges/teams/submissions/{pk}/").status_code == 200


def test_refusals_come_in_the_one_error_format(open_challenge, make_member, rater_user):
    ann = make_member("Team A", "ann")
    response = _post(_client(ann), track="B", external_data="true", external_data_sources="")
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert any("Track B forbids external data" in e for e in errors)
    assert any("external_data_sources" in e for e in errors)
    schedule.set_schedule(open_challenge, submissions_per_day=1)
    assert _post(_client(ann)).status_code == 201
    quota = _post(_client(ann))
    assert quota.status_code == 429 and "the limit is 1 a day" in quota.json()["detail"]
    assert _client(rater_user).get("/api/challenges/teams/submissions/").status_code == 403
    assert APIClient().get("/api/challenges/teams/submissions/").status_code in (401, 403)
