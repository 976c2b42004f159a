"""The tables of a published result, in page order: what the results pages show and every
download (CSV and JSON) and the API serve, from the result a snapshot stores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from stimuli.exports import to_csv

from .league import league_entries
from .predictors import PREDICTOR_NAMES


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    ci: bool = False  # the row also has `<key>_ci` = [low, high]
    shown: bool = True  # False: in the downloads only (the page states it otherwise)


def votes_only(result: Mapping) -> bool:
    """The result of a test of the pairs design alone: votes, and no session of the sliders'
    ratings to show tables and plots of (they would all be empty)."""
    return bool(result.get("pairwise")) and not (result.get("counts") or {}).get("sessions_checked")


def _numeric(values: list) -> bool:
    present = [v for v in values if v is not None]
    return bool(present) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in present
    )


@dataclass
class Table:
    name: str
    title: str
    columns: list[Column]
    rows: list[dict] = field(default_factory=list)
    track: str | None = None
    note: str = ""  # a sentence shown under the title (what the table needs, how it was made)

    @property
    def flat_columns(self) -> list[str]:
        names = []
        for column in self.columns:
            names.append(column.key)
            if column.ci:
                names += [f"{column.key}_low", f"{column.key}_high"]
        return names

    def flat_rows(self) -> list[dict]:
        out = []
        for row in self.rows:
            flat = {}
            for column in self.columns:
                flat[column.key] = row.get(column.key)
                if column.ci:
                    ci = row.get(f"{column.key}_ci") or [None, None]
                    flat[f"{column.key}_low"], flat[f"{column.key}_high"] = ci
            out.append(flat)
        return out

    @property
    def shown_columns(self) -> list[Column]:
        return [column for column in self.columns if column.shown]

    def headers(self) -> list[tuple[str, bool]]:
        """Per shown column: its label, and whether it holds numbers (every value that is not
        missing is one), so that its heading stands over its right-aligned values."""
        return [
            (c.label, _numeric([row.get(c.key) for row in self.rows])) for c in self.shown_columns
        ]

    def cells(self) -> list[list[tuple[object, list | None, str, bool]]]:
        """Per row, per shown column: (value, interval or None, why an interval is withheld,
        whether the column holds numbers)."""
        numeric = [n for _, n in self.headers()]
        return [
            [
                (
                    row.get(c.key),
                    row.get(f"{c.key}_ci") if c.ci else None,
                    (row.get("ci_withheld") or {}).get(c.key, "") if c.ci else "",
                    number,
                )
                for c, number in zip(self.shown_columns, numeric, strict=True)
            ]
            for row in self.rows
        ]

    def to_csv(self, status: str) -> str:
        """The table as CSV, each row saying whether its snapshot is final or interim: a
        downloaded file travels without the page that labels it."""
        rows = [{**row, "status": status} for row in self.flat_rows()]
        return to_csv(rows, [*self.flat_columns, "status"])


# The final score first: the column that ranks.
SCALE_COLUMNS = [
    Column("final", "Final", ci=True),
    Column("quality", "Quality", ci=True),
    Column("fit", "Fit", ci=True),
    Column("diversity", "Diversity", ci=True),
]


ROBUSTNESS_COLUMNS = (
    ("rank_without_favourable", "Rank without its most favourable 10% of raters"),
    ("rank_without_flagged", "Rank without the flagged raters"),
)
# FAD-inf beside FAD where the objective settings computed it (the result says so).
FAD_INF_COLUMNS = [Column("fad_dev_inf", "FAD∞-Dev"), Column("fad_eval_inf", "FAD∞-Eval")]
# How much a model's ranking keeps on fewer clips (the league's stability, where computed).
STABILITY_COLUMNS = [
    Column("scope", "Track"),
    Column("model", "Embedding model"),
    Column("metric", "Distance"),
    Column("tau_25", "Kendall: 25 clips"),
    Column("tau_50", "50 clips"),
    Column("tau_100", "100 clips"),
    Column("drift_25", "Drift: 25 clips"),
    Column("drift_50", "50 clips"),
    Column("drift_100", "100 clips"),
    Column("unstable", "Flag"),
]
# KAD beside FAD where the objective stage computed it (the result says so).
KAD_COLUMNS = [Column("kad_dev", "KAD-Dev", ci=True), Column("kad_eval", "KAD-Eval", ci=True)]
KAD_PLAIN_COLUMNS = [Column("kad_dev", "KAD-Dev"), Column("kad_eval", "KAD-Eval")]


@dataclass(frozen=True)
class Stored:
    """The parts of a stored result (`scoring.stages.Result.to_dict()`) the tables read, typed;
    results published before a part was computed read as without it."""

    tracks: dict[str, list[dict]]
    categories: list[str]
    pairs: dict[str, list[dict]]
    excluded_sessions: list[dict]
    analyses: dict
    favouritism: dict
    unrated_systems: dict[str, list[dict]]
    incomplete_systems: dict[str, list[dict]]
    metric_league: dict | None
    text_prompt: dict | None
    fad_infinity: bool
    kad: bool
    # The learned predictors' axes beside FAD and KAD, each {predictor, name, axis, key, label}
    # (scoring/predictors.py); none in a result without predictor values or published before.
    predictors: list[dict] = field(default_factory=list)

    @classmethod
    def of(cls, result: dict) -> Stored:
        return cls(
            tracks=result["tracks"],
            categories=result["categories"],
            pairs=result["pairs"],
            excluded_sessions=result["excluded_sessions"],
            analyses=result["analyses"],
            favouritism=result.get("favouritism") or {"raters": [], "clusters": []},
            unrated_systems=result.get("unrated_systems", {}),
            incomplete_systems=result.get("incomplete_systems", {}),
            metric_league=result.get("metric_league"),
            text_prompt=result.get("text_prompt"),
            fad_infinity=bool(result.get("fad_infinity")),
            kad=bool(result.get("kad")),
            predictors=list(result.get("predictors") or []),
        )

    def distance_columns(self, *, ci: bool = True) -> list[Column]:
        """FAD (with FAD-inf where computed) and KAD where computed."""
        fad = [Column("fad_dev", "FAD-Dev", ci=ci), Column("fad_eval", "FAD-Eval", ci=ci)]
        inf = FAD_INF_COLUMNS if self.fad_infinity else []
        kad = (KAD_COLUMNS if ci else KAD_PLAIN_COLUMNS) if self.kad else []
        return [*fad, *inf, *kad]

    def predictor_columns(self, *, ci: bool = True) -> list[Column]:
        """Each predictor axis's mean over the clips (higher is better), where computed."""
        return [Column(axis["key"], axis["label"], ci=ci) for axis in self.predictors]


