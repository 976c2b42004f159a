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


def simulate_farm(
    *,
    honest: int = 48,
    farm: int = 16,
    kind: str = "crude",
    favoured_rank: int = 5,
    systems_per_track: int = 4,
    categories: int = 7,
    categories_per_rater: int = 2,
    sounds: int = 4,
    tastes: float = 0.5,
    seed: int = 0,
) -> tuple[Inputs, str, list[str]]:
    """A crowd run shaped like DCASE 2023 Task 7 with a team's rater farm in it: `honest` raters
    with their own leniency (sd 0.5) and tastes (a lift per rater and system, sd `tastes`), each
    rating `categories_per_rater` categories with every system's `sounds` sounds, 12 anchors and
    diversity; and `farm` raters of one team, unknown to the organizers, who answer every anchor
    as expected and lift the system of true rank `favoured_rank` in track A: "crude" rates it 10
    and everything else 2; "sneaky" answers as an honest rater would, 3 points higher on it.

    Returns the inputs (every row a crowd worker's), the favoured system and the farm's raters."""
    rng = np.random.default_rng(seed)
    cats = [f"cat{c}" for c in range(categories)]
    systems = [f"{t}{i}" for t in ("A", "B") for i in range(systems_per_track)]
    truth = {s: (rng.uniform(3, 8.5), rng.uniform(3, 8.5), rng.uniform(3, 8.5)) for s in systems}
    final = {s: (q + f + 0.5 * d) / 2.5 for s, (q, f, d) in truth.items()}
    in_a = sorted((s for s in systems if s[0] == "A"), key=lambda s: -final[s])
    favoured = in_a[min(favoured_rank, len(in_a)) - 1]
    sound_effect = {
        (s, c): rng.normal(0, 0.8, sounds) for s in systems for c in cats
    }  # a sound's own quality, heard alike by every rater
    names = [f"honest{r:03d}" for r in range(honest)] + [f"farm{r:03d}" for r in range(farm)]
    farmers = names[honest:]

    def clip(x):
        return np.clip(np.rint(x), 0, 10).astype(int)

    ratings: list[dict] = []
    diversity: list[dict] = []
    for rater in names:
        is_farm = rater in farmers
        bias = rng.normal(0, 0.5)
        taste = {s: rng.normal(0, tastes) for s in systems}
        chosen = rng.choice(categories, size=min(categories_per_rater, categories), replace=False)
        for c in sorted(int(c) for c in chosen):
            category = cats[c]
            base = {
                "rater": rater,
                "rater_team": "",
                "rater_kind": "crowd",
                "session": f"{rater}-{category}",
                "category": category,
            }
            for role, (tq, tf) in ANCHOR_TRUTH.items():
                q, f = clip(tq + rng.normal(0, 0.7, 4)), clip(tf + rng.normal(0, 0.7, 4))
                for k in range(4):
                    ratings.append(
                        {
                            **base,
                            "system": "",
                            "track": "",
                            "stimulus": f"anchor-{category}-{role}-{k}",
                            "role": role,
                            "quality": int(q[k]),
                            "fit": int(f[k]),
                        }
                    )
            for system in systems:
                tq, tf, td = truth[system]
                lift = taste[system] + bias
                noise = rng.normal(0, 1.0, (2, sounds))
                effect = sound_effect[(system, category)]
                q = tq + lift + effect + noise[0]
                f = tf + lift + 0.5 * effect + noise[1]
                d = td + lift + rng.normal(0, 1.0)
                if is_farm and kind == "crude":
                    value = 10 if system == favoured else 2
                    q, f, d = np.full(sounds, value), np.full(sounds, value), value
                elif is_farm and system == favoured:
                    q, f, d = q + 3, f + 3, d + 3
                q, f = clip(q), clip(f)
                for k in range(sounds):
                    ratings.append(
                        {
                            **base,
                            "system": system,
                            "track": system[0],
                            "stimulus": f"{system}-{category}-{k:02d}",
                            "role": "trial",
                            "quality": int(q[k]),
                            "fit": int(f[k]),
                        }
                    )
                diversity.append(
                    {
                        "rater": rater,
                        "rater_team": "",
                        "category": category,
                        "system": system,
                        "track": system[0],
                        "diversity": int(clip(d)),
                    }
                )
    fad = [
        {
            "system": s,
            "track": s[0],
            "category": c,
            "fad_dev": round(max(0.5, 14 - truth[s][0] - truth[s][1]), 4),
            "fad_eval": round(max(0.5, 14 - truth[s][0] - truth[s][1]), 4),
        }
        for s in systems
        for c in cats
    ]
    teams = [{"system": s, "team": f"team-{s}", "track": s[0]} for s in systems]
    return Inputs(ratings=ratings, diversity=diversity, fad=fad, teams=teams), favoured, farmers
