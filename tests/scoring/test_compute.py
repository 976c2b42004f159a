"""The scoring rules on small hand-computed cases, the offline command and a simulated test."""

from __future__ import annotations

import csv
import io
import json

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy.stats import spearmanr

from raters.rules import DCASE_MISRATING
from scoring.compute import score
from scoring.inputs import (
    DIVERSITY_COLUMNS,
    FAD_COLUMNS,
    RATING_COLUMNS,
    TEAM_COLUMNS,
    Inputs,
    ScoringInputError,
)
from scoring.rules import Rules
from scoring.statistics import krippendorff_alpha_interval, spearman
from tests import ROOT_DIR
from tests.simulate import simulate

# Most hand-computed cases hold trials alone: their sessions carry no hidden anchors.
NO_BOOT = Rules(bootstrap=0, anchors_per_session=0)


def trial(rater, system, q, f, *, category="dog", stimulus=None, team="", session=None, track="A"):
    return {
        "rater": rater,
        "rater_team": team,
        "session": session or f"{rater}-{category}",
        "category": category,
        "system": system,
        "track": track,
        "stimulus": stimulus or f"{system}-{category}-1",
        "role": "trial",
        "quality": q,
        "fit": f,
    }


def anchor(rater, role, q, f, *, category="dog", session=None):
    return {
        "rater": rater,
        "rater_team": "",
        "session": session or f"{rater}-{category}",
        "category": category,
        "system": "",
        "track": "",
        "stimulus": f"anchor-{role}",
        "role": role,
        "quality": q,
        "fit": f,
    }


def div(rater, system, d, *, category="dog", team="", track="A"):
    return {
        "rater": rater,
        "rater_team": team,
        "category": category,
        "system": system,
        "track": track,
        "diversity": d,
    }


def teams(*systems, track="A"):
    return [{"system": s, "team": f"team-{s}", "track": track} for s in systems]


def fad(system, category, dev, ev, track="A"):
    return {"system": system, "track": track, "category": category, "fad_dev": dev, "fad_eval": ev}


def good_checks(rater, *, category="dog", misrated=0):
    """12 checks (4 per anchor type), the first `misrated` of them contradicting their type."""
    rows = []
    correct = {
        "anchor_hq_goodfit": (9, 9),
        "anchor_hq_poorfit": (9, 2),
        "anchor_lq_poorfit": (2, 2),
    }
    wrong = {
        "anchor_hq_goodfit": (9, 3),
        "anchor_hq_poorfit": (9, 7),
        "anchor_lq_poorfit": (7, 2),
    }
    roles = [r for r in correct for _ in range(4)]
    for i, role in enumerate(roles):
        q, f = wrong[role] if i < misrated else correct[role]
        rows.append(anchor(rater, role, q, f, category=category))
    return rows


def by_system(result, track="A"):
    return {row["system"]: row for row in result["tracks"][track]}


def test_self_ratings_are_removed_before_anything_is_computed():
    ratings = [
        trial("a", "S1", 10, 10, team="team-S1"),  # a's own system: removed
        trial("a", "S2", 4, 4, team="team-S1"),
        trial("b", "S1", 6, 6),
        trial("b", "S2", 6, 6),
    ]
    diversity = [div("a", "S1", 10, team="team-S1"), div("a", "S2", 2, team="team-S1")]
    diversity += [div("b", "S1", 4), div("b", "S2", 4)]
    result = score(Inputs(ratings, diversity, [], teams("S1", "S2")), NO_BOOT)
    rows = by_system(result)
    assert rows["S1"]["quality"] == 6 and rows["S1"]["fit"] == 6
    assert rows["S1"]["diversity"] == 4
    assert rows["S2"]["quality"] == 5 and rows["S2"]["diversity"] == 3
    assert result["counts"]["self_ratings_removed"] == 2
    assert result["self_ratings_removed"] == [{"rater": "a", "system": "S1", "ratings": 2}]
    # The rule is a setting: switched off, the self-rating counts.
    kept = score(
        Inputs(ratings, diversity, [], teams("S1", "S2")),
        Rules(bootstrap=0, anchors_per_session=0, remove_self_ratings=False),
    )
    assert by_system(kept)["S1"]["quality"] == 8