def tables(result: dict) -> list[Table]:
    """Every table of a result, in page order; each can be downloaded as CSV and JSON."""
    stored = Stored.of(result)
    votes = pairwise_tables(result)
    if votes_only(result):
        return votes
    return [
        *(t for track in stored.tracks for t in track_tables(stored, track)),
        *rater_tables(stored),
        *objective_tables(stored),
        *analysis_tables(stored),
        *text_prompt_tables(result),
        *votes,
    ]


def track_tables(stored: Stored, track: str) -> list[Table]:
    """A track's leaderboard, its scores per category, the systems left out of it and how
    surely each adjacent pair is in order."""
    rows = stored.tracks[track]
    # How much each rank rests on a few raters (results published since it is computed).
    robust = [Column(k, label) for k, label in ROBUSTNESS_COLUMNS if any(k in r for r in rows)]
    left_out = [Column("system", "System"), Column("team", "Team")]
    plain = stored.distance_columns(ci=False)
    return [
        Table(
            f"leaderboard-{track}",
            f"Track {track}: leaderboard",
            # What ranks the systems first, so that it shows at every width: the rest scrolls
            # sideways in the table's own box.
            [
                Column("rank", "Rank"),
                Column("system", "System"),
                SCALE_COLUMNS[0],
                Column("p_above_next", "P(above next)"),
                *robust,
                *SCALE_COLUMNS[1:],
                Column("team", "Team"),
                *stored.distance_columns(),
            ],
            rows,
            track,
        ),
        *predictor_tables(stored, track),
        Table(
            f"categories-{track}",
            f"Track {track}: per category",
            [
                Column("system", "System"),
                Column("category", "Category"),
                *SCALE_COLUMNS,
                *stored.distance_columns(),
            ],
            [
                {"system": row["system"], "category": category, **values}
                for category in stored.categories
                for row in rows
                for values in [row["categories"].get(category, {})]
            ],
            track,
        ),
        Table(
            f"unrated-{track}",
            f"Track {track}: systems without ratings (not finalists, or not rated yet)",
            [*left_out, *plain],
            stored.unrated_systems.get(track, []),
            track,
        ),
        Table(
            f"incomplete-{track}",
            f"Track {track}: systems not ranked, for ratings missing in some categories",
            [*left_out, Column("missing", "Missing"), *plain],
            stored.incomplete_systems.get(track, []),
            track,
        ),
        Table(
            f"pairs-{track}",
            f"Track {track}: probability that each adjacent pair is in the right order",
            [
                Column("upper", "Ranked above"),
                Column("lower", "Ranked below"),
                Column("probability", "Probability"),
            ],
            stored.pairs.get(track, []),
            track,
        ),
    ]


