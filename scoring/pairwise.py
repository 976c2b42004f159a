"""Pairwise A/B votes scored by Davidson's Bradley-Terry model with ties.

A vote compares two stimuli of one category from two systems of one track: the left won, the
right won, or a tie. Each system has a strength pi = exp(theta); with the tie parameter nu,

    P(left wins) = pi_l / D,   P(tie) = nu * sqrt(pi_l * pi_r) / D,
    D = pi_l + pi_r + nu * sqrt(pi_l * pi_r)

(Davidson 1970): a tie is its own outcome with a fitted rate, not half a win (as the arenas count
it) and not a vote dropped. Per track, theta and nu are the maximum-likelihood fit over the votes
(float64, the log-likelihood's exact gradient, BFGS); the strengths are reported on the log scale
and centred (their mean is 0: only differences are identified).

- Self-votes are removed as self-ratings are: a vote whose rater belongs to the team of either
  system (the teams table says which team a system is).
- Intervals come from a bootstrap over raters, not over votes: one rater's votes are not
  independent (a rater's taste runs through all of them), so each replicate draws raters with
  replacement and keeps all their votes; the percentile interval of each centred strength.
- A system is ranked once it has `MIN_VOTES` votes in its track; below that it is listed with its
  votes and no rank (its votes still inform the others' strengths).
- The win-probability matrix of the ranked systems: P(row's system wins against column's).

Plain numpy and scipy; `score_pairs` is what `score_offline --pairs` prints under `pairwise`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize
from scipy.special import logsumexp

from raters.columns import PAIR_COLUMNS
from raters.vote_rules import ANCHOR_PAIR

from .inputs import ScoringInputError, cell_text, read_csv

WINNERS = ("left", "right", "tie")
MIN_VOTES = 10  # votes a system needs in its track to be ranked
MODEL = "Davidson-Bradley-Terry"


@dataclass(frozen=True)
class Votes:
    """One track's votes as indices into `systems`: for a win, `first` is the winner; for a tie
    the order does not matter."""

    systems: list[str]
    first: np.ndarray
    second: np.ndarray
    tie: np.ndarray  # bool
    rater: np.ndarray  # index into `raters`
    raters: list[str]

    def take(self, rows: np.ndarray) -> Votes:
        return Votes(
            self.systems,
            self.first[rows],
            self.second[rows],
            self.tie[rows],
            self.rater[rows],
            self.raters,
        )


@dataclass(frozen=True)
class Fit:
    strength: np.ndarray  # centred log strengths, in the order of Votes.systems
    tie: float  # nu
    log_likelihood: float


def read_pairs(path: str | Path) -> list[dict]:
    """The votes of a pairs CSV, every bad row named at once."""
    rows = read_csv(path, PAIR_COLUMNS)
    problems = []
    for line, row in enumerate(rows, start=2):  # the header is line 1
        # A hidden anchor's A/B trial (the votes export's `anchor_pair`) has one side without a
        # system: it is read for the rater-quality rules, never fitted (scoring/votes.py).
        anchor = cell_text(row.get("role")) == ANCHOR_PAIR
        needed = ("rater", "track") if anchor else ("rater", "track", "left_system", "right_system")
        missing = [c for c in needed if not cell_text(row[c])]
        if missing:
            problems.append(f"line {line}: {', '.join(missing)} empty")
        winner = cell_text(row["winner"]).lower()
        if winner not in WINNERS:
            problems.append(f"line {line}: winner {row['winner']!r} is not left, right or tie")
        if cell_text(row["left_system"]) and row["left_system"] == row["right_system"]:
            problems.append(f"line {line}: a system against itself ({row['left_system']})")
    if problems:
        raise ScoringInputError(f"{Path(path).name}: " + "; ".join(problems))
    # Every column is kept: the votes export's others (the session, the question, the listening
    # record) are what the rater-quality rules judge (scoring/votes.py).
    return [
        {c: cell_text(v) for c, v in row.items() if c}
        | {"winner": cell_text(row["winner"]).lower()}
        for row in rows
    ]


def votes_of(rows: Sequence[Mapping], systems: Sequence[str]) -> Votes:
    index = {name: k for k, name in enumerate(systems)}
    # The raters in the order of what they voted, not of their names: the bootstrap's draws are
    # then the same under any names (a data release's pseudonyms rescore to the published
    # intervals). Raters who voted alike are interchangeable.
    voted: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        columns = ("category", "left_system", "right_system", "winner", "question")
        voted[row["rater"]].append(tuple(str(row.get(c, "")) for c in columns))
    raters = sorted(voted, key=lambda name: sorted(voted[name]))
    rater_index = {name: k for k, name in enumerate(raters)}
    first, second, tie, rater = [], [], [], []
    for row in rows:
        left, right = index[row["left_system"]], index[row["right_system"]]
        winner = row["winner"]
        first.append(right if winner == "right" else left)
        second.append(left if winner == "right" else right)
        tie.append(winner == "tie")
        rater.append(rater_index[row["rater"]])
    return Votes(
        list(systems),
        np.array(first, dtype=int),
        np.array(second, dtype=int),
        np.array(tie, dtype=bool),
        np.array(rater, dtype=int),
        raters,
    )


def _negative_log_likelihood(params: np.ndarray, votes: Votes) -> tuple[float, np.ndarray]:
    """-log L and its gradient; params = (theta of every system but the first, log nu); the
    first system's theta is held at 0 (the likelihood only sees differences)."""
    k = len(votes.systems)
    theta = np.concatenate(([0.0], params[: k - 1]))
    log_nu = params[k - 1]
    a, b = theta[votes.first], theta[votes.second]
    terms = np.stack([a, b, log_nu + (a + b) / 2])
    log_d = logsumexp(terms, axis=0)
    p_a, p_b, p_t = np.exp(terms - log_d)
    tie = votes.tie
    log_l = np.where(tie, log_nu + (a + b) / 2, a) - log_d
    # d(log L)/d(theta) per vote: the outcome's own term less the denominator's share.
    own_a = np.where(tie, 0.5, 1.0)
    own_b = np.where(tie, 0.5, 0.0)
    grad_a = own_a - (p_a + p_t / 2)
    grad_b = own_b - (p_b + p_t / 2)
    grad_theta = np.bincount(votes.first, grad_a, k) + np.bincount(votes.second, grad_b, k)
    grad_nu = float(np.sum(tie.astype(float) - p_t))
    gradient = np.concatenate((grad_theta[1:], [grad_nu]))
    return -float(log_l.sum()), -gradient