@pytest.mark.parametrize(("misrated", "excluded"), [(0, False), (4, False), (5, True), (12, True)])
def test_a_session_is_excluded_at_five_misrated_checks_of_twelve(misrated, excluded):
    ratings = good_checks("x", misrated=misrated) + good_checks("y")
    ratings += [trial("x", "S1", 1, 1), trial("y", "S1", 9, 9)]
    diversity = [div("x", "S1", 1), div("y", "S1", 9)]
    result = score(Inputs(ratings, diversity, [], teams("S1")), NO_BOOT)
    sessions = result["excluded_sessions"]
    if excluded:
        assert [(s["rater"], s["category"]) for s in sessions] == [("x", "dog")]
        assert sessions[0]["misrated"] == misrated and sessions[0]["checks"] == 12
        assert len(sessions[0]["reasons"]) == misrated
        assert by_system(result)["S1"]["quality"] == 9  # x's trials and diversity are gone
        assert by_system(result)["S1"]["diversity"] == 9
    else:
        assert sessions == []
        assert by_system(result)["S1"]["quality"] == 5
        assert by_system(result)["S1"]["diversity"] == 5


def test_exclusion_is_per_category_session():
    ratings = good_checks("x", category="dog", misrated=5) + good_checks("x", category="rain")
    ratings += [trial("x", "S1", 2, 2, category="dog"), trial("x", "S1", 8, 8, category="rain")]
    result = score(Inputs(ratings, [], [], teams("S1")), NO_BOOT)
    assert [(s["rater"], s["category"]) for s in result["excluded_sessions"]] == [("x", "dog")]
    row = by_system(result)["S1"]
    assert row["categories"]["dog"]["quality"] is None
    assert row["categories"]["rain"]["quality"] == 8


@pytest.mark.parametrize(
    ("role", "q", "f", "is_misrated"),
    [
        ("anchor_hq_goodfit", 6, 6, False),
        ("anchor_hq_goodfit", 5, 9, True),  # mid-scale on a scale expected high
        ("anchor_hq_goodfit", 3, 9, True),
        ("anchor_hq_goodfit", 9, 3, True),
        ("anchor_hq_poorfit", 9, 4, False),
        ("anchor_hq_poorfit", 9, 5, True),
        ("anchor_hq_poorfit", 9, 7, True),  # fit "high": the scales confused
        ("anchor_hq_poorfit", 3, 1, True),
        ("anchor_lq_poorfit", 4, 4, False),
        ("anchor_lq_poorfit", 5, 1, True),
        ("anchor_lq_poorfit", 7, 1, True),
        ("anchor_lq_poorfit", 1, 7, True),
    ],
)
def test_misrating_rules_and_thresholds(role, q, f, is_misrated):
    ratings = [anchor("x", role, q, f) for _ in range(5)] + [trial("x", "S1", 5, 5)]
    result = score(Inputs(ratings, [], [], teams("S1")), NO_BOOT)
    assert bool(result["excluded_sessions"]) is is_misrated


def test_thresholds_and_rules_are_settings():
    ratings = [anchor("x", "anchor_hq_poorfit", 9, 6) for _ in range(5)] + [trial("x", "S1", 5, 5)]
    inputs = Inputs(ratings, [], [], teams("S1"))
    # By default a fit of 6 on a poor-fit anchor is on the wrong half of the scale.
    assert score(inputs, NO_BOOT)["excluded_sessions"] != []
    # DCASE 2023 Task 7's own rule: only the opposite extreme (7 and up) misrates.
    dcase = {"bootstrap": 0, "anchors_per_session": 0, "misrating": DCASE_MISRATING}
    assert score(inputs, Rules(**dcase))["excluded_sessions"] == []
    assert score(inputs, Rules(**dcase, high=6))["excluded_sessions"] != []
    lenient = Rules(
        bootstrap=0, anchors_per_session=0, high=6, misrating={"anchor_hq_poorfit": ["quality_low"]}
    )
    assert score(inputs, lenient)["excluded_sessions"] == []
    assert score(inputs, Rules(**dcase, high=6, exclude_at=6))["excluded_sessions"] == []
    with pytest.raises(ScoringInputError, match="unknown condition"):
        Rules(misrating={"anchor_hq_poorfit": ["loud"]})
    with pytest.raises(ScoringInputError, match="unknown scoring settings"):
        Rules.from_dict({"threshold": 3})