def predictor_tables(stored: Stored, track: str) -> list[Table]:
    """The learned predictors' means, over all categories and per category, in a table of their
    own beside the leaderboard: five more columns with intervals would push the leaderboard past
    a desktop's width (none in a result without predictor values)."""
    if not stored.predictors:
        return []
    rows = stored.tracks[track]
    return [
        Table(
            f"predictors-{track}",
            f"Track {track}: learned predictors (each system's mean over its clips; higher is "
            "better)",
            [
                Column("system", "System"),
                Column("category", "Category"),
                *stored.predictor_columns(),
            ],
            [
                {**values, "system": row["system"], "category": category}
                for row in rows
                for category, values in [
                    ("all categories", row),
                    *((c, row["categories"].get(c, {})) for c in stored.categories),
                ]
            ],
            track,
            note=untrained_note(stored.predictors),
        )
    ]


def untrained_note(axes: list[dict]) -> str:
    """Which predictors' values came from untrained stand-ins (the demo's), which mean nothing."""
    names = [PREDICTOR_NAMES.get(p, p) for p in dict.fromkeys(
        a["predictor"] for a in axes if a.get("untrained")
    )]  # fmt: skip
    if not names:
        return ""
    return (
        f"{' and '.join(names)} ran on untrained stand-ins: random weights in the released "
        "layouts (as the demo runs them, beside log-mel statistics for FAD), not the released "
        "checkpoints. Their values say nothing of the sounds."
    )


def rater_tables(stored: Stored) -> list[Table]:
    """The sessions the rater-quality rules excluded, and the raters and clusters the
    favouritism rule named."""
    return [
        Table(
            "excluded-sessions",
            "Excluded sessions",
            [
                Column("rater", "Rater"),
                Column("category", "Category"),
                Column("session", "Session"),
                Column("misrated", "Misrated checks"),
                Column("checks", "Checks"),
                Column("reasons", "Why"),
            ],
            [{**s, "reasons": "; ".join(s["reasons"])} for s in stored.excluded_sessions],
        ),
        *favouritism_tables(
            "",
            stored.favouritism,
            Column("points", "Lift (points)"),
            Column("sounds", "Sounds"),
            "Each rater's answers to a system's sounds against the other raters' answers to the "
            "same sounds, after the rater's own leniency and use of the scale; named alone above "
            "the rule's z, or as one of a cluster of raters lifting one system.",
        ),
    ]


def favouritism_tables(
    prefix: str, found: dict, lift: Column, answers: Column, note: str
) -> list[Table]:
    """The raters the favouritism rule named, and the systems a cluster lifts: of the sliders'
    ratings (`lift` in points) or of the votes (`prefix` "pairwise-", `lift` a share of wins)."""
    return [
        Table(
            f"{prefix}favouring-raters",
            "Raters favouring a system",
            [
                Column("rater", "Rater"),
                Column("system", "System"),
                lift,
                Column("z", "z"),
                answers,
                Column("action", "Action"),
                Column("reason", "Why"),
            ],
            found["raters"],
            note=note,
        ),
        Table(
            f"{prefix}favouring-clusters",
            "Systems lifted by a cluster of raters",
            [
                Column("system", "System"),
                Column("raters", "Raters lifting it"),
                Column("expected", "Expected by chance"),
                Column("p", "p"),
            ],
            found["clusters"],
        ),
    ]


