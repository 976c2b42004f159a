"""The challenge page's definition section as plain HTTP (what a browser without JavaScript
gets): the file shown and downloaded, a changed file checked and its changes shown in the page,
applied only as checked, every problem in the page's error panel with nothing stored, and only
the challenge's owner and organizers changing it."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from scoring.models import ScoringSettings
from stimuli import definition
from stimuli.models import Challenge
from stimuli.services import create_challenge

pytestmark = pytest.mark.django_db


def page(slug: str, rest: str = "") -> str:
    return f"/organize/{slug}/{rest}"


def upload(text: str, name: str = "challenge.yaml") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="application/yaml")


def hidden(html: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html, re.S)
    assert found, f"no hidden {name}"
    return unescape(found.group(1))


def test_the_page_shows_the_file_and_offers_it_for_download(organizer_client, challenge):
    text = definition.export(challenge)
    shown = organizer_client.get(page(challenge.slug)).content.decode()
    assert 'id="definition-text"' in shown and 'id="definition-form"' in shown
    pre = re.search(r'<pre class="definition"[^>]*>(.*?)</pre>', shown, re.S).group(1)
    assert unescape(pre) == text
    assert definition.sha256(text) in shown
    download = organizer_client.get(page(challenge.slug, "definition.yaml"))
    assert download.status_code == 200
    assert download["Content-Type"] == "application/yaml"
    assert download["Content-Disposition"] == 'attachment; filename="foley-2023.yaml"'
    assert download.content.decode() == text


def test_a_changed_file_is_shown_as_its_changes_and_applied_as_checked(organizer_client, challenge):
    changed = definition.export(challenge).replace("weight_diversity: 0.5", "weight_diversity: 1")
    checked = organizer_client.post(
        page(challenge.slug, "definition/"), {"definition-file": upload(changed, "new.yaml")}
    )
    assert checked.status_code == 200
    html = checked.content.decode()
    assert "What applying new.yaml changes" in html
    assert '<span class="changed">~ scoring.weight_diversity: 0.5 -&gt; 1.0</span>' in html
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 0.5
    # The apply form carries the file as checked, its sha256, and the challenge's at the time.
    carried = {name: hidden(html, name) for name in ("text", "sha256", "base", "name")}
    assert carried["text"] == changed and carried["sha256"] == definition.sha256(changed)
    applied = organizer_client.post(page(challenge.slug, "definition/apply/"), carried)
    assert applied.status_code == 302 and applied["Location"] == page(challenge.slug)
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 1.0
    after = organizer_client.get(page(challenge.slug)).content.decode()
    assert "Applied new.yaml: 1 change: ~ scoring.weight_diversity: 0.5 -&gt; 1.0." in after, after
    # The same form again: the challenge is no longer the one the changes were checked against.
    stale = organizer_client.post(page(challenge.slug, "definition/apply/"), carried)
    assert stale.status_code == 409
    assert "The challenge changed since these changes were checked" in stale.content.decode()
    # A text other than the one checked is not applied.
    carried["base"] = definition.sha256(definition.export(challenge))
    carried["text"] = changed.replace("weight_diversity: 1", "weight_diversity: 3")
    tampered = organizer_client.post(page(challenge.slug, "definition/apply/"), carried)
    assert tampered.status_code == 400
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 1.0


def test_a_pasted_file_with_no_changes_says_so_plainly(organizer_client, challenge):
    text = definition.export(challenge)
    checked = organizer_client.post(
        page(challenge.slug, "definition/"), {"definition-text": text.replace("\n", "\r\n")}
    )
    html = checked.content.decode()
    assert (
        "<strong>No changes:</strong> the pasted text says what the challenge already is." in html
    )
    assert 'id="definition-apply"' not in html


def test_every_problem_is_shown_with_its_line_and_nothing_is_stored(organizer_client, challenge):
    wrong = (
        definition.export(challenge)
        .replace("name: Foley 2023", "name: Renamed")
        .replace("  channels: 1", "  chanels: 1")
        .replace("  weight_diversity: 0.5", "  weight_diversity: much")
    )
    lines = wrong.splitlines()
    refused = organizer_client.post(page(challenge.slug, "definition/"), {"definition-text": wrong})
    assert refused.status_code == 400
    panel = re.search(r'id="definition-refused">(.*?)</div>', refused.content.decode(), re.S)
    problems = re.findall(r"<li>(.*?)</li>", panel.group(1))
    assert len(problems) == 2, problems
    assert problems[0].startswith("clip.chanels: unknown key; the keys here are: duration_s")
    assert problems[0].endswith(f"(line {lines.index('  chanels: 1') + 1}, column 3)")
    assert problems[1].startswith("scoring.weight_diversity: input should be a valid number")
    assert f"(line {lines.index('  weight_diversity: much') + 1}, column 3)" in problems[1]
    assert Challenge.objects.get(pk=challenge.pk).name == "Foley 2023"
    # The form keeps what was pasted, to be corrected.
    assert "  chanels: 1" in unescape(refused.content.decode())
    both = organizer_client.post(
        page(challenge.slug, "definition/"),
        {"definition-text": wrong, "definition-file": upload(wrong)},
    )
    assert "Choose a file or paste its text, not both." in both.content.decode()
    other = create_challenge(name="Other", slug="other")
    elsewhere = organizer_client.post(
        page(challenge.slug, "definition/"), {"definition-file": upload(definition.export(other))}
    )
    assert "slug: the file defines challenge &#x27;other&#x27;" in elsewhere.content.decode()


def test_htmx_gets_the_result_alone_and_is_sent_to_the_page_once_applied(
    organizer_client, challenge
):
    changed = definition.export(challenge).replace("name: Foley 2023", "name: Foley 2023 bis")
    htmx = {"HTTP_HX_REQUEST": "true"}
    checked = organizer_client.post(
        page(challenge.slug, "definition/"), {"definition-text": changed}, **htmx
    )
    html = checked.content.decode()
    assert html.lstrip().startswith('<div class="definition-diff"') and "<html" not in html
    carried = {name: hidden(html, name) for name in ("text", "sha256", "base", "name")}
    applied = organizer_client.post(page(challenge.slug, "definition/apply/"), carried, **htmx)
    assert applied.status_code == 204 and applied["HX-Redirect"] == page(challenge.slug)
    assert Challenge.objects.get(pk=challenge.pk).name == "Foley 2023 bis"
    wrong = organizer_client.post(
        page(challenge.slug, "definition/"), {"definition-text": "slug: [1\n"}, **htmx
    )
    assert wrong.status_code == 200  # htmx swaps in only a 2xx answer
    assert 'id="definition-refused"' in wrong.content.decode()


def test_a_viewer_reads_and_downloads_the_file_but_does_not_change_it(challenge, organizer_of):
    viewer = Client()
    viewer.force_login(organizer_of(challenge, "viewer"))
    html = viewer.get(page(challenge.slug)).content.decode()
    assert 'id="definition-text"' in html and 'id="definition-read-only"' in html
    assert 'id="definition-form"' not in html
    assert viewer.get(page(challenge.slug, "definition.yaml")).status_code == 200
    text = definition.export(challenge).replace("name: Foley 2023", "name: Viewed")
    assert (
        viewer.post(page(challenge.slug, "definition/"), {"definition-text": text}).status_code
        == 403
    )
    assert Challenge.objects.get(pk=challenge.pk).name == "Foley 2023"
    outsider = Client()
    outsider.force_login(organizer_of(create_challenge(name="Theirs", slug="theirs")))
    assert outsider.get(page(challenge.slug, "definition.yaml")).status_code == 403
