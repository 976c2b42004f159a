"""Pairwise A/B votes: Davidson's Bradley-Terry model with ties, fitted by `score_offline
--pairs` (scoring/pairwise.py), against a maximum-likelihood fit written here independently
(the log-likelihood summed vote by vote, the optimiser's own numerical gradient), on simulated
votes with ties; self-votes removed, intervals from a bootstrap over raters, ranks only from
enough votes, and bad rows named all at once."""

from __future__ import annotations

import csv
import itertools
import json
import math
import random

import numpy as np
import pytest
from scipy import optimize

from scoring.inputs import ScoringInputError
from scoring.offline import run
from scoring.pairwise import PAIR_COLUMNS, fit, score_pairs, votes_of

TRUE = {"S1": 0.8, "S2": 0.3, "S3": 0.0, "S4": -0.4, "S5": -0.7}
NU = 0.6


def simulate(seed: int, raters: int = 40, votes_each: int = 30, team_of=None) -> list[dict]:
    """Votes drawn from the Davidson model itself (every pair of systems, sides at random)."""
    rng = random.Random(seed)
    pairs = list(itertools.combinations(TRUE, 2))
    rows = []
    for r in range(raters):
        for _ in range(votes_each):
            left, right = rng.sample(rng.choice(pairs), 2)
            a, b = math.exp(TRUE[left]), math.exp(TRUE[right])
            tie = NU * math.sqrt(a * b)
            u = rng.random() * (a + b + tie)
            winner = "left" if u < a else "right" if u < a + b else "tie"
            rows.append(
                {
                    "rater": f"r{r}",
                    "rater_team": (team_of or {}).get(r, ""),
                    "category": "rain",
                    "track": "A",
                    "left_system": left,
                    "right_system": right,
                    "left_stimulus": f"{left}-{rng.randrange(20)}",
                    "right_stimulus": f"{right}-{rng.randrange(20)}",
                    "winner": winner,
                }
            )
    return rows


def independent_fit(rows: list[dict], systems: list[str]) -> tuple[np.ndarray, float]:
    """Davidson's likelihood written out per vote; every theta free with a sum-zero penalty,
    nu on the log scale, Nelder-Mead then BFGS on numerical gradients."""

    def minus_log_likelihood(x):
        theta = dict(zip(systems, x[:-1], strict=True))
        nu = math.exp(x[-1])
        total = 0.0
        for row in rows:
            pl, pr = math.exp(theta[row["left_system"]]), math.exp(theta[row["right_system"]])
            tie = nu * math.sqrt(pl * pr)
            outcome = {"left": pl, "right": pr, "tie": tie}[row["winner"]]
            total += math.log(outcome / (pl + pr + tie))
        return -total + 100.0 * sum(x[:-1]) ** 2

    x = np.zeros(len(systems) + 1)
    x = optimize.minimize(minus_log_likelihood, x, method="Nelder-Mead",
                          options={"maxiter": 4000, "xatol": 1e-6, "fatol": 1e-9}).x  # fmt: skip
    x = optimize.minimize(minus_log_likelihood, x, method="BFGS", options={"gtol": 1e-7}).x
    theta = x[:-1] - x[:-1].mean()
    return theta, math.exp(x[-1])


@pytest.mark.parametrize("seed", [1, 2])
def test_the_fit_is_the_maximum_likelihood_of_davidsons_model(seed):
    rows = simulate(seed, raters=20, votes_each=20)
    systems = sorted(TRUE)
    found = fit(votes_of(rows, systems))
    theta, nu = independent_fit(rows, systems)
    assert np.max(np.abs(found.strength - theta)) < 1e-3, (found.strength, theta)
    assert abs(found.tie - nu) < 1e-3
    assert abs(found.strength.mean()) < 1e-9  # centred
    # And near the truth it was drawn from (400 votes).
    truth = np.array([TRUE[s] for s in systems])
    assert np.max(np.abs(found.strength - (truth - truth.mean()))) < 0.35


def _write(path, rows, columns):
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_score_offline_pairs_prints_strengths_intervals_ranks_and_removes_self_votes(tmp_path):
    # Raters 0 to 4 are of team T1, which entered S5: their votes on S5 are self-votes.
    rows = simulate(3, raters=30, votes_each=20, team_of={r: "T1" for r in range(5)})
    for row in rows[:5]:  # and a sixth system with too few votes to be ranked
        row["right_system"] = "S6"
    teams = [{"system": s, "team": "T1" if s == "S5" else f"T-{s}", "track": "A"} for s in TRUE]
    teams.append({"system": "S6", "team": "T-S6", "track": "A"})
    pairs = _write(tmp_path / "pairs.csv", rows, PAIR_COLUMNS)
    team_file = _write(tmp_path / "teams.csv", teams, ["system", "team", "track"])
    out = json.loads(run({"pairs": pairs, "teams": team_file, "bootstrap": 200, "seed": 4}))
    section = out["pairwise"]
    own = [
        r for r in rows if r["rater_team"] == "T1" and "S5" in (r["left_system"], r["right_system"])
    ]
    assert section["self_votes_removed"] == len(own) > 0
    track = section["tracks"]["A"]
    by_system = {e["system"]: e for e in track["systems"]}
    assert [e["system"] for e in track["systems"] if e["rank"]] == ["S1", "S2", "S3", "S4", "S5"]
    assert by_system["S6"]["rank"] is None and by_system["S6"]["votes"] == 5
    for entry in track["systems"]:
        low, high = entry["strength_ci"]
        assert low <= entry["strength"] <= high
        assert entry["wins"] + entry["ties"] + entry["losses"] == entry["votes"]
    # The same fit as on the votes kept, through the module alone.
    kept = [r for r in rows if r not in own]
    direct = score_pairs(kept, replicates=0)["tracks"]["A"]
    assert [e["strength"] for e in direct["systems"]] == [e["strength"] for e in track["systems"]]
    matrix = np.array(track["win_probability"]["matrix"], dtype=float)
    assert track["win_probability"]["systems"] == ["S1", "S2", "S3", "S4", "S5"]
    upper = np.triu_indices(5, 1)
    # Ranked by strength: each system beats every one below it more often than it loses.
    assert np.all(matrix[upper] > matrix.T[upper])
    # P(i beats j) + P(j beats i) + P(tie) = 1: the tie's share is what is left.
    assert np.all(matrix[upper] + matrix.T[upper] < 1)


def test_bad_rows_are_named_at_once(tmp_path):
    rows = simulate(5, raters=2, votes_each=3)
    rows[0]["winner"] = "both bad"
    rows[2]["right_system"] = rows[2]["left_system"]
    rows[4]["rater"] = ""
    pairs = _write(tmp_path / "pairs.csv", rows, PAIR_COLUMNS)
    with pytest.raises(ScoringInputError) as caught:
        run({"pairs": pairs})
    message = str(caught.value)
    assert "line 2: winner 'both bad'" in message
    assert "line 4: a system against itself" in message
    assert "line 6: rater empty" in message


def test_intervals_over_raters_cover_the_truth_on_a_simulated_panel():
    """One panel of 40 raters: every true (centred) strength inside its 95% interval. The
    coverage over many panels is measured in benchmarks/bench_pairwise.py."""
    rows = simulate(11, raters=40, votes_each=25)
    track = score_pairs(rows, replicates=200, seed=1)["tracks"]["A"]
    truth = np.array(list(TRUE.values()))
    centred = dict(zip(TRUE, truth - truth.mean(), strict=True))
    for entry in track["systems"]:
        low, high = entry["strength_ci"]
        assert low <= centred[entry["system"]] <= high, entry
