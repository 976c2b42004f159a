"""A simulated listening test shaped like DCASE 2023 Task 7, for tests, benchmarks and demos.

Each rater rates, per category session, 12 anchors (4 of each type) and every
system's sounds in that category; some raters belong to teams (their self-ratings must go) and
some answer at random (their sessions fail the anchor rule).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scoring.inputs import Inputs

ANCHOR_TRUTH = {
    "anchor_hq_goodfit": (8.5, 8.5),
    "anchor_hq_poorfit": (8.0, 2.0),
    "anchor_lq_poorfit": (2.0, 2.0),
}


@dataclass
class Simulation:
    inputs: Inputs
    true_final: dict[str, float]
    careless: list[str]


def simulate(
    *,
    systems_per_track: int = 4,
    tracks: tuple[str, ...] = ("A", "B"),
    categories: int = 7,
    sounds: int = 20,
    raters: int = 10,
    team_raters: int = 2,
    careless: int = 1,
    seed: int = 0,
) -> Simulation:
    rng = np.random.default_rng(seed)
    cats = [f"cat{c}" for c in range(categories)]
    systems = [f"{t}{i}" for t in tracks for i in range(systems_per_track)]
    track_of = {s: s[0] for s in systems}
    team_of = {s: f"team{i % max(1, len(systems) // 2)}" for i, s in enumerate(systems)}
    truth = {s: (rng.uniform(3, 8.5), rng.uniform(3, 8.5), rng.uniform(3, 8.5)) for s in systems}
    sound_effect = rng.normal(0, 0.8, (len(systems), categories, sounds))
    rater_names = [f"rater{r:04d}" for r in range(raters)]
    rater_team = {
        name: (team_of[systems[i % len(systems)]] if i < team_raters else "")
        for i, name in enumerate(rater_names)
    }
    careless_set = set(rater_names[-careless:]) if careless else set()
    bias = rng.normal(0, 0.5, raters)

    def clip(x):
        return np.clip(np.rint(x), 1, 10).astype(int)

    ratings: list[dict] = []
    diversity: list[dict] = []
    for r, rater in enumerate(rater_names):
        bad = rater in careless_set
        for c, category in enumerate(cats):
            session = f"{rater}-{category}"
            base = {"rater": rater, "rater_team": rater_team[rater], "session": session}
            for role, (tq, tf) in ANCHOR_TRUTH.items():
                n = 4
                if bad:
                    q, f = rng.integers(1, 11, n), rng.integers(1, 11, n)
                else:
                    q, f = clip(tq + rng.normal(0, 0.7, n)), clip(tf + rng.normal(0, 0.7, n))
                for k in range(n):
                    ratings.append(
                        {
                            **base,
                            "category": category,
                            "system": "",
                            "track": "",
                            "stimulus": f"anchor-{category}-{role}-{k}",
                            "role": role,
                            "quality": int(q[k]),
                            "fit": int(f[k]),
                        }
                    )
            for s, system in enumerate(systems):
                tq, tf, td = truth[system]
                own = 2.0 if rater_team[rater] == team_of[system] else 0.0
                if bad:
                    q, f = rng.integers(1, 11, sounds), rng.integers(1, 11, sounds)
                    d = int(rng.integers(1, 11))
                else:
                    noise = rng.normal(0, 1.0, (2, sounds))
                    q = clip(tq + own + bias[r] + sound_effect[s, c] + noise[0])
                    f = clip(tf + own + bias[r] + 0.5 * sound_effect[s, c] + noise[1])
                    d = int(clip(td + own + bias[r] + rng.normal(0, 1.0)))
                for k in range(sounds):
                    ratings.append(
                        {
                            **base,
                            "category": category,
                            "system": system,
                            "track": track_of[system],
                            "stimulus": f"{system}-{category}-{k:02d}",
                            "role": "trial",
                            "quality": int(q[k]),
                            "fit": int(f[k]),
                        }
                    )
                diversity.append(
                    {
                        "rater": rater,
                        "rater_team": rater_team[rater],
                        "category": category,
                        "system": system,
                        "track": track_of[system],
                        "diversity": d,
                    }
                )
    fad = []
    for system in systems:
        tq, tf, _ = truth[system]
        for category in cats:
            fad_eval = max(0.5, 14 - (tq + tf) + rng.normal(0, 1.0))
            fad.append(
                {
                    "system": system,
                    "track": track_of[system],
                    "category": category,
                    "fad_dev": round(fad_eval * rng.uniform(0.85, 1.15), 4),
                    "fad_eval": round(fad_eval, 4),
                }
            )
    teams = [{"system": s, "team": team_of[s], "track": track_of[s]} for s in systems]
    true_final = {s: (q + f + 0.5 * d) / 2.5 for s, (q, f, d) in truth.items()}
    return Simulation(
        Inputs(ratings=ratings, diversity=diversity, fad=fad, teams=teams),
        true_final,
        sorted(careless_set),
    )
