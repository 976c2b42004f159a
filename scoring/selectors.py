"""Read-only views of published results: snapshots and the tables that pages, downloads and the
API all show."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Max, Q, QuerySet

from raters.models import CategorySession, ListeningTest, TextPromptStudy
from stimuli.exports import to_csv
from stimuli.models import Challenge

from .models import Snapshot


def published_challenges() -> QuerySet[Challenge]:
    """Challenges with public results, each with its newest public snapshot's number."""
    return (
        Challenge.objects.filter(snapshots__public=True)
        .annotate(latest_snapshot=Max("snapshots__number", filter=Q(snapshots__public=True)))
        .order_by("name")
    )


def snapshots(challenge: Challenge, *, organizer: bool = False) -> QuerySet[Snapshot]:
    """A challenge's snapshots, newest first: all of them for organizers, else the public ones."""
    found = Snapshot.objects.filter(challenge=challenge)
    if not organizer:
        found = found.filter(public=True)
    return found.order_by("-number")


def latest_snapshot(challenge: Challenge, *, organizer: bool = False) -> Snapshot | None:
    return snapshots(challenge, organizer=organizer).first()


def publication_state(challenge: Challenge) -> dict:
    """What publishing would close and what it keeps, for the organizer's confirmation."""
    test = ListeningTest.objects.filter(challenge=challenge).first()
    study = TextPromptStudy.objects.filter(challenge=challenge).first()
    return {
        "test_open": test is not None and test.is_open,
        "sessions_in_progress": CategorySession.objects.filter(
            rater__challenge=challenge, state=CategorySession.State.OPEN
        ).count(),
        "study_open": study is not None and study.is_open,
        "final_published": challenge.phase == Challenge.Phase.PUBLISHED,
        "snapshot_count": Snapshot.objects.filter(challenge=challenge).count(),
    }


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    ci: bool = False  # the row also has `<key>_ci` = [low, high]


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

    def cells(self) -> list[list[tuple[object, list | None, str]]]:
        """Per row, per column: (value, interval or None, why an interval is withheld)."""
        return [
            [
                (
                    row.get(c.key),
                    row.get(f"{c.key}_ci") if c.ci else None,
                    (row.get("ci_withheld") or {}).get(c.key, "") if c.ci else "",
                )
                for c in self.columns
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


def tables(result: dict) -> list[Table]:
    """Every table of a result, in page order; each can be downloaded as CSV and JSON."""
    out: list[Table] = []
    inf = FAD_INF_COLUMNS if result.get("fad_infinity") else []
    kad, kad_plain = (KAD_COLUMNS, KAD_PLAIN_COLUMNS) if result.get("kad") else ([], [])
    for track, rows in result["tracks"].items():
        # How much each rank rests on a few raters (results published since it is computed).
        robust = [
            Column(key, label)
            for key, label in ROBUSTNESS_COLUMNS
            if any(key in row for row in rows)
        ]
        out.append(
            Table(
                f"leaderboard-{track}",
                f"Track {track}: leaderboard",
                # What ranks the systems first, so that it shows at every width: the rest
                # scrolls sideways in the table's own box.
                [
                    Column("rank", "Rank"),
                    Column("system", "System"),
                    SCALE_COLUMNS[0],
                    Column("p_above_next", "P(above next)"),
                    *robust,
                    *SCALE_COLUMNS[1:],
                    Column("team", "Team"),
                    Column("fad_dev", "FAD-Dev", ci=True),
                    Column("fad_eval", "FAD-Eval", ci=True),
                    *inf,
                    *kad,
                ],
                rows,
                track,
            )
        )
        out.append(
            Table(
                f"categories-{track}",
                f"Track {track}: per category",
                [
                    Column("system", "System"),
                    Column("category", "Category"),
                    *SCALE_COLUMNS,
                    Column("fad_dev", "FAD-Dev", ci=True),
                    Column("fad_eval", "FAD-Eval", ci=True),
                    *inf,
                    *kad,
                ],
                [
                    {"system": row["system"], "category": category, **values}
                    for category in result["categories"]
                    for row in rows
                    for values in [row["categories"].get(category, {})]
                ],
                track,
            )
        )
        out.append(
            Table(
                f"unrated-{track}",
                f"Track {track}: systems without ratings (not finalists, or not rated yet)",
                [
                    Column("system", "System"),
                    Column("team", "Team"),
                    Column("fad_dev", "FAD-Dev"),
                    Column("fad_eval", "FAD-Eval"),
                    *inf,
                    *kad_plain,
                ],
                result.get("unrated_systems", {}).get(track, []),
                track,
            )
        )
        out.append(
            Table(
                f"incomplete-{track}",
                f"Track {track}: systems not ranked, for ratings missing in some categories",
                [
                    Column("system", "System"),
                    Column("team", "Team"),
                    Column("missing", "Missing"),
                    Column("fad_dev", "FAD-Dev"),
                    Column("fad_eval", "FAD-Eval"),
                    *inf,
                    *kad_plain,
                ],
                result.get("incomplete_systems", {}).get(track, []),
                track,
            )
        )
        out.append(
            Table(
                f"pairs-{track}",
                f"Track {track}: probability that each adjacent pair is in the right order",
                [
                    Column("upper", "Ranked above"),
                    Column("lower", "Ranked below"),
                    Column("probability", "Probability"),
                ],
                result["pairs"].get(track, []),
                track,
            )
        )
    out.append(
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
            [{**s, "reasons": "; ".join(s["reasons"])} for s in result["excluded_sessions"]],
        )
    )
    # Results published before the favouritism rule have no such finding.
    favoured = result.get("favouritism") or {"raters": [], "clusters": []}
    out.append(
        Table(
            "favouring-raters",
            "Raters favouring a system",
            [
                Column("rater", "Rater"),
                Column("system", "System"),
                Column("points", "Lift (points)"),
                Column("z", "z"),
                Column("sounds", "Sounds"),
                Column("action", "Action"),
                Column("reason", "Why"),
            ],
            favoured["raters"],
            note="Each rater's answers to a system's sounds against the other raters' answers "
            "to the same sounds, after the rater's own leniency and use of the scale; named "
            "alone above the rule's z, or as one of a cluster of raters lifting one system.",
        )
    )
    out.append(
        Table(
            "favouring-clusters",
            "Systems lifted by a cluster of raters",
            [
                Column("system", "System"),
                Column("raters", "Raters lifting it"),
                Column("expected", "Expected by chance"),
                Column("p", "p"),
            ],
            favoured["clusters"],
        )
    )
    analyses = result["analyses"]
    out.append(
        Table(
            "fad-correlation",
            "Spearman correlation of the FAD rankings with the final ranking",
            [
                Column("track", "Track"),
                Column("n", "Systems"),
                Column("fad_eval", "FAD-Eval"),
                Column("fad_dev", "FAD-Dev"),
                *([Column("kad_eval", "KAD-Eval"), Column("kad_dev", "KAD-Dev")] if kad else []),
            ],
            [{"track": t, **v} for t, v in analyses["fad_spearman"].items()],
        )
    )
    if league := result.get("metric_league"):
        out.append(
            Table(
                "metric-league",
                "Embedding league: each model's FAD and KAD rankings against the listening "
                f"test (Spearman's rho, +1: lower distance, better score; the leaderboard shows "
                f"{league['designated']})",
                [
                    Column("scope", "Track"),
                    Column("model", "Embedding model"),
                    Column("metric", "Distance"),
                    Column("n_systems", "Systems"),
                    Column("spearman", "Spearman (final)", ci=True),
                    Column("kendall", "Kendall"),
                    Column("loso_min", "Leave one out: min"),
                    Column("loso_max", "max"),
                    Column("quality", "vs quality", ci=True),
                    Column("fit", "vs fit", ci=True),
                    Column("diversity", "vs diversity", ci=True),
                ],
                league_rows(league),
            )
        )
        if "tau_50" in next(iter(league["pooled"].values()), {}):
            out.append(
                Table(
                    "league-stability",
                    "Embedding league: how much each model's ranking keeps on fewer clips "
                    "(Kendall's tau with the ranking on all clips; drift of the distance, "
                    "relative to its size; flagged below 0.8 on 50 clips)",
                    STABILITY_COLUMNS,
                    [
                        {**row, "unstable": "reorders" if row.get("unstable") else ""}
                        for row in league_rows(league)
                    ],
                )
            )
    out.append(
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
        )
    )
    out.append(
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
        )
    )
    out.append(
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
        )
    )
    out.append(
        Table(
            "agreement",
            "Inter-rater agreement (Krippendorff's alpha, interval)",
            [Column("scale", "Scale"), Column("alpha", "Alpha")],
            [
                {"scale": scale, "alpha": analyses["agreement"][scale]}
                for scale in ("quality", "fit", "diversity")
            ],
        )
    )
    return out + text_prompt_tables(result)


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


