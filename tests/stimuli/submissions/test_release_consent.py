"""A team's consent to its systems' listening-test audio going into the data release, set on its
own page: a member checks and unchecks it for its own systems; another team's system is refused
with nothing changed; someone outside the teams gets the usual refusal. A short browser test
shows the section at 1,366 and 390 px."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from stimuli.models import System, Team
from stimuli.services import create_system
from tests.chromium import chromium_page, log_in
from tests.layout_check import DESKTOP, DOCS_SCREENSHOTS, PHONE, assert_in_layout

from .conftest import PASSWORD


@pytest.fixture
def two_teams(open_challenge, make_member):
    """Ann of team A with two systems, Bob of team B with one."""
    ann, bob = make_member("Team A", "ann"), make_member("Team B", "bob")
    track = open_challenge.tracks.get(code="A")
    team_a, team_b = Team.objects.get(name="Team A"), Team.objects.get(name="Team B")
    return {
        "ann": ann,
        "bob": bob,
        "barker": create_system(team=team_a, track=track, name="Barker"),
        "drizzle": create_system(team=team_a, track=track, name="Drizzle"),
        "bobs": create_system(team=team_b, track=track, name="Bob's rain"),
    }


def _flags() -> dict[str, bool]:
    return dict(System.objects.values_list("name", "release_audio"))


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_member_sets_and_clears_the_consent_of_its_own_systems(open_challenge, two_teams):
    client = _client(two_teams["ann"])
    url = reverse("teams:release_audio", kwargs={"slug": open_challenge.slug})
    page = client.get(reverse("teams:team", kwargs={"slug": open_challenge.slug}))
    body = page.content.decode()
    assert "Audio in the data release" in body
    assert "Release this system's sounds" in body and "Bob&#x27;s rain" not in body
    assert _flags() == {"Barker": False, "Drizzle": False, "Bob's rain": False}

    response = client.post(url, {"release": [str(two_teams["barker"].pk)]}, follow=True)
    assert response.redirect_chain[-1][0].endswith("/team/")
    assert "Saved: 1 of 2 systems release their sounds" in response.content.decode()
    assert _flags() == {"Barker": True, "Drizzle": False, "Bob's rain": False}
    checked = f'value="{two_teams["barker"].pk}" aria-describedby'
    assert f'{checked}="release-system-{two_teams["barker"].pk}" checked' in (
        response.content.decode()
    )

    # Both checked, then none: an unchecked box withdraws the consent.
    both = [str(two_teams["barker"].pk), str(two_teams["drizzle"].pk)]
    assert client.post(url, {"release": both}).status_code == 302
    assert _flags() == {"Barker": True, "Drizzle": True, "Bob's rain": False}
    assert client.post(url, {}).status_code == 302
    assert _flags() == {"Barker": False, "Drizzle": False, "Bob's rain": False}


def test_another_teams_or_an_unknown_system_is_refused_and_nothing_changes(
    open_challenge, two_teams
):
    System.objects.filter(pk=two_teams["drizzle"].pk).update(release_audio=True)
    client = _client(two_teams["ann"])
    url = reverse("teams:release_audio", kwargs={"slug": open_challenge.slug})
    bobs = two_teams["bobs"].pk
    # Barker checked and Drizzle unchecked would change both: the bad ids stop all of it.
    response = client.post(
        url, {"release": [str(two_teams["barker"].pk), str(bobs), "999999", "x"]}
    )
    assert response.status_code == 400
    body = response.content.decode()
    for problem in (f"system {bobs}: not a system of your team",
                    "system 999999: not a system of your team",
                    "system &#x27;x&#x27;: not a system of your team"):  # fmt: skip
        assert problem in body
    assert _flags() == {"Barker": False, "Drizzle": True, "Bob's rain": False}


def test_outsiders_get_the_usual_refusal(open_challenge, two_teams, rater_user):
    url = reverse("teams:release_audio", kwargs={"slug": open_challenge.slug})
    barker = str(two_teams["barker"].pk)
    anonymous = Client().post(url, {"release": [barker]})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert _client(rater_user).post(url, {"release": [barker]}).status_code == 403
    # A member of another team acts for its own team only: team A's system is not one of its.
    assert _client(two_teams["bob"]).post(url, {"release": [barker]}).status_code == 400
    assert _client(two_teams["ann"]).get(url).status_code == 405
    assert _flags() == {"Barker": False, "Drizzle": False, "Bob's rain": False}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_release_section_in_chromium(live_server, chromium_path, open_challenge, two_teams):
    url = f"{live_server.url}{reverse('teams:team', kwargs={'slug': open_challenge.slug})}"
    with chromium_page(chromium_path, viewport=DESKTOP) as page:
        log_in(page, live_server.url, "ann", PASSWORD)
        page.goto(url)
        page.check(f"#release-audio input[value='{two_teams['drizzle'].pk}']")
        page.click("#release-audio button[type=submit]")
        page.wait_for_selector("ul.messages li.success")
        assert _flags() == {"Barker": False, "Drizzle": True, "Bob's rain": False}
        assert page.is_checked(f"#release-audio input[value='{two_teams['drizzle'].pk}']")
        for size, suffix in ((DESKTOP, ""), (PHONE, "-phone")):
            page.set_viewport_size(size)
            page.goto(url + "#release-audio")
            assert_in_layout(page)
            page.locator("#release-audio").scroll_into_view_if_needed()
            page.screenshot(
                path=str(DOCS_SCREENSHOTS / f"team-release-consent{suffix}.png"), full_page=True
            )