def fit(votes: Votes) -> Fit:
    """The maximum-likelihood strengths and tie parameter of one track's votes."""
    k = len(votes.systems)
    start = np.zeros(k)
    start[k - 1] = np.log(max(votes.tie.mean(), 0.01) * 2)  # nu near twice the tie share
    found = optimize.minimize(
        _negative_log_likelihood,
        start,
        args=(votes,),
        jac=True,
        method="BFGS",
        options={"gtol": 1e-9, "maxiter": 2000},
    )
    theta = np.concatenate(([0.0], found.x[: k - 1]))
    return Fit(theta - theta.mean(), float(np.exp(found.x[k - 1])), -float(found.fun))


def win_probability(strength: np.ndarray, tie: float) -> np.ndarray:
    """P(row's system wins against column's); the diagonal is left at nan."""
    a, b = strength[:, None], strength[None, :]
    d = np.exp(a) + np.exp(b) + tie * np.exp((a + b) / 2)
    out = np.exp(a) / d
    np.fill_diagonal(out, np.nan)
    return out


def bootstrap(votes: Votes, replicates: int, seed: int) -> np.ndarray:
    """Centred strengths of `replicates` fits, each on raters drawn with replacement (all of a
    drawn rater's votes, once per draw)."""
    rng = np.random.default_rng(seed)
    by_rater = [np.flatnonzero(votes.rater == r) for r in range(len(votes.raters))]
    out = np.empty((replicates, len(votes.systems)))
    for n in range(replicates):
        drawn = rng.integers(0, len(by_rater), len(by_rater))
        out[n] = fit(votes.take(np.concatenate([by_rater[r] for r in drawn]))).strength
    return out