def test_anchors_never_enter_a_systems_score_and_weights_are_applied():
    ratings = [
        trial("a", "S1", 2, 3, category="dog", stimulus="s1"),
        trial("b", "S1", 4, 5, category="dog", stimulus="s2"),
        trial("a", "S1", 9, 7, category="rain", stimulus="s3"),
        anchor("a", "anchor_hq_goodfit", 10, 10),
    ]
    diversity = [div("a", "S1", 8, category="dog"), div("a", "S1", 6, category="rain")]
    row = by_system(score(Inputs(ratings, diversity, [], teams("S1")), NO_BOOT))["S1"]
    # Mean over categories of the per-category means over ratings (not the pooled mean 5).
    assert row["quality"] == pytest.approx((3 + 9) / 2)
    assert row["fit"] == pytest.approx((4 + 7) / 2)
    assert row["diversity"] == pytest.approx(7)
    assert row["final"] == pytest.approx((6 + 5.5 + 0.5 * 7) / 2.5)
    assert row["categories"]["dog"]["final"] == pytest.approx((3 + 4 + 0.5 * 8) / 2.5)
    other = Rules(bootstrap=0, anchors_per_session=0, weight_diversity=2)
    row = by_system(score(Inputs(ratings, diversity, [], teams("S1")), other))["S1"]
    assert row["final"] == pytest.approx((6 + 5.5 + 2 * 7) / 4)


def test_ranks_per_track_with_tie_breaks():
    ratings = [
        trial("a", "X", 6, 6),  # final (6 + 6 + 0.5*4) / 2.5 = 5.6, quality-fit mean 6
        trial("a", "Y", 5, 5),  # final (5 + 5 + 0.5*8) / 2.5 = 5.6, quality-fit mean 5
        trial("a", "Z", 5, 5),  # same as Y and W; lower FAD-Eval than W
        trial("a", "W", 5, 5),
        trial("a", "V", 5, 5),  # the same as W in everything: shares its rank
        trial("a", "T", 1, 1, track="B"),
    ]
    diversity = [div("a", "X", 4), div("a", "Y", 8), div("a", "Z", 8), div("a", "W", 8)]
    diversity += [div("a", "V", 8), div("a", "T", 2, track="B")]
    fads = [fad("Y", "dog", 1, 5), fad("Z", "dog", 9, 3), fad("W", "dog", 1, 4)]
    fads += [fad("V", "dog", 1, 4)]
    team_rows = teams("X", "Y", "Z", "W", "V") + teams("T", track="B")
    result = score(Inputs(ratings, diversity, fads, team_rows), NO_BOOT)
    order = [(r["system"], r["rank"]) for r in result["tracks"]["A"]]
    assert order == [("X", 1), ("Z", 2), ("V", 3), ("W", 3), ("Y", 5)]
    assert [(r["system"], r["rank"]) for r in result["tracks"]["B"]] == [("T", 1)]


def _two_rater_inputs():
    rng = np.random.default_rng(5)
    ratings, diversity = [], []
    for r in range(6):
        for s in ("S1", "S2", "S3"):
            diversity.append(div(f"r{r}", s, int(rng.integers(1, 11))))
            for k in range(5):
                q, f = rng.integers(1, 11, 2)
                ratings.append(trial(f"r{r}", s, int(q), int(f), stimulus=f"{s}-{k}"))
    return Inputs(ratings, diversity, [], teams("S1", "S2", "S3"))


@pytest.mark.parametrize("method", ["jackknife-t", "bootstrap"])
def test_intervals_are_reproducible_and_contain_the_estimate(method):
    inputs = _two_rater_inputs()
    first = score(inputs, Rules(bootstrap=300, anchors_per_session=0, seed=7, intervals=method))
    again = score(inputs, Rules(bootstrap=300, anchors_per_session=0, seed=7, intervals=method))
    other = score(inputs, Rules(bootstrap=300, anchors_per_session=0, seed=8, intervals=method))
    assert first == again
    # The bootstrap draws by its seed; the jackknife draws nothing.
    assert (first["tracks"] != other["tracks"]) == (method == "bootstrap")
    for row in first["tracks"]["A"]:
        for scale in ("quality", "fit", "diversity", "final"):
            lo, hi = row[f"{scale}_ci"]
            assert lo <= row[scale] <= hi
            assert lo < hi
            cell = row["categories"]["dog"]
            assert cell[f"{scale}_ci"][0] <= cell[scale] <= cell[f"{scale}_ci"][1]
    for pair in first["pairs"]["A"]:
        assert 0 <= pair["probability"] <= 1
    assert first["tracks"]["A"][-1]["p_above_next"] is None


