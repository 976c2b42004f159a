"""The pairs design's votes to published results: the rater-quality rules remove the sessions they
exclude, self-votes go through the teams table, both questions are fitted together and each
alone, and `score_offline --pairs` on the votes export prints the server's `pairwise` section."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from raters import enrolment, preparation, selectors, sessions
from raters.columns import SCORED_VOTE_COLUMNS, VOTE_COLUMNS
from raters.vote_rules import PAIR
from scoring import services
from scoring.models import ScoringSettings
from scoring.offline import run
from scoring.pairwise import PAIR_COLUMNS, score_pairs
from scoring.rules import Rules
from scoring.tables import table
from scoring.votes import score_votes
from stimuli.exports import to_csv
from stimuli.selectors import team_rows
from tests.pairs_setup import build_pairs_challenge, crowd_voting_a, vote_session, voters_by_name


def test_the_votes_export_begins_with_the_pairwise_columns():
    assert SCORED_VOTE_COLUMNS[: len(PAIR_COLUMNS)] == PAIR_COLUMNS
    assert VOTE_COLUMNS[: len(SCORED_VOTE_COLUMNS)] == SCORED_VOTE_COLUMNS


def _row(rater: str, left: str, right: str, winner: str, question: str, **extra) -> dict:
    return {
        "rater": rater,
        "rater_team": extra.pop("team", ""),
        "session": f"{rater}-1",
        "category": "dog",
        "track": "A",
        "left_system": left,
        "right_system": right,
        "left_stimulus": f"{left}/dog/1",
        "right_stimulus": f"{right}/dog/2",
        "winner": winner,
        "question": question,
        "role": PAIR,
        "rater_kind": extra.pop("kind", "invited"),
        "heard_fraction": 1.0,
        "answer_s": 9.0,
        **extra,
    }


def _panel() -> list[dict]:
    """S1 above S2 above S3 for eight invited raters, one crowd worker voting A always."""
    rows = []
    order = {"S1": 0, "S2": 1, "S3": 2}
    for r in range(8):
        for n, (left, right) in enumerate([("S1", "S2"), ("S3", "S1"), ("S2", "S3")] * 3):
            better = "left" if order[left] < order[right] else "right"
            quality = "tie" if (r + n) % 5 == 0 else better
            fit = better if (r + n) % 4 else ("right" if better == "left" else "left")
            rows.append(_row(f"R{r}", left, right, quality, "quality"))
            rows.append(_row(f"R{r}", left, right, fit, "fit"))
    for left, right in [("S3", "S1"), ("S2", "S1"), ("S3", "S2")] * 4:
        for question in ("quality", "fit"):
            rows.append(_row("RX", left, right, "left", question, kind="crowd"))
    return rows


def test_sessions_the_rules_exclude_leave_the_fit_and_self_votes_go():
    rows = _panel()
    rules = Rules(bootstrap=0)
    section = score_votes(rows, [], rules)
    (excluded,) = section["excluded_sessions"]
    assert excluded["session"] == "RX-1" and excluded["reasons"][0] == (
        "same_side: A (left) on 24 of 24 answers"
    )
    # Always A, where S3 is mostly A: the favouritism rule reads that as a lift of S3 too.
    assert excluded["reasons"][1].startswith("favouritism: lifts system S3")
    assert section["votes_excluded"] == 24
    kept = [r for r in rows if r["rater"] != "RX"]
    assert section["tracks"] == score_pairs(kept, replicates=0)["tracks"]
    ranked = [e["system"] for e in section["tracks"]["A"]["systems"]]
    assert ranked == ["S1", "S2", "S3"]
    for question in ("quality", "fit"):
        alone = [r for r in kept if r["question"] == question]
        assert section["questions"][question] == score_pairs(alone, replicates=0)["tracks"]
    # A rater of S1's team: their votes on S1 are self-votes.
    teams = [{"system": "S1", "team": "T1"}, {"system": "S2", "team": "T2"}]
    for row in rows:
        if row["rater"] == "R0":
            row["rater_team"] = "T1"
    section = score_votes(rows, teams, rules)
    # Two of R0's three pairs hold S1, each asked twice (quality, fit) three times.
    assert section["self_votes_removed"] == 2 * 2 * 3


def test_a_hand_made_pairwise_table_is_scored_as_it_is():
    rows = [{c: r[c] for c in PAIR_COLUMNS} for r in _panel()]
    section = score_votes(rows, [], Rules(bootstrap=0))
    assert section["excluded_sessions"] == [] and "questions" not in section
    assert section["tracks"] == score_pairs(rows, replicates=0)["tracks"]


@pytest.mark.django_db
def test_published_votes_are_the_servers_and_score_offline_prints_the_same(tmp_path, organizer):
    challenge = build_pairs_challenge(slug="ab-scored", categories=1, pairs_per_session=6)
    preparation.set_open(challenge, True)
    ScoringSettings.objects.get_or_create(challenge=challenge)
    ScoringSettings.objects.filter(challenge=challenge).update(bootstrap_samples=20)
    voters_by_name(challenge)
    crowd = crowd_voting_a(challenge)

    inputs = services.collect_inputs(challenge)
    assert len(inputs.pairs) == 5 * 6 * 2
    row = inputs.pairs[0]
    assert set(row) == set(VOTE_COLUMNS)
    assert row["left_plays"] == 0 and row["heard_fraction"] == 0.0 and row["role"] == PAIR
    assert "votes" in inputs.hashes()
    result = services.preview(challenge, organizer, inputs)
    section = result["pairwise"]
    assert [e["session"] for e in section["excluded_sessions"]] == [
        f"{crowd.code}-{crowd.sessions.get().pk}"
    ]
    assert section["votes_excluded"] == 12 and set(section["questions"]) == {"fit", "quality"}
    # The published tables: a leaderboard per track, and its win probabilities.
    for track in section["tracks"]:
        board = table(result, f"leaderboard-pairwise-{track}")
        assert [r["system"] for r in board.rows] == [
            e["system"] for e in section["tracks"][track]["systems"]
        ]
        assert "strength_low" in board.to_csv("final").splitlines()[0]
        assert table(result, f"pairwise-win-probability-{track}") is not None

    # The organizer's votes download, scored offline: the server's section.
    votes_csv = tmp_path / "votes.csv"
    votes_csv.write_text(to_csv(selectors.export_vote_rows(challenge), VOTE_COLUMNS))
    teams_csv = tmp_path / "teams.csv"
    teams_csv.write_text(to_csv(team_rows(challenge), ("system", "team", "track")))
    # The scoring settings as published (the test's rater-quality rules among them).
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(services.rules_for(challenge).to_dict()))
    offline = json.loads(run({"pairs": votes_csv, "teams": teams_csv, "settings_json": settings}))
    assert offline["pairwise"] == json.loads(json.dumps(section))


@pytest.mark.django_db
def test_the_organizers_votes_download_holds_every_vote_with_its_listening(organizer_client):
    challenge = build_pairs_challenge(slug="ab-download", categories=1, pairs_per_session=3)
    preparation.set_open(challenge, True)
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    vote_session(rater, sessions.next_session(rater).session, lambda pair: ("right", "tie"))
    response = organizer_client.get(f"/organize/{challenge.slug}/listen/votes.csv")
    assert response.status_code == 200
    lines = list(csv.DictReader(response.content.decode().splitlines()))
    assert list(lines[0]) == list(VOTE_COLUMNS) and len(lines) == 6
    assert {(r["question"], r["winner"]) for r in lines} == {("quality", "right"), ("fit", "tie")}
    assert all(r["left_system"] and r["right_system"] and r["answer_s"] for r in lines)
    assert Path(f"{challenge.slug}-votes.csv").name in response["Content-Disposition"]


def test_a_hidden_anchors_a_b_trials_are_judged_never_fitted(tmp_path):
    rows = _panel()
    anchor = {
        **_row("R0", "", "S2", "right", "fit"),
        "role": "anchor_pair",
        "expected": "right",
        "left_stimulus": "anchor/7",
    }
    rows.append(anchor)
    section = score_votes(rows, [], Rules(bootstrap=0))
    kept = [r for r in rows if r["rater"] != "RX" and r["role"] == PAIR]
    assert section["tracks"] == score_pairs(kept, replicates=0)["tracks"]
    # Read back from the export's file: an anchor's side has no system.
    path = tmp_path / "votes.csv"
    path.write_text(to_csv(rows, [*VOTE_COLUMNS]))
    out = json.loads(run({"pairs": path, "bootstrap": 0}))
    assert out["pairwise"]["tracks"] == json.loads(json.dumps(section["tracks"]))


def _farm_panel(favouritism: bool = True) -> tuple[list[dict], set[str]]:
    """Twelve invited raters voting by four systems' strengths (each with a taste of their own,
    ties now and then), and a farm of three crowd workers voting for the weakest system, S3,
    whenever it is on a side (at random otherwise): the farm's rows, and the farm."""
    rng = np.random.default_rng(7)
    strength = {"S0": 1.0, "S1": 0.5, "S2": 0.0, "S3": -1.0}
    pairs = [(a, b) for a in strength for b in strength if a < b]
    rows = []
    for r in range(15):
        farm = r >= 12
        taste = {s: v + rng.normal(0, 0.4) for s, v in strength.items()}
        for n in range(16):
            left, right = pairs[(r + n) % len(pairs)][:: 1 if n % 2 else -1]
            for question in ("quality", "fit"):
                if farm and "S3" in (left, right):
                    winner = "left" if left == "S3" else "right"
                elif farm:
                    winner = str(rng.choice(["left", "right", "tie"]))
                else:
                    p_left = 1 / (1 + np.exp(taste[right] - taste[left]))
                    winner = (
                        "tie"
                        if rng.random() < 0.15
                        else ("left" if rng.random() < p_left else "right")
                    )
                rater = f"F{r}" if farm else f"R{r}"
                rows.append(
                    _row(rater, left, right, winner, question, kind="crowd" if farm else "invited")
                )
    return rows, {"F12", "F13", "F14"}


