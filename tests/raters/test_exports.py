"""Every CSV the platform writes is safe to open in a spreadsheet: competitor-chosen team and
system names that look like formulas come out as text (OWASP's rule), through one writer."""

from __future__ import annotations

import csv
import io

import pytest

from raters import diversity, enrolment, preparation, sessions
from scoring import services as scoring_services
from scoring import tables as scoring_tables
from scoring.inputs import RATING_COLUMNS, read_csv
from stimuli.exports import read_cell, safe_cell, to_csv
from tests.listening_setup import answer_session, build_listening_challenge
from tests.simulate import simulate
from tests.stimuli.test_exports import HOSTILE, unsafe_cells

pytestmark = pytest.mark.django_db


def test_the_writer_escapes_formula_text_and_reads_it_back():
    rows = [{"name": name, "score": -1.5} for name in [*HOSTILE, "'quoted", "plain"]]
    text = to_csv(rows, ["name", "score"])
    assert unsafe_cells(text) == []
    read = list(csv.DictReader(io.StringIO(text, newline="")))
    assert read[0]["name"] == "'" + HOSTILE[0] and read[0]["score"] == "-1.5"
    assert [read_cell(r["name"]) for r in read] == [r["name"] for r in rows]
    assert safe_cell(None) == "" and safe_cell(-3) == -3 and safe_cell("plain") == "plain"


def test_formula_names_are_escaped_in_every_export(organizer_client, api_client, organizer):
    challenge = build_listening_challenge(slug="hostile", listened_fraction=0.0)
    preparation.set_open(challenge, True)
    teams = list(challenge.teams.order_by("pk"))
    for n, team in enumerate(teams):
        team.name = HOSTILE[n]
        team.save()
        system = team.systems.get()
        system.name = HOSTILE[-1 - n]
        system.save()
    member = enrolment.create_participant_account(
        challenge, username="member", password="member-pass-1", team=teams[0]
    )
    for rater in (member, enrolment.invite(challenge)):
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        answer_session(rater, sessions.next_session(rater).session)
    judge = enrolment.enrol_organizer_for_diversity(challenge, organizer)
    for trial in diversity.trials(judge):
        diversity.save_rating(judge, trial.token, diversity=6, key=trial.token)

    slug = challenge.slug
    exports = {
        "ratings page": organizer_client.get(f"/organize/{slug}/listen/ratings.csv"),
        "diversity page": organizer_client.get(f"/organize/{slug}/listen/diversity.csv"),
        "ratings API": api_client.get(f"/api/listen/challenges/{slug}/ratings/?format=csv"),
        "diversity API": api_client.get(f"/api/listen/challenges/{slug}/diversity/?format=csv"),
    }
    for what, response in exports.items():
        text = response.content.decode()
        assert response.status_code == 200, what
        assert "'" + HOSTILE[0] in text or "'" + HOSTILE[-1] in text, what  # the names are in it
        assert unsafe_cells(text) == [], what

    # The published result tables, from a run whose teams and systems have the same names.
    sim = simulate(systems_per_track=3, categories=3, sounds=4, raters=6, seed=21).inputs
    systems = sorted({row["system"] for row in sim.teams})
    names = {old: HOSTILE[i % len(HOSTILE)] + f" {i}" for i, old in enumerate(systems)}
    names |= {f"team{i}": f"=team{i}()" for i in range(len(systems))}
    for rows in (sim.ratings, sim.diversity, sim.fad, sim.teams):
        for row in rows:
            for key in ("system", "team", "rater_team"):
                if row.get(key):
                    row[key] = names.get(row[key], row[key])
    settings = scoring_services.scoring_settings(challenge)
    settings.bootstrap_samples = 100
    settings.save()
    snap = scoring_services.publish(challenge, organizer, sim)
    tables = [t.name for t in scoring_tables.tables(snap.result)]
    assert "leaderboard-A" in tables
    for name in tables:
        response = organizer_client.get(f"/results/{slug}/{snap.number}/download/{name}.csv")
        text = response.content.decode()
        assert response.status_code == 200, name
        assert unsafe_cells(text) == [], name
    leaderboard = organizer_client.get(f"/results/{slug}/{snap.number}/download/leaderboard-A.csv")
    assert "'=team" in leaderboard.content.decode()


def test_offline_scoring_reads_an_export_back_as_written(organizer_client, tmp_path):
    rows = [
        {c: "1" for c in RATING_COLUMNS} | {"system": HOSTILE[0], "rater_team": "'own"},
    ]
    path = tmp_path / "ratings.csv"
    path.write_text(to_csv(rows, RATING_COLUMNS))
    read = read_csv(path, RATING_COLUMNS)
    assert read[0]["system"] == HOSTILE[0] and read[0]["rater_team"] == "'own"