def test_probability_of_order_is_one_for_a_clear_gap_and_about_half_for_a_tie():
    ratings, diversity = [], []
    for r in range(8):
        for k in range(4):
            ratings.append(trial(f"r{r}", "Top", 9, 9, stimulus=f"t{k}"))
            ratings.append(trial(f"r{r}", "Mid", 5 + (r + k) % 2, 5, stimulus=f"m{k}"))
            ratings.append(trial(f"r{r}", "Low", 5 + (r + k + 1) % 2, 5, stimulus=f"l{k}"))
    result = score(
        Inputs(ratings, diversity, [], teams("Top", "Mid", "Low")),
        Rules(bootstrap=400, anchors_per_session=0),
    )
    pairs = result["pairs"]["A"]
    assert pairs[0]["upper"] == "Top" and pairs[0]["probability"] == 1.0
    assert 0.2 < pairs[1]["probability"] < 0.8


def test_spearman_matches_scipy_including_ties():
    rng = np.random.default_rng(1)
    for _ in range(20):
        x = rng.integers(0, 5, 9).astype(float)
        y = x + rng.normal(0, 2, 9)
        expected = spearmanr(x, y).statistic
        if np.isnan(expected):
            continue
        assert spearman(x, y) == pytest.approx(expected, abs=1e-12)


def test_fad_ranking_correlations_match_scipy():
    sim = simulate(systems_per_track=6, tracks=("A",), categories=3, sounds=4, raters=6, seed=3)
    result = score(sim.inputs, NO_BOOT)
    rows = result["tracks"]["A"]
    for name in ("fad_eval", "fad_dev"):
        expected = spearmanr([r[name] for r in rows], [r["rank"] for r in rows]).statistic
        assert result["analyses"]["fad_spearman"]["A"][name] == pytest.approx(expected, abs=1e-4)


def test_krippendorff_alpha_matches_the_reference_implementation():
    rng = np.random.default_rng(2)
    units, values = [], []
    matrix = np.full((5, 30), np.nan)
    for u in range(30):
        true = rng.uniform(1, 10)
        for r in rng.choice(5, size=int(rng.integers(1, 6)), replace=False):
            v = float(np.clip(np.rint(true + rng.normal(0, 1.5)), 1, 10))
            matrix[r, u] = v
            units.append(u)
            values.append(v)
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement="interval")
    assert krippendorff_alpha_interval(units, values) == pytest.approx(expected, abs=1e-9)


def test_analyses_report_anchor_means_and_correlations():
    ratings = [
        *good_checks("x"),
        trial("x", "S1", 2, 3, stimulus="a"),
        trial("x", "S1", 4, 4, stimulus="b"),
        trial("x", "S1", 6, 8, stimulus="c"),
    ]
    result = score(Inputs(ratings, [], [], teams("S1")), NO_BOOT)
    anchors = result["analyses"]["anchors"]
    assert anchors["anchor_hq_poorfit"] == {"quality": 9, "fit": 2, "n": 4}
    expected = np.corrcoef([2, 4, 6], [3, 4, 8])[0, 1]
    assert result["analyses"]["quality_fit"]["dog"]["trials"] == pytest.approx(expected, abs=1e-4)


def _write(path, columns, rows):
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _csvs(tmp_path, inputs):
    return {
        "ratings": _write(tmp_path / "ratings.csv", RATING_COLUMNS, inputs.ratings),
        "diversity": _write(tmp_path / "diversity.csv", DIVERSITY_COLUMNS, inputs.diversity),
        "fad": _write(tmp_path / "fad.csv", FAD_COLUMNS, inputs.fad),
        "teams": _write(tmp_path / "teams.csv", TEAM_COLUMNS, inputs.teams),
    }