def _ranked(section: dict) -> list[str]:
    return [e["system"] for e in section["tracks"]["A"]["systems"]]


def test_a_farm_voting_for_its_system_is_named_and_buys_no_strength():
    rows, farm = _farm_panel()
    rules = Rules(bootstrap=0)
    section = score_votes(rows, [], rules)
    named = {e["rater"]: e for e in section["favouritism"]["raters"]}
    assert farm <= set(named), named
    for rater in farm:
        assert named[rater]["system"] == "S3" and named[rater]["action"] == "exclude"
        assert "lifts system S3 above the other raters" in named[rater]["reason"]
    assert len(set(named) - farm) <= 1, named
    assert {e["rater"] for e in section["excluded_sessions"]} == farm
    honest = score_votes([r for r in rows if r["rater"] not in farm], [], rules)
    off = Rules(bootstrap=0, rater_rules={"favouritism": {"action": "off", "crowd_action": "off"}})
    bought = score_votes(rows, [], off)

    def s3(section: dict) -> float:
        return next(e["strength"] for e in section["tracks"]["A"]["systems"] if e["system"] == "S3")

    # Without the rule the farm lifts its system's strength; with it, the fit is the honest one.
    assert s3(bought) > s3(honest) + 0.3
    assert section["tracks"] == honest["tracks"] and _ranked(section)[-1] == "S3"
