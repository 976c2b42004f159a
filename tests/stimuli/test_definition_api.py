"""A challenge's definition file through the REST API: read as YAML or JSON, applied with its diff
and a dry run, a new challenge created from one, the file's JSON Schema; every problem of a file
refused at once with its line, a file that names another challenge refused, and only the
challenge's organizers change it."""

from __future__ import annotations

import hashlib
import re

import pytest
import yaml
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from scoring.models import ScoringSettings
from stimuli import definition
from stimuli.models import Challenge, ChallengeRole
from stimuli.services import create_challenge
from tests.stimuli.test_api_edits import store_clips

pytestmark = pytest.mark.django_db


def url(slug: str) -> str:
    return f"/api/challenges/{slug}/definition/"


def put(client: APIClient, slug: str, text: str, query: str = ""):
    return client.put(url(slug) + query, text.encode(), content_type="application/yaml")


def client_of(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def line_of(text: str, starts: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(starts))


def test_get_answers_the_file_as_yaml_and_as_json(api_client, challenge):
    text = definition.export(challenge)
    response = api_client.get(url(challenge.slug))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml; charset=utf-8"
    assert response.content.decode() == text
    assert yaml.safe_load(response.content)["slug"] == challenge.slug
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert response["ETag"] == f'"{digest}"'
    for answer in (
        api_client.get(url(challenge.slug) + "?format=json"),
        api_client.get(url(challenge.slug), HTTP_ACCEPT="application/json"),
    ):
        assert answer["Content-Type"] == "application/json"
        assert answer.json() == {"definition": text, "sha256": digest}
    # Reading the file stores nothing: no schedule appears (it would open the teams' pages).
    assert not hasattr(Challenge.objects.get(pk=challenge.pk), "schedule")


def test_put_applies_a_changed_file_and_a_dry_run_only_reports(api_client, challenge):
    text = definition.export(challenge)
    changed = text.replace("weight_diversity: 0.5", "weight_diversity: 0.25").replace(
        "name: Foley 2023", "name: Foley 2023, second run"
    )
    dry = put(api_client, challenge.slug, changed, "?dry_run=1")
    assert dry.status_code == 200, dry.content
    assert dry.json() == {
        "created": False,
        "dry_run": True,
        "changes": [
            "~ name: 'Foley 2023' -> 'Foley 2023, second run'",
            "~ scoring.weight_diversity: 0.5 -> 0.25",
        ],
        "diff": "~ name: 'Foley 2023' -> 'Foley 2023, second run'\n"
        "~ scoring.weight_diversity: 0.5 -> 0.25",
    }
    challenge.refresh_from_db()
    assert challenge.name == "Foley 2023"
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 0.5

    applied = put(api_client, challenge.slug, changed)
    assert applied.status_code == 200
    assert applied.json()["dry_run"] is False and len(applied.json()["changes"]) == 2
    challenge.refresh_from_db()
    assert challenge.name == "Foley 2023, second run"
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 0.25
    assert api_client.get(url(challenge.slug)).content.decode() == changed
    again = put(api_client, challenge.slug, changed)
    assert again.json() == {"created": False, "dry_run": False, "changes": [], "diff": "no changes"}


def test_put_takes_the_file_as_plain_text_or_in_json(api_client, challenge):
    text = definition.export(challenge)
    plain = api_client.put(
        url(challenge.slug) + "?dry_run=1",
        text.replace("\n", "\r\n").encode(),  # as a browser or Windows editor writes it
        content_type="text/plain; charset=utf-8",
    )
    assert plain.status_code == 200 and plain.json()["diff"] == "no changes"
    renamed = text.replace("name: Foley 2023", "name: Renamed")
    in_json = api_client.put(url(challenge.slug), {"definition": renamed}, format="json")
    assert in_json.status_code == 200
    assert in_json.json()["changes"] == ["~ name: 'Foley 2023' -> 'Renamed'"]
    not_text = api_client.put(url(challenge.slug), {"definition": 3}, format="json")
    assert not_text.status_code == 400
    assert not_text.json()["errors"] == ["definition: the file's text (a string) needed"]
    empty = api_client.put(url(challenge.slug), b"", content_type="application/yaml")
    assert empty.status_code == 400 and "none sent" in empty.json()["errors"][0]
    form = api_client.put(url(challenge.slug), {"definition": renamed}, format="multipart")
    assert form.status_code == 415


def test_every_problem_of_a_file_is_refused_at_once_with_its_line(api_client, challenge):
    text = definition.export(challenge)
    wrong = (
        text.replace("  sample_rate: 22050", "  sample_rate: lots")
        .replace("  weight_diversity: 0.5", "  weight_diversity: 0.5\n  colour: blue")
        .replace("name: Foley 2023", "name: Renamed")
    )
    response = put(api_client, challenge.slug, wrong)
    assert response.status_code == 400
    body = response.json()
    problems = body["errors"]
    assert len(problems) == 2, problems
    rate, colour = line_of(wrong, "  sample_rate:"), line_of(wrong, "  colour:")
    assert problems[0].startswith("clip.sample_rate: input should be a valid integer")
    assert problems[0].endswith(f"(line {rate}, column 3)")
    assert problems[1].startswith("scoring.colour: unknown key; the keys here are: ")
    assert problems[1].endswith(f"(line {colour}, column 3)")
    assert body["detail"] == "; ".join(problems)
    challenge.refresh_from_db()
    assert challenge.name == "Foley 2023"
    # Not YAML at all: where the reader stopped.
    broken = put(api_client, challenge.slug, "slug: foley-2023\nname: [unclosed\n")
    assert broken.status_code == 400
    assert re.fullmatch(r"not YAML: .*\(line 3, column 1\)", broken.json()["errors"][0])


def test_a_change_the_challenges_state_forbids_is_a_409_with_its_line(api_client, challenge):
    store_clips(api_client, challenge)
    text = definition.export(challenge)
    changed = text.replace("sample_rate: 22050", "sample_rate: 44100")
    response = put(api_client, challenge.slug, changed)
    assert response.status_code == 409
    (problem,) = response.json()["errors"]
    # The words of the API's own refusal of the same change, and where the file makes it.
    patched = api_client.patch(
        f"/api/challenges/{challenge.slug}/", {"sample_rate": 44_100}, format="json"
    )
    assert patched.status_code == 409
    assert problem == f"clip: {patched.json()['detail']} (line {line_of(changed, 'clip:')})"
    challenge.refresh_from_db()
    assert challenge.sample_rate == 22_050
    # The same in a dry run: it reports what applying would refuse.
    assert put(api_client, challenge.slug, changed, "?dry_run=1").status_code == 409


def test_a_file_that_names_another_challenge_is_refused_naming_both(api_client, challenge):
    other = create_challenge(name="Other", slug="other")
    text = definition.export(other).replace("name: Other", "name: Taken over")
    response = put(api_client, challenge.slug, text)
    assert response.status_code == 400
    assert response.json()["errors"] == [
        f"slug: the file defines challenge 'other' (line {line_of(text, 'slug:')}), but this is "
        "challenge 'foley-2023'; a definition file changes only the challenge it names"
    ]
    # A slug of no challenge: nothing is created either; the file's other problems come too.
    fresh = text.replace("slug: other", "slug: brand-new").replace("  channels: 1", "  channels: 9")
    refused = put(api_client, challenge.slug, fresh).json()["errors"]
    assert refused[0].startswith("slug: the file defines challenge 'brand-new'")
    assert refused[1].startswith("clip.channels: input should be less than or equal to 2")
    assert Challenge.objects.get(slug="other").name == "Other"
    assert not Challenge.objects.filter(slug="brand-new").exists()


def test_only_the_challenges_organizers_change_it(challenge, organizer_of):
    text = definition.export(challenge)
    renamed = text.replace("name: Foley 2023", "name: Renamed")
    viewer = client_of(organizer_of(challenge, "viewer"))
    assert viewer.get(url(challenge.slug)).content.decode() == text
    refused = put(viewer, challenge.slug, renamed)
    assert refused.status_code == 403
    assert refused.json()["detail"] == "Viewers of this challenge cannot change it."
    theirs = create_challenge(name="Theirs", slug="theirs")
    outsider = client_of(organizer_of(theirs, "organizer", "outsider"))
    assert outsider.get(url(challenge.slug)).status_code == 403
    assert put(outsider, challenge.slug, renamed).status_code == 403
    assert outsider.get(url("no-such-challenge")).status_code == 404
    assert APIClient().get(url(challenge.slug)).status_code == 403  # no credentials
    challenge.refresh_from_db()
    assert challenge.name == "Foley 2023"
    # A member organizer of the challenge may.
    member = client_of(organizer_of(challenge, "organizer", "member"))
    assert put(member, challenge.slug, renamed).status_code == 200


def test_post_creates_a_challenge_owned_by_its_creator(organizer, organizer_of, challenge):
    creator = client_of(organizer)
    text = definition.export(challenge).replace("slug: foley-2023", "slug: foley-2024")
    dry = creator.post("/api/challenges/definition/?dry_run=1", text, content_type="text/plain")
    assert dry.status_code == 200, dry.content
    assert dry.json()["created"] is True and dry.json()["dry_run"] is True
    assert dry.json()["diff"].startswith("+ challenge foley-2024")
    assert not Challenge.objects.filter(slug="foley-2024").exists()

    created = creator.post(
        "/api/challenges/definition/", text.encode(), content_type="application/yaml"
    )
    assert created.status_code == 201
    assert created.json()["created"] is True and created.json()["dry_run"] is False
    new = Challenge.objects.get(slug="foley-2024")
    assert ChallengeRole.objects.get(challenge=new).user == organizer
    assert creator.get(url("foley-2024")).content.decode() == text
    # A slug taken: the file changes that challenge at its own address, not here.
    taken = creator.post("/api/challenges/definition/", {"definition": text}, format="json")
    assert taken.status_code == 409
    assert taken.json()["errors"][0].startswith(
        f"slug: a challenge 'foley-2024' exists (line {line_of(text, 'slug:')})"
    )
    # Not in the organizers group: no challenge of one's own.
    viewer = organizer_of(challenge, "viewer")
    assert not viewer.groups.filter(name="organizers").exists()
    other = text.replace("slug: foley-2024", "slug: by-a-viewer")
    refused = client_of(viewer).post(
        "/api/challenges/definition/", {"definition": other}, format="json"
    )
    assert refused.status_code == 403
    assert not Challenge.objects.filter(slug="by-a-viewer").exists()
    # A file with problems creates nothing, and says so at once.
    wrong = other.replace("slug: by-a-viewer", "slug: wrong").replace("  channels: 1", "  chans: 1")
    problems = creator.post("/api/challenges/definition/", {"definition": wrong}, format="json")
    assert problems.status_code == 400
    assert problems.json()["errors"][0].startswith("clip.chans: unknown key")
    assert not Challenge.objects.filter(slug="wrong").exists()


def test_the_files_json_schema_is_public(client):
    response = client.get("/api/challenge-schema/")
    assert response.status_code == 200
    assert response.json() == definition.schema()
    assert "slug" in response.json()["properties"]


def test_the_openapi_schema_documents_the_definition_endpoints(organizer_client):
    schema = yaml.safe_load(organizer_client.get("/api/schema/").content)
    paths = schema["paths"]
    one = paths["/api/challenges/{challenge_slug}/definition/"]
    assert set(one["get"]["responses"]["200"]["content"]) == {
        "application/yaml",
        "application/json",
    }
    assert set(one["put"]["requestBody"]["content"]) == {
        "application/yaml",
        "text/plain",
        "application/json",
    }
    assert {"200", "400", "409"} <= set(one["put"]["responses"])
    assert [p["name"] for p in one["put"]["parameters"] if p["in"] == "query"] == ["dry_run"]
    assert "post" in paths["/api/challenges/definition/"]
    assert "get" in paths["/api/challenge-schema/"]
