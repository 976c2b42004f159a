"""Organizers are scoped to their challenges, proved from the URL configuration itself: every
organizer route and API endpoint, found by walking the resolver, refuses an organizer of another
challenge (any method) and a viewer of this one where it writes. A route the walk finds that is
neither organizer nor listed as public fails the test, so a new endpoint cannot be forgotten."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from raters.models import Rater
from stimuli.models import Challenge, ChallengeRole, Job, System, Team
from stimuli.services import create_challenge, create_system, create_team

pytestmark = pytest.mark.django_db

# Routes anyone may reach (the raters' pages, published results, the schema) or that Django's
# admin guards itself. Everything else is organizer-only and checked below.
PUBLIC = {
    "home", "login", "logout", "api-schema", "api-docs",
    "raters:home", "raters:join", "raters:crowd", "raters:consent", "raters:instructions",
    "raters:start", "raters:rate", "raters:vote", "raters:next", "raters:finish", "raters:audio",
    "raters:player", "raters:diversity", "raters:rate_diversity", "raters:text_home",
    "raters:text_progress", "raters:text_begin", "raters:text_describe", "raters:text_mark",
    "raters:text_realism", "raters:text_prompt", "raters:text_answer", "raters:text_marks_done",
    "raters:screening", "raters:screening_answer", "raters:screening_retry",
    "scoring:index", "scoring:challenge", "scoring:snapshot", "scoring:track", "scoring:plot",
    "scoring:download",
    "results-api-challenges", "results-api-snapshots", "results-api-latest",
    "results-api-snapshot", "results-api-leaderboard",
    # The definition file's JSON Schema: the manual publishes the same.
    "challenge-schema",
    # nginx's report of a sent sound: internal to nginx, and it takes only a receipt signed by
    # the web process (tests/adversary/test_delivery.py).
    "sound-delivered",
    # Password resets by e-mail, and the teams' public pages: a challenge's timeline, an
    # invitation link, self-registration, the answer to both and its e-mail's link.
    "password_reset", "password_reset_done", "password_reset_confirm", "password_reset_complete",
    "teams:timeline", "teams:join", "teams:register", "teams:sent", "teams:confirm",
}  # fmt: skip
# One team's pages and API: their members only, held to it by
# tests/stimuli/submissions/test_access.py (organizers use /organize/<challenge>/submissions/).
TEAM_SCOPED_PREFIXES = ("teams:", "team-submission-")
# Organizer routes that name no challenge: each scopes what it shows (tested below).
UNSCOPED = {
    "stimuli:challenges", "stimuli:job", "stimuli:audio", "challenge-list", "api-root",
    "challenge-definition-new",
}  # fmt: skip
VALUES = {
    "pk": 1, "job_id": 1, "system_id": 1, "number": 1, "step": "embeddings",
    "category": "rain", "code": "A", "kind": "x", "fmt": "csv", "name": "x",
    "sha256": "0" * 64, "token": "x", "key": "x", "format": "json", "team_id": 1,
    "uidb64": "MQ",
}  # fmt: skip
WRITES = ("post", "put", "patch", "delete")


def _kwargs(pattern) -> set[str]:
    regex = getattr(pattern.pattern, "regex", None)
    return set(regex.groupindex) if regex is not None else set()


def routes() -> dict[str, set[str]]:
    """Every named route of the site (admin aside): name -> the kwargs its URL takes."""
    found: dict[str, set[str]] = {}

    def walk(patterns, namespaces, inherited):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                if pattern.app_name == "admin":
                    continue
                spaces = namespaces + ([pattern.namespace] if pattern.namespace else [])
                walk(pattern.url_patterns, spaces, inherited | _kwargs(pattern))
            elif pattern.name:
                name = ":".join([*namespaces, pattern.name])
                found.setdefault(name, set()).update(inherited | _kwargs(pattern))

    walk(get_resolver().url_patterns, [], set())
    return {n: k for n, k in found.items() if not n.startswith(TEAM_SCOPED_PREFIXES)}


def url_for(name: str, kwargs: set[str], slug: str) -> str:
    values = {k: slug if k in ("slug", "challenge_slug") else VALUES[k] for k in kwargs}
    values.pop("format", None)  # the plain route; its suffix variant is the same view
    return reverse(name, kwargs=values)


def scoped_routes() -> list[tuple[str, set[str]]]:
    return sorted(
        (name, kwargs)
        for name, kwargs in routes().items()
        if name not in PUBLIC and name not in UNSCOPED
    )


def test_every_route_is_public_or_scoped_to_a_challenge():
    for name, kwargs in routes().items():
        if name in PUBLIC or name in UNSCOPED:
            continue
        assert kwargs & {"slug", "challenge_slug"}, (
            f"{name} is organizer-only but names no challenge"
        )
    assert len(scoped_routes()) > 40  # the walk found the organizer side


@pytest.fixture
def two_challenges(organizer_of):
    ours = create_challenge(name="Ours", slug="ours")
    theirs = create_challenge(name="Theirs", slug="theirs")
    team = create_team(ours, name="Team")
    create_system(team=team, track=ours.tracks.get(code="A"), name="Sys")
    outsider = organizer_of(theirs, "owner", "outsider")
    outsider.groups.add(Group.objects.get_or_create(name="organizers")[0])
    return {
        "ours": ours,
        "outsider": outsider,
        "viewer": organizer_of(ours, "viewer", "viewer"),
        "member": organizer_of(ours, "organizer", "member"),
    }


def clients(user) -> tuple[Client, APIClient]:
    page = Client()
    page.force_login(user)
    api = APIClient()  # a token: the refusal must be the role's, not a missing CSRF token
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return page, api


def state() -> tuple:
    counts = [m.objects.count() for m in (Challenge, ChallengeRole, Team, System, Job, Rater)]
    return (*counts, Challenge.objects.get(slug="ours").phase)


def each_route(user):
    """(name, URL, client) for every organizer route of the challenge "ours", as `user`: pages
    through a logged-in client, the API with the user's token."""
    page, api = clients(user)
    for name, kwargs in scoped_routes():
        url = url_for(name, kwargs, "ours")
        yield name, url, api if url.startswith("/api/") else page


