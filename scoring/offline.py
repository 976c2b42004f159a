"""Rescore released data from CSV files, with or without Django:

    python -m scoring.offline --ratings R.csv --diversity D.csv --fad F.csv --teams T.csv
    python -m scoring.offline --release DIR
    python -m scoring.offline --pairs P.csv [--teams T.csv]

(`--release`: a data release's directory, scoring/release.py: its four tables, its learned
predictors' table where it has one, and the scoring settings and FAD model in its
scoring.json. `--pairs`: pairwise A/B votes, scored by Davidson's Bradley-Terry model under
`pairwise`, alone or beside the ratings' result; scoring/votes.py.)

`python manage.py score_offline` takes the same arguments and prints the same JSON; it alone
takes the scoring settings from a challenge's definition file (`--challenge challenge.yaml`, such
as a snapshot's), which is read by the platform's schema.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .compute import score_files
from .inputs import ScoringInputError, read_csv
from .pairwise import read_pairs
from .rules import Rules
from .votes import score_votes

# The files of a data release that the scoring reads.
RELEASE_FILES = {
    "ratings": "ratings.csv",
    "diversity": "diversity.csv",
    "fad": "fad.csv",
    "teams": "teams.csv",
}
# Read where the release holds them: the learned predictors' means, in a release of results
# scored with them; the votes on A/B trials, in a release of a test of the pairs design.
RELEASE_OPTIONAL_FILES = {"predictors": "predictors.csv", "pairs": "votes.csv"}
RELEASE_SCORING = "scoring.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--release",
        type=Path,
        help="A data release's directory: its ratings, diversity, FAD and teams tables, its "
        "predictors table where it has one, and its scoring settings (instead of the files and "
        "--settings-json).",
    )
    parser.add_argument("--ratings", type=Path, help="Listening-test ratings CSV.")
    parser.add_argument("--diversity", type=Path, help="Diversity ratings CSV.")
    parser.add_argument(
        "--fad",
        type=Path,
        help="CSV: system, track, category, fad_dev, fad_eval, and optionally model (one row "
        "per model, system and category: the JSON then holds metric_league), fad_dev_inf and "
        "fad_eval_inf (FAD-inf, then on the leaderboard).",
    )
    parser.add_argument(
        "--fad-model",
        default="",
        help="With a model column: the model whose FAD the leaderboard shows (default: the "
        "first in the file).",
    )
    parser.add_argument("--teams", type=Path, help="CSV: system, team, track.")
    parser.add_argument(
        "--predictors",
        type=Path,
        help="CSV: system, track, category, predictor, axis, clips, mean, low, high (the "
        "learned predictors' means per system, category and axis, optionally mean_25, mean_50, "
        "mean_100): beside FAD on the leaderboard and in metric_league.",
    )
    parser.add_argument(
        "--pairs",
        type=Path,
        help="Pairwise A/B votes, CSV: rater, rater_team, category, track, left_system, "
        "right_system, left_stimulus, right_stimulus, winner (left, right or tie), such as "
        "the listening test's votes export (whose session, question and listening columns the "
        "rater-quality rules then judge); the JSON then holds `pairwise` (with --teams, a "
        "rater's votes on their own team's systems are removed).",
    )
    parser.add_argument(
        "--challenge",
        type=Path,
        help="A challenge's definition file (challenge.yaml; a snapshot's rescores it as "
        "published): the scoring settings are its scoring and rater_rules sections and its "
        "listening test's anchors_per_session (with --release, in place of its scoring.json's "
        "settings). The file decides: --settings-json, --seed and --bootstrap are refused "
        "beside it. Only through manage.py.",
    )
    parser.add_argument(
        "--settings-json",
        type=Path,
        help='JSON file with scoring rules to override, e.g. {"exclude_at": 4}.',
    )
    parser.add_argument("--seed", type=int, help="Bootstrap seed (default: the rules' seed).")
    parser.add_argument("--bootstrap", type=int, help="Bootstrap replicates (0: no intervals).")
    parser.add_argument("--indent", type=int, default=None, help="Pretty-print the JSON.")


def release_options(options: dict) -> dict:
    """The options with a release's files and settings in place of the separate ones."""
    folder = Path(options["release"])
    names = (*RELEASE_FILES, *RELEASE_OPTIONAL_FILES, "settings_json")
    given = [f"--{n}" for n in names if options.get(n)]
    if given:
        raise ScoringInputError(
            f"--release takes its files from the release: drop {', '.join(given)}"
        )
    try:
        scoring = json.loads((folder / RELEASE_SCORING).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ScoringInputError(f"{folder / RELEASE_SCORING}: {exc}") from exc
    return {
        **options,
        **{name: folder / file for name, file in RELEASE_FILES.items()},
        **{
            name: folder / file
            for name, file in RELEASE_OPTIONAL_FILES.items()
            if (folder / file).is_file()
        },
        "fad_model": options.get("fad_model") or scoring.get("fad_model", ""),
        "settings": scoring.get("settings") or {},
    }


# What a definition file sets, and so may not be given beside it.
SETTINGS_OPTIONS = ("settings_json", "seed", "bootstrap")


def run(options: dict) -> str:
    """The JSON text for parsed options; ScoringInputError says what is wrong with the input."""
    if options.get("release"):
        options = release_options(options)
    rules = _rules_of_definition(options) if options.get("challenge") else _rules_of(options)
    # Votes alone: the ratings' four files are not needed.
    pairs_only = options.get("pairs") and not any(
        options.get(n) for n in RELEASE_FILES if n != "teams"
    )
    result: dict = {}
    if not pairs_only:
        missing = [f"--{name}" for name in RELEASE_FILES if not options.get(name)]
        if missing:
            raise ScoringInputError(f"missing {', '.join(missing)} (or give --release)")
        result = score_files(
            options["ratings"],
            options["diversity"],
            options["fad"],
            options["teams"],
            rules,
            fad_model=options.get("fad_model") or "",
            predictors=options.get("predictors"),
        )
    if options.get("pairs"):
        teams = read_csv(options["teams"], ("system", "team")) if options.get("teams") else []
        result["pairwise"] = score_votes(read_pairs(options["pairs"]), teams, rules)
    return json.dumps(result, indent=options.get("indent"), ensure_ascii=False)


def _rules_of_definition(options: dict) -> Rules:
    """The rules of the --challenge file; every problem at once, the options it refuses among
    them."""
    # Django only here: the file's schema is the platform's models' (stimuli.definition); the
    # rest of this module runs without it.
    from django.apps import apps

    if not apps.ready:
        raise ScoringInputError(
            "--challenge reads the file by the platform's schema: run it as "
            "python manage.py score_offline --challenge ..."
        )
    from stimuli.definition import DefinitionError

    from .definition import rules_from_text

    problems = []
    given = [f"--{n.replace('_', '-')}" for n in SETTINGS_OPTIONS if options.get(n) is not None]
    if given:
        # Refused rather than laid on top: the result would no longer be the one the file (a
        # snapshot's, say) gives, and nothing in it would say so.
        problems.append(
            f"--challenge sets the scoring settings: leave out {', '.join(given)} (or edit "
            "the file's scoring and rater_rules sections)"
        )
    path = Path(options["challenge"])
    rules = None
    try:
        rules = rules_from_text(path.read_text(encoding="utf-8"))
    except OSError as exc:
        problems.append(f"{path}: cannot be read ({exc.strerror or exc})")
    except UnicodeDecodeError:
        problems.append(f"{path}: not UTF-8 text")
    except (DefinitionError, ScoringInputError) as exc:
        problems.extend(f"{path.name}: {p}" for p in exc.problems)
    if problems or rules is None:
        raise ScoringInputError(problems)
    return rules


def _rules_of(options: dict) -> Rules:
    # A release's own settings (its scoring.json), then the options on top.
    overrides: dict = dict(options.get("settings") or {})
    if options.get("settings_json"):
        try:
            overrides = json.loads(Path(options["settings_json"]).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ScoringInputError(f"{options['settings_json']}: {exc}") from exc
        if not isinstance(overrides, dict):
            raise ScoringInputError("the settings JSON must be an object")
    for name in ("seed", "bootstrap"):
        if options.get(name) is not None:
            overrides[name] = options[name]
    try:
        return Rules.from_dict(overrides)
    except TypeError as exc:
        raise ScoringInputError(f"bad scoring settings: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scoring.offline", description=__doc__)
    add_arguments(parser)
    options = vars(parser.parse_args(argv))
    try:
        text = run(options)
    except ScoringInputError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