def test_score_offline_prints_one_json_object_of_the_documented_shape(tmp_path):
    sim = simulate(systems_per_track=3, categories=2, sounds=3, raters=5, seed=4)
    paths = _csvs(tmp_path, sim.inputs)
    out = io.StringIO()
    call_command(
        "score_offline",
        *[f"--{k}={v}" for k, v in paths.items()],
        "--bootstrap=50",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert set(result["tracks"]) == {"A", "B"}
    for rows in result["tracks"].values():
        assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
        for row in rows:
            assert {"system", "rank", "quality", "fit", "diversity", "final"} <= set(row)
    assert result["excluded_sessions"]
    for session in result["excluded_sessions"]:
        assert {"rater", "category"} <= set(session)
    # The command and the function give the same result from the same rows.
    direct = score(sim.inputs, Rules(bootstrap=50))
    assert result["tracks"] == json.loads(json.dumps(direct["tracks"]))
    assert result["inputs"] == direct["inputs"]


def test_score_offline_reports_bad_input_clearly(tmp_path):
    sim = simulate(systems_per_track=2, categories=1, sounds=2, raters=3, seed=4)
    paths = _csvs(tmp_path, sim.inputs)
    _write(paths["fad"], ("system", "track", "category", "fad_dev"), [])
    args = [f"--{k}={v}" for k, v in paths.items()]
    with pytest.raises(CommandError, match=r"fad.csv: missing column\(s\) fad_eval"):
        call_command("score_offline", *args, stdout=io.StringIO())
    paths = _csvs(tmp_path, sim.inputs)
    bad = [dict(sim.inputs.ratings[0], quality="good")]
    _write(paths["ratings"], RATING_COLUMNS, bad)
    with pytest.raises(CommandError, match="ratings row 1: 'good' is not a number"):
        call_command("score_offline", *args, stdout=io.StringIO())
    with pytest.raises(CommandError, match="cannot be read"):
        call_command("score_offline", *args[:3], f"--teams={tmp_path / 'none.csv'}")


def test_a_simulated_dcase_sized_test_recovers_the_true_ranking():
    sim = simulate(seed=11)  # 8 systems, 7 categories, 20 sounds, 10 raters (one careless)
    result = score(sim.inputs, Rules(bootstrap=200))
    careless = sim.careless[0]
    excluded = [s for s in result["excluded_sessions"] if s["rater"] == careless]
    assert len(excluded) >= 5
    assert all(s["rater"] == careless for s in result["excluded_sessions"])
    assert result["counts"]["self_ratings_removed"] > 0
    for track, rows in result["tracks"].items():
        estimated = [r["final"] for r in rows]
        truth = [sim.true_final[r["system"]] for r in rows]
        assert spearmanr(estimated, truth).statistic > 0.7, track
        for row in rows:
            lo, hi = row["final_ci"]
            assert lo <= row["final"] <= hi
    assert result["analyses"]["agreement"]["quality"] > 0.3
    anchors = result["analyses"]["anchors"]
    assert anchors["anchor_hq_poorfit"]["quality"] > 7 > anchors["anchor_hq_poorfit"]["fit"]


def test_systems_without_ratings_are_listed_apart_with_their_fad():
    ratings = [trial("a", "S1", 5, 5)]
    fads = [fad("S1", "dog", 1, 2), fad("S2", "dog", 3, 4), fad("S2", "rain", 5, 6)]
    result = score(Inputs(ratings, [], fads, teams("S1", "S2")), NO_BOOT)
    assert [r["system"] for r in result["tracks"]["A"]] == ["S1"]
    (unrated,) = result["unrated_systems"]["A"]
    assert unrated["system"] == "S2" and unrated["team"] == "team-S2"
    assert unrated["fad_dev"] == 4 and unrated["fad_eval"] == 5
    assert unrated["fad_eval_min"] == 4 and unrated["fad_eval_max"] == 6


def test_offline_scoring_runs_without_django_settings(tmp_path):
    import os
    import subprocess
    import sys

    sim = simulate(systems_per_track=2, categories=2, sounds=2, raters=4, seed=6)
    paths = _csvs(tmp_path, sim.inputs)
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    args = [f"--{k}={v}" for k, v in paths.items()]
    root = ROOT_DIR
    done = subprocess.run(
        [sys.executable, "-m", "scoring.offline", *args, "--bootstrap=20", "--seed=3"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout)
    expected = score(sim.inputs, Rules(bootstrap=20, seed=3))
    assert result["tracks"] == json.loads(json.dumps(expected["tracks"]))
    assert "django" not in done.stderr.lower()
    (tmp_path / "rules.json").write_text('{"exclude_at": "five", "colour": 1}')
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "scoring.offline",
            *args,
            f"--settings-json={tmp_path / 'rules.json'}",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "unknown scoring settings: colour" in bad.stderr


def test_a_system_missing_ratings_others_have_is_listed_apart_not_ranked():
    ratings = [trial("a", s, 6, 6, category=c) for s in ("S1", "S2") for c in ("dog", "rain")]
    ratings += [trial("a", "S3", 9, 9, category="rain")]  # never heard in "dog"
    diversity = [div("d", s, 5, category=c) for s in ("S1", "S3") for c in ("dog", "rain")]
    diversity += [div("d", "S2", 5, category="dog")]  # no diversity in "rain"
    diversity += [div("d", "S4", 10, category=c) for c in ("dog", "rain")]  # diversity alone
    result = score(Inputs(ratings, diversity, [], teams("S1", "S2", "S3", "S4")), NO_BOOT)
    assert [r["system"] for r in result["tracks"]["A"]] == ["S1"]
    missing = {r["system"]: r["missing"] for r in result["incomplete_systems"]["A"]}
    assert missing == {
        "S2": "diversity in rain",
        "S3": "quality and fit in dog",
        "S4": "quality and fit in dog, rain",
    }


def test_partial_sessions_are_held_to_the_share_of_misrated_checks():
    rules = Rules(bootstrap=0)  # 5 of 12 checks exclude a session
    checks = good_checks("p", misrated=3)[:6]  # left after 6 checks, 3 of them misrated
    kept = good_checks("k", misrated=4)  # complete, 4 of 12 misrated: kept
    ratings = checks + kept + [trial(r, "S1", 8, 8) for r in ("p", "k")]
    ratings += [trial("u", "S1", 1, 1)]  # a session left before its first check
    result = score(Inputs(ratings, [], [], teams("S1")), rules)
    excluded = {e["rater"]: e for e in result["excluded_sessions"]}
    assert set(excluded) == {"p", "u"}
    assert (excluded["p"]["checks"], excluded["p"]["misrated"]) == (6, 3)
    assert excluded["u"]["reasons"] == ["no anchor answered"]
    assert result["tracks"]["A"][0]["quality"] == 8.0


@pytest.mark.parametrize(("column", "value"), [("quality", 11), ("fit", -1), ("diversity", 10.5)])
def test_ratings_outside_the_scale_are_refused(column, value):
    row = trial("a", "S1", 5, 5) if column != "diversity" else div("a", "S1", 5)
    row[column] = value
    ratings, diversity = ([row], []) if column != "diversity" else ([], [row])
    with pytest.raises(ScoringInputError, match="outside the scale"):
        score(Inputs(ratings, diversity, [], teams("S1")), NO_BOOT)


def test_a_team_members_rating_of_a_system_without_a_team_is_refused():
    ratings = [trial("a", "S9", 5, 5, team="team-S1")]
    with pytest.raises(ScoringInputError, match="not in the teams table"):
        score(Inputs(ratings, [], [], teams("S1")), NO_BOOT)


def test_intervals_hold_diversity_raters_in_every_replicate():
    # Many listeners, two diversity raters: drawn from one pool, some replicates would hold no
    # diversity rater, and their finals would silently become (quality + fit) / 2.
    ratings, diversity = [], []
    for r in range(20):
        for k in range(4):
            ratings.append(trial(f"r{r}", "S1", 5, 5, stimulus=f"s1-{k}"))
            ratings.append(trial(f"r{r}", "S2", 6, 6, stimulus=f"s2-{k}"))
    for d in ("d1", "d2"):
        diversity += [div(d, "S1", 6), div(d, "S2", 3)]
    result = score(
        Inputs(ratings, diversity, [], teams("S1", "S2")),
        Rules(bootstrap=400, anchors_per_session=0),
    )
    rows = by_system(result)
    assert rows["S1"]["final"] == 5.2
    # Every rating agrees: no spread to build an interval on, so none is shown (a zero-width
    # interval would claim the value exact), and the reason says so; the final rests on two
    # raters of diversity, too few by the design whatever they answered.
    for row in rows.values():
        assert row["quality_ci"] is None and "all agree" in row["ci_withheld"]["quality"]
        assert row["final_ci"] is None
        assert row["ci_withheld"]["final"] == "2 raters: too few for an honest interval"


def _few_diversity_raters(n: int) -> Inputs:
    """Many raters of trials, `n` organizers rating diversity alone."""
    rng = np.random.default_rng(n)
    ratings, diversity = [], []
    for r in range(12):
        for s in ("S1", "S2", "S3"):
            for k in range(4):
                q, f = rng.integers(2, 9, 2)
                ratings.append(trial(f"r{r}", s, int(q), int(f), stimulus=f"{s}-{k}"))
    for r in range(n):
        for s in ("S1", "S2", "S3"):
            diversity.append(div(f"org{r}", s, int(rng.integers(2, 9))))
    return Inputs(ratings, diversity, [], teams("S1", "S2", "S3"))


def test_t_intervals_widen_with_few_raters_and_are_withheld_with_two():
    rules = Rules(bootstrap=100, anchors_per_session=0)
    four = {r["system"]: r for r in score(_few_diversity_raters(4), rules)["tracks"]["A"]}
    row = four["S1"]
    assert row["ci_withheld"] == {}
    lo, hi = row["diversity_ci"]
    assert lo < row["diversity"] < hi
    # With 4 raters the half-width is t(3) = 3.18 standard errors of the mean of 4 ratings.
    values = np.array([float(d["diversity"]) for d in _few_diversity_raters(4).diversity
                       if d["system"] == "S1"])  # fmt: skip
    se = values.std(ddof=1) / 2
    assert (hi - lo) / 2 == pytest.approx(3.182446 * se, rel=1e-4)
    # Two organizers: no honest interval of diversity, and the reason. (The final score mixes
    # in 12 raters of trials; its degrees of freedom say how much.)
    two = {r["system"]: r for r in score(_few_diversity_raters(2), rules)["tracks"]["A"]}
    row = two["S1"]
    assert row["diversity_ci"] is None
    assert "too few for an honest interval" in row["ci_withheld"]["diversity"]
    assert row["quality_ci"] is not None and "quality" not in row["ci_withheld"]
    # One organizer: every cell of diversity rests on one rater.
    one = score(_few_diversity_raters(1), rules)["tracks"]["A"][0]
    assert "one rater or sound" in one["ci_withheld"]["diversity"]


def test_t_probability_of_order_cancels_what_raters_share():
    # Every rater rates S1 exactly one point above S2, however lenient: the order is certain.
    ratings, diversity = [], []
    for r, lenience in enumerate((0, 3, -2, 1)):
        for s, base in (("S1", 6), ("S2", 5)):
            for k in range(3):
                ratings.append(
                    trial(f"r{r}", s, base + lenience, base + lenience, stimulus=f"{s}{k}")
                )
            diversity.append(div(f"r{r}", s, base + lenience))
    result = score(Inputs(ratings, diversity, [], teams("S1", "S2")),
                   Rules(bootstrap=10, anchors_per_session=0))  # fmt: skip
    assert result["pairs"]["A"][0]["probability"] == 1.0
    lo, hi = result["tracks"]["A"][0]["final_ci"]
    assert hi - lo > 2  # the level itself is uncertain: raters disagree by 5 points


def test_rating_intervals_stay_on_the_scale_and_the_design_decides_withholding():
    # A system near the ceiling rated by 4 raters who disagree: its t interval would reach past
    # 10; cut to the scale. A system with 2 sounds per category: withheld whatever its sounds did.
    ratings, diversity = [], []
    for r, lenience in enumerate((0, -3, 1, -1)):
        for k in range(4):
            top = min(10, 10 + lenience + (k % 2))
            ratings.append(trial(f"r{r}", "S1", top, top, stimulus=f"S1-{k}"))
        for k in range(2):  # two sounds that agree exactly
            ratings.append(trial(f"r{r}", "S2", 5 + lenience, 5 + lenience, stimulus=f"S2-{k}"))
        for s in ("S1", "S2"):
            diversity.append(div(f"r{r}", s, 6))  # every organizer gives the same integer
    result = score(Inputs(ratings, diversity, [], teams("S1", "S2")),
                   Rules(bootstrap=10, anchors_per_session=0))  # fmt: skip
    rows = by_system(result)
    for scale in ("quality", "fit", "final"):
        low, high = rows["S1"][f"{scale}_ci"]
        assert 0 <= low < rows["S1"][scale] < high == 10
    assert rows["S2"]["quality_ci"] is None
    assert "2 sounds: too few" in rows["S2"]["ci_withheld"]["quality"]
    for row in rows.values():
        assert row["diversity_ci"] is None and "all agree" in row["ci_withheld"]["diversity"]