def test_every_organizer_route_refuses_an_organizer_of_another_challenge(two_challenges):
    before = state()
    for name, url, client in each_route(two_challenges["outsider"]):
        for method in ("get", *WRITES):
            status = getattr(client, method)(url).status_code
            # 405: a method the route does not take, refused before anything runs.
            assert status in (403, 404, 405), f"{method.upper()} {url} ({name}) answered {status}"
    assert state() == before


def test_every_organizer_route_refuses_a_viewer_where_it_writes(two_challenges):
    before = state()
    for name, url, client in each_route(two_challenges["viewer"]):
        for method in WRITES:
            status = getattr(client, method)(url).status_code
            assert status in (403, 405), f"{method.upper()} {url} ({name}) answered {status}"
        # Reading is what a viewer is for.
        assert client.get(url).status_code not in (403, 500), f"GET {url} ({name})"
    assert state() == before


def test_the_challenges_organizers_reach_every_route_and_no_route_answers_500(two_challenges):
    for name, url, client in each_route(two_challenges["member"]):
        status = client.get(url).status_code
        assert status not in (403, 500), f"GET {url} ({name}) answered {status}"
        suffixed = client.get(url.rstrip("/") + ".json").status_code
        assert suffixed < 500, f"GET {url.rstrip('/')}.json ({name}) answered {suffixed}"


def test_unscoped_organizer_routes_show_only_the_users_challenges(two_challenges):
    ours = two_challenges["ours"]
    job = Job.objects.create(challenge=ours, kind="import")
    page, api = clients(two_challenges["outsider"])
    for where in ("stimuli:challenges", "home"):
        listed = page.get(reverse(where)).content.decode()
        assert "/organize/theirs/" in listed and "/organize/ours/" not in listed, where
    assert [c["slug"] for c in api.get("/api/challenges/").json()["results"]] == ["theirs"]
    assert page.get(reverse("stimuli:job", args=[job.pk])).status_code == 403
    assert api.get(f"/api/challenges/ours/jobs/{job.pk}/").status_code == 403
    assert api.delete("/api/challenges/ours/").status_code == 403
    # An organizer of the challenge sees it; only its owner deletes it.
    page, api = clients(two_challenges["member"])
    assert page.get(reverse("stimuli:job", args=[job.pk])).status_code == 200
    assert api.delete("/api/challenges/ours/").status_code == 403
    assert Challenge.objects.filter(slug="ours").exists()


def test_a_created_challenge_is_owned_by_its_creator(two_challenges):
    _, api = clients(two_challenges["outsider"])
    assert api.post("/api/challenges/", {"name": "New", "slug": "new"}).status_code == 201
    assert ChallengeRole.objects.get(challenge__slug="new").user == two_challenges["outsider"]
    # A viewer, not in the organizers group, creates nothing.
    _, api = clients(two_challenges["viewer"])
    assert api.post("/api/challenges/", {"name": "V", "slug": "v"}).status_code == 403
    assert not Challenge.objects.filter(slug="v").exists()


def test_the_demo_organizer_organizes_the_demo_challenge_only(db):
    from stimuli.demo import DEMO_SLUG, ensure_organizer
    from stimuli.permissions import may_read, may_write

    demo = create_challenge(name="Demo", slug=DEMO_SLUG)
    other = create_challenge(name="Other", slug="other")
    user = ensure_organizer()
    assert not (user.is_staff or user.is_superuser)
    assert may_write(user, demo) and not may_read(user, other)


def test_unpublished_snapshots_are_not_found(client, two_challenges):
    assert client.get("/api/results/ours/snapshots/").status_code == 404
    assert client.get("/api/results/ours/latest/").status_code == 404