def objective_tables(stored: Stored) -> list[Table]:
    """The objective metrics against the listeners: FAD's (and KAD's) rankings against the
    final one, and the embedding league with its stability where computed."""
    kad = [Column("kad_eval", "KAD-Eval"), Column("kad_dev", "KAD-Dev")] if stored.kad else []
    out = [
        Table(
            "fad-correlation",
            "Spearman correlation of the FAD rankings with the final ranking",
            [
                Column("track", "Track"),
                Column("n", "Systems"),
                Column("fad_eval", "FAD-Eval"),
                Column("fad_dev", "FAD-Dev"),
                *kad,
            ],
            [{"track": t, **v} for t, v in stored.analyses["fad_spearman"].items()],
        )
    ]
    league = stored.metric_league
    if not league:
        return out
    rows = league_rows(league)
    predictors = bool(league.get("predictors"))
    what = "each model's FAD and KAD rankings"
    if predictors:
        what += " and each learned predictor's"
    sign = "lower distance" + (" or higher predictor value" if predictors else "")
    out.append(
        Table(
            "metric-league",
            f"Embedding league: {what} against the listening test (Spearman's rho, +1: {sign}, "
            f"better score; the leaderboard shows {league['designated'] or 'no FAD model'})",
            [
                Column("scope", "Track"),
                Column("model", "Model" if predictors else "Embedding model"),
                Column("metric", "Metric" if predictors else "Distance"),
                Column("n_systems", "Systems"),
                Column("spearman", "Spearman (final)", ci=True),
                Column("kendall", "Kendall", ci=True),
                Column("loso_min", "Leave one out: min"),
                Column("loso_max", "max"),
                Column("quality", "vs quality", ci=True),
                Column("fit", "vs fit", ci=True),
                Column("diversity", "vs diversity", ci=True),
                # The note under the title names it; a twelfth column would push the table past
                # a desktop's width.
                *([Column("best", "Agreed most", shown=False)] if "best" in league else []),
            ],
            rows,
            note=" ".join(n for n in (best_note(league), untrained_note(stored.predictors)) if n),
        )
    )
    if any("tau_50" in row for row in rows):
        out.append(
            Table(
                "league-stability",
                f"Embedding league: how much each {'metric' if predictors else 'model'}'s "
                "ranking keeps on fewer clips (Kendall's tau with the ranking on all clips; "
                "drift of the value, relative to its size; flagged below 0.8 on 50 clips)",
                [
                    *STABILITY_COLUMNS[:1],
                    Column("model", "Model" if predictors else "Embedding model"),
                    Column("metric", "Metric" if predictors else "Distance"),
                    *STABILITY_COLUMNS[3:],
                ],
                [
                    {**row, "unstable": "reorders" if row.get("unstable") else ""}
                    for row in rows
                    if "tau_50" in row
                ],
            )
        )
    return out


def best_note(league: dict) -> str:
    """Which metric this challenge's listeners agreed with most, per track and for all tracks
    (results published before it was stated: nothing)."""
    best = league.get("best")
    if not best:
        return ""
    parts = []
    for scope, found in best.items():
        where = "all tracks" if scope == "all tracks" else f"track {scope}"
        if not found:
            parts.append(f"{where}: none (too few systems)")
            continue
        names = " and ".join(_metric_name(b["model"], b["metric"]) for b in found)
        parts.append(f"{where}: {names} (rho {found[0]['spearman']:g})")
    return "The listeners agreed most with " + "; ".join(parts) + "."


def _metric_name(model: str, metric: str) -> str:
    if metric in ("FAD", "KAD"):
        return f"{metric} of {model}"
    # A predictor of one axis of its own name (PAM) is named once.
    return model if model == metric or model.startswith(f"{metric} (") else f"{model} {metric}"