def without_self_votes(
    rows: Iterable[Mapping], teams: Iterable[Mapping]
) -> tuple[list[Mapping], int]:
    """The votes but those whose rater belongs to the team of either side's system (the teams
    table says which team a system is), and how many were removed."""
    team_of = {cell_text(t["system"]): cell_text(t["team"]) for t in teams}
    kept, removed = [], 0
    for row in rows:
        own = row["rater_team"] and row["rater_team"] in (
            team_of.get(row["left_system"]),
            team_of.get(row["right_system"]),
        )
        if own:
            removed += 1
        else:
            kept.append(row)
    return kept, removed


def score_pairs(
    rows: Iterable[Mapping],
    teams: Iterable[Mapping] = (),
    *,
    replicates: int = 1000,
    seed: int = 2023,
) -> dict:
    """The `pairwise` section of a result: per track every system's strength, its interval,
    rank and votes, the tie parameter and the win-probability matrix."""
    kept, removed = without_self_votes(rows, teams)
    by_track: dict[str, list[Mapping]] = defaultdict(list)
    for row in kept:
        by_track[row["track"]].append(row)
    tracks = {}
    for track, track_rows in sorted(by_track.items()):
        systems = sorted(
            {r["left_system"] for r in track_rows} | {r["right_system"] for r in track_rows}
        )
        votes = votes_of(track_rows, systems)
        found = fit(votes)
        draws = bootstrap(votes, replicates, seed) if replicates else None
        counts = np.bincount(votes.first, minlength=len(systems)) + np.bincount(
            votes.second, minlength=len(systems)
        )
        wins = np.bincount(votes.first[~votes.tie], minlength=len(systems))
        ties = np.bincount(votes.first[votes.tie], minlength=len(systems)) + np.bincount(
            votes.second[votes.tie], minlength=len(systems)
        )
        ranked = sorted(
            (k for k in range(len(systems)) if counts[k] >= MIN_VOTES),
            key=lambda k: -found.strength[k],
        )
        rank = {k: n + 1 for n, k in enumerate(ranked)}
        entries = []
        for k in sorted(
            range(len(systems)), key=lambda k: (k not in rank, rank.get(k, 0), systems[k])
        ):
            interval = None
            if draws is not None:
                low, high = np.percentile(draws[:, k], [2.5, 97.5])
                interval = [round(float(low), 4), round(float(high), 4)]
            entries.append(
                {
                    "system": systems[k],
                    "strength": round(float(found.strength[k]), 4),
                    "strength_ci": interval,
                    "rank": rank.get(k),
                    "votes": int(counts[k]),
                    "wins": int(wins[k]),
                    "ties": int(ties[k]),
                    "losses": int(counts[k] - wins[k] - ties[k]),
                }
            )
        matrix = win_probability(found.strength[ranked], found.tie)
        tracks[track] = {
            "systems": entries,
            "tie": round(found.tie, 4),
            "votes": len(track_rows),
            "raters": len(votes.raters),
            "win_probability": {
                "systems": [systems[k] for k in ranked],
                "matrix": [
                    [None if np.isnan(p) else round(float(p), 4) for p in line] for line in matrix
                ],
            },
        }
    return {
        "model": MODEL,
        "min_votes": MIN_VOTES,
        "bootstrap": {"replicates": replicates, "seed": seed, "over": "raters"},
        "self_votes_removed": removed,
        "tracks": tracks,
    }
