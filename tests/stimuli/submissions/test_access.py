"""Built from the URL configuration: every page and API endpoint of the teams' side (any view
defined in stimuli.submissions, but the public timeline, invitation and registration pages)
refuses anonymous visitors, raters and members of another team, so that a new endpoint cannot
be forgotten. The team's own member reaches the same pages (the test is not vacuous)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from stimuli.models import Team
from stimuli.submissions import urls as team_urls
from stimuli.submissions.models import Submission, SubmissionClip

from .conftest import baseline_archive, meta, upload

pytestmark = pytest.mark.sandbox
SECRET = "Secret Barker"


def _params(pattern) -> list[str]:
    return list(pattern.pattern.regex.groupindex)


def _view_module(callback) -> str:
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    return (cls or callback).__module__


def team_side_endpoints() -> list[tuple[str, list[str], str]]:
    """(URL name, its parameters, view module) of every route to a view of the teams' side."""
    found = []

    def walk(patterns, params, namespace):
        for p in patterns:
            if isinstance(p, URLResolver):
                ns = ":".join(filter(None, [namespace, p.namespace])) or None
                walk(p.url_patterns, params + _params(p), ns)
            elif isinstance(p, URLPattern) and p.name:
                module = _view_module(p.callback)
                if module.startswith("stimuli.submissions"):
                    name = f"{namespace}:{p.name}" if namespace else p.name
                    found.append((name, params + _params(p), module))

    walk(get_resolver().url_patterns, [], None)
    return found


ENDPOINTS = [
    e for e in team_side_endpoints() if e[0] not in {f"teams:{n}" for n in team_urls.PUBLIC}
]


def test_the_walk_finds_pages_api_and_organizer_routes():
    names = {name for name, _, _ in ENDPOINTS}
    assert {"teams:team", "teams:submission", "teams:clip", "team-submission-list",
            "team-submission-detail", "submissions_organize:index"} <= names  # fmt: skip
    assert not names & {"teams:timeline", "teams:join", "teams:register"}


@pytest.fixture
def victim(open_challenge, make_member, django_capture_on_commit_callbacks):
    """Team A's member and a checked submission of team A with example clips."""
    ann = make_member("Team A", "ann")
    team = Team.objects.get(name="Team A")
    from stimuli.submissions.services import submit

    with django_capture_on_commit_callbacks(execute=True):
        submission = submit(team, ann, meta(SECRET), upload(baseline_archive()))
    submission.refresh_from_db()
    assert submission.state == Submission.State.VALID, submission.report
    return {"user": ann, "team": team, "submission": submission}


def _url(name: str, params: list[str], victim, challenge) -> str:
    values = {
        "slug": challenge.slug,
        "challenge_slug": challenge.slug,
        "pk": victim["submission"].pk,
        "clip_id": SubmissionClip.objects.filter(submission=victim["submission"]).first().pk,
        "team_id": victim["team"].pk,
    }
    return reverse(name, kwargs={k: values[k] for k in params})


def _clients(make_member, rater_user) -> dict[str, Client]:
    anonymous = Client()
    rater = Client()
    rater.force_login(rater_user)
    other = Client()
    other.force_login(make_member("Team B", "bob"))
    return {"anonymous": anonymous, "rater": rater, "member of another team": other}


@pytest.mark.parametrize("method", ["get", "post"])
def test_every_team_endpoint_refuses_outsiders(
    victim, open_challenge, make_member, rater_user, method
):
    clients = _clients(make_member, rater_user)
    checked = 0
    for name, params, _module in ENDPOINTS:
        url = _url(name, params, victim, open_challenge)
        for who, client in clients.items():
            response = getattr(client, method)(url)
            body = response.content.decode(errors="replace")
            refused = response.status_code in (401, 403, 404, 405) or (
                response.status_code == 302 and "/accounts/login/" in response["Location"]
            )
            # Another team's member may open their own team's pages: never team A's content.
            own_page = who == "member of another team" and response.status_code in (200, 302, 400)
            assert refused or own_page, f"{method.upper()} {url} as {who}: {response.status_code}"
            assert SECRET not in body, f"{method.upper()} {url} as {who} shows team A's system"
            assert victim["submission"].archive_sha256 not in body
            checked += 1
    assert checked >= 3 * 10


def test_the_team_member_reaches_the_pages(victim, open_challenge):
    client = Client()
    client.force_login(victim["user"])
    for name in ("teams:team", "teams:submission", "teams:status", "teams:clip",
                 "team-submission-list", "team-submission-detail"):  # fmt: skip
        params = next(p for n, p, _ in ENDPOINTS if n == name)
        response = client.get(_url(name, params, victim, open_challenge))
        assert response.status_code == 200, (name, response.status_code)