def text_prompt_clap(challenge) -> dict:
    """Per answered prompt set: judge, system, the judge's match and its best clip's CLAP score
    (None until a worker has scored its clips), and what would enable the score if it is not."""
    from raters.models import PromptAnswer, PromptClip
    from stimuli.objective.prompt_scores import clap_setup, stored_scores

    answers = PromptAnswer.objects.filter(
        prompt_set__judge__study__challenge=challenge
    ).select_related("prompt_set__judge__rater", "prompt_set__judge__system")
    answers = list(answers.order_by("prompt_set__judge__rater__index", "prompt_set__position"))
    clips: dict[int, list[int]] = {}
    for set_id, audio_id in PromptClip.objects.filter(
        prompt_set__in=[a.prompt_set_id for a in answers]
    ).values_list("prompt_set_id", "audio_id"):
        clips.setdefault(set_id, []).append(audio_id)
    pairs = [(i, a.prompt_set.prompt) for a in answers for i in clips.get(a.prompt_set_id, [])]
    scores, model_id = stored_scores(pairs)
    sets = []
    for a in answers:
        found = [scores[(i, a.prompt_set.prompt)] for i in clips.get(a.prompt_set_id, [])
                 if (i, a.prompt_set.prompt) in scores]  # fmt: skip
        sets.append(
            {
                "judge": a.prompt_set.judge.rater.code,
                "system": a.prompt_set.judge.system.name,
                "match": a.match,
                "best": round(max(found), 6) if found else None,
            }
        )
    # Published: the files by name, never where the server keeps them.
    return {"sets": sets, "needs": clap_setup().needs_files, "model_id": model_id}


def table(result: dict, name: str) -> Table | None:
    return next((t for t in tables(result) if t.name == name), None)


def league_rows(league: dict) -> list[dict]:
    """One row per track (and all tracks), model and distance: FAD, then KAD where computed."""
    metrics = [("FAD", league), *([("KAD", league["kad"])] if league.get("kad") else [])]
    rows = []
    for scope in [*league["tracks"], "all tracks"]:
        for model in league["models"]:
            for metric, table in metrics:
                entries = table["pooled"] if scope == "all tracks" else table["tracks"][scope]
                if model in entries:
                    rows.append(
                        {"scope": scope, "model": model, "metric": metric, **entries[model]}
                    )
    return rows
