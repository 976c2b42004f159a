"""The organizers' CSV of every submission goes through the one writer: a team's name, its
system's, its description and its sources, which the team chooses, come out as text in a
spreadsheet, never as a formula."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from stimuli.exports import read_cell
from stimuli.models import Team
from stimuli.submissions.services import submit
from tests.stimuli.test_exports import HOSTILE, unsafe_cells

from .conftest import baseline_archive, meta, upload

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_submissions_export_escapes_every_formula_cell(
    open_challenge, make_member, queued_only, media_root, organizer_client
):
    ann = make_member("Barkers", "ann")
    team = Team.objects.get(name="Barkers")
    team.name = HOSTILE[0]
    team.save()
    fields = {
        "description": HOSTILE[3],
        "external_data": True,
        "external_data_sources": HOSTILE[4],
    }
    submit(team, ann, meta(HOSTILE[1], **fields), upload(baseline_archive()))
    submit(team, ann, meta(HOSTILE[2], **fields), upload(baseline_archive()))

    response = organizer_client.get(reverse("submissions_organize:export", args=["teams"]))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    text = response.content.decode()
    assert unsafe_cells(text) == []
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == 2
    # Every hostile text is there, escaped, and reads back as the team wrote it.
    assert {read_cell(r["system"]) for r in rows} == {HOSTILE[1], HOSTILE[2]}
    assert {r["team"] for r in rows} == {"'" + HOSTILE[0]}
    assert {read_cell(r["description"]) for r in rows} == {HOSTILE[3]}
    assert {read_cell(r["external_data_sources"]) for r in rows} == {HOSTILE[4]}
    assert {r["version"] for r in rows} == {"1"}