def analysis_tables(stored: Stored) -> list[Table]:
    """How the scales relate, how the anchors were rated and how far the raters agree."""
    analyses = stored.analyses
    return [
        Table(
            "quality-fit",
            "Correlation of quality and fit per category",
            [
                Column("category", "Category"),
                Column("trials", "Over trials (r)"),
                Column("n_trials", "Trials"),
                Column("system_means", "Over system means (r)"),
                Column("n_systems", "Systems"),
            ],
            [{"category": c, **v} for c, v in analyses["quality_fit"].items()],
        ),
        Table(
            "diversity-fit",
            "Correlation of diversity and fit",
            [
                Column("system_category_means", "Over system-category means (r)"),
                Column("n_system_categories", "System-categories"),
                Column("system_means", "Over system means (r)"),
                Column("n_systems", "Systems"),
            ],
            [analyses["diversity_fit"]],
        ),
        Table(
            "anchors",
            "Mean ratings per anchor type (kept sessions)",
            [
                Column("role", "Anchor type"),
                Column("quality", "Quality"),
                Column("fit", "Fit"),
                Column("n", "Ratings"),
            ],
            [{"role": role, **v} for role, v in analyses["anchors"].items()]
            + [{"role": "trial", **analyses["trials"]}],
        ),
        Table(
            "agreement",
            "Inter-rater agreement (Krippendorff's alpha, interval)",
            [Column("scale", "Scale"), Column("alpha", "Alpha")],
            [
                {"scale": scale, "alpha": analyses["agreement"][scale]}
                for scale in ("quality", "fit", "diversity")
            ],
        ),
    ]


TEXT_PROMPT_COLUMNS = [
    Column("recognised_generated", "Generated clips recognised", ci=True),
    Column("recognised_real", "Real clips recognised", ci=True),
    Column("realism_accuracy", "Real vs generated accuracy", ci=True),
    Column("realism_p", "p (vs 50 %)"),
    Column("realism_n", "Realism answers"),
    Column("match_yes", "Match: yes"),
    Column("match_maybe", "Match: maybe"),
    Column("match_no", "Match: no"),
    Column("prompts", "Prompts"),
    Column("quality", "Quality (1-5)", ci=True),
    Column("diversity", "Diversity (1-5)", ci=True),
]


def text_prompt_tables(result: dict) -> list[Table]:
    """The text-prompt study's tables: per system, and per judge of each system."""
    from .text_prompts import flat_row

    study = result.get("text_prompt")
    if not study:
        return []
    systems = Table(
        "text-prompt-systems",
        "Text-prompt study: per system",
        [Column("system", "System"), Column("judges", "Judges"), *TEXT_PROMPT_COLUMNS],
        [{"system": s["system"], "judges": s["judges"], **flat_row(s)} for s in study["systems"]],
    )
    judges = Table(
        "text-prompt-judges",
        "Text-prompt study: per judge",
        [Column("system", "System"), Column("judge", "Judge"), *TEXT_PROMPT_COLUMNS],
        [
            {"system": s["system"], "judge": j["judge"], **flat_row(j)}
            for s in study["systems"]
            for j in s["per_judge"]
        ],
    )
    judged = Table(
        "text-prompt-judges-excluded",
        "Text-prompt study: judges the rater-quality rules excluded or flagged",
        [
            Column("judge", "Judge"),
            Column("system", "System"),
            Column("excluded", "Excluded"),
            Column("reasons", "Reasons"),
        ],
        list(study.get("judged", [])),
    )
    return [systems, judges, judged, *clap_tables(study)]


def clap_tables(study: dict) -> list[Table]:
    """The CLAP score per system beside the judges' Yes share, or what would enable it."""
    clap = study.get("clap")
    if clap is None:
        return []
    if not clap["enabled"] and not clap["scored_sets"]:
        note = clap["needs"]
    else:
        rho = "n/a" if clap["rho"] is None else f"{clap['rho']:.3f} (p = {clap['rho_p']})"
        note = (
            f"{clap['scored_sets']} of {clap['sets']} answered prompt sets scored with "
            f"{clap['model_id']}; Spearman's rho of a set's best-clip cosine with its judge's "
            f"No < Maybe < Yes, all systems: {rho}, n = {clap['n']}."
        )
    rows = [
        {
            "system": s["system"],
            "clap_score": s["clap"]["score"],
            "clap_score_ci": s["clap"]["ci"],
            "clap_rho": s["clap"]["rho"],
            "clap_sets": s["clap"]["n"],
            "match_yes": s["match"]["shares"]["yes"],
        }
        for s in study["systems"]
        if s.get("clap", {}).get("n")
    ]
    columns = [
        Column("system", "System"),
        Column("clap_score", "CLAP score (best clip's cosine)", ci=True),
        Column("clap_rho", "Spearman rho with the judges' match"),
        Column("clap_sets", "Prompt sets scored"),
        Column("match_yes", "Match: yes"),
    ]
    return [Table("text-prompt-clap", "Text-prompt study: CLAP score", columns, rows, note=note)]


def table(result: dict, name: str) -> Table | None:
    return next((t for t in tables(result) if t.name == name), None)


def league_rows(league: dict) -> list[dict]:
    """One row per track (and all tracks) and metric: each model's FAD, then its KAD where
    computed, then each predictor axis where computed; `best` marks the metric the listeners
    agreed with most."""
    rows = []
    for scope in [*league["tracks"], "all tracks"]:
        best = {(b["model"], b["metric"]) for b in (league.get("best") or {}).get(scope, [])}
        for model, metric, entry in league_entries(league, scope):
            row = {"scope": scope, "model": model, "metric": metric, **entry}
            if "best" in league:
                row["best"] = "most" if (model, metric) in best else ""
            rows.append(row)
    return rows


# --- The pairs design's votes (a result's `pairwise` section, scoring/votes.py) ----------------

PAIRWISE_COLUMNS = [
    Column("rank", "Rank"),
    Column("system", "System"),
    Column("strength", "Strength (log scale)", ci=True),
    Column("votes", "Answers"),
    Column("wins", "Won"),
    Column("ties", "Tied"),
    Column("losses", "Lost"),
]


def pairwise_tables(result: dict) -> list[Table]:
    """Per track of the votes: its leaderboard (named `leaderboard-pairwise-<track>`, so the
    results page shows it with the leaderboards) and its win probabilities; then the sessions of
    votes the rater-quality rules excluded and what the favouritism rule found in the votes."""
    section = result.get("pairwise")
    if not section:
        return []
    out = [
        Table(
            "pairwise-excluded-sessions",
            "Excluded sessions of A/B trials",
            [
                Column("rater", "Rater"),
                Column("category", "Category"),
                Column("session", "Session"),
                Column("reasons", "Why"),
            ],
            [{**s, "reasons": "; ".join(s["reasons"])} for s in section["excluded_sessions"]],
        ),
        *favouritism_tables(
            "pairwise-",
            section["favouritism"],
            Column("points", "Lift (share of wins)"),
            Column("answers", "Answers"),
            "Each rater's share of wins for a system against the other raters' share on the "
            "same pairs of systems; named alone above the rule's z, or as one of a cluster of "
            "raters lifting one system.",
        ),
    ]
    replicates = section["bootstrap"]["replicates"]
    for track, entry in section["tracks"].items():
        note = (
            f"Davidson's Bradley-Terry model with ties over {entry['votes']} answers to A/B "
            f"trials (both questions) by {entry['raters']} raters; tie parameter "
            f"{entry['tie']:g}. Intervals: {replicates} bootstrap replicates over raters. A "
            f"system is ranked from {section['min_votes']} answers on."
        )
        out.append(
            Table(
                f"leaderboard-pairwise-{track}",
                f"Track {track}: A/B votes",
                PAIRWISE_COLUMNS,
                entry["systems"],
                track=track,
                note=note,
            )
        )
        matrix = entry["win_probability"]
        systems = matrix["systems"]
        rows = [
            {"system": system, **{f"p_{n}": p for n, p in enumerate(line)}}
            for system, line in zip(systems, matrix["matrix"], strict=True)
        ]
        columns = [Column("system", "Wins against"), *(
            Column(f"p_{n}", name) for n, name in enumerate(systems)
        )]  # fmt: skip
        out.append(
            Table(
                f"pairwise-win-probability-{track}",
                f"Track {track}: probability that the row's system wins against the column's",
                columns,
                rows,
                note="From the fitted strengths and tie parameter, ranked systems only; what "
                "is left to one of a pair and its transpose is the tie's share.",
            )
        )
    return out
