"""Rescore released data from CSV files, with or without Django:

    python -m scoring.offline --ratings R.csv --diversity D.csv --fad F.csv --teams T.csv
    python -m scoring.offline --release DIR

(`--release`: a data release's directory, scoring/release.py: its four tables, and the scoring
settings and FAD model in its scoring.json.)

`python manage.py score_offline` takes the same arguments and prints the same JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .compute import score_files
from .inputs import ScoringInputError
from .rules import Rules

# The files of a data release that the scoring reads.
RELEASE_FILES = {
    "ratings": "ratings.csv",
    "diversity": "diversity.csv",
    "fad": "fad.csv",
    "teams": "teams.csv",
}
RELEASE_SCORING = "scoring.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--release",
        type=Path,
        help="A data release's directory: its ratings, diversity, FAD and teams tables and its "
        "scoring settings (instead of the four files and --settings-json).",
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
    given = [f"--{n}" for n in (*RELEASE_FILES, "settings_json") if options.get(n)]
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
        "fad_model": options.get("fad_model") or scoring.get("fad_model", ""),
        "settings": scoring.get("settings") or {},
    }


def run(options: dict) -> str:
    """The JSON text for parsed options; ScoringInputError says what is wrong with the input."""
    if options.get("release"):
        options = release_options(options)
    missing = [f"--{name}" for name in RELEASE_FILES if not options.get(name)]
    if missing:
        raise ScoringInputError(f"missing {', '.join(missing)} (or give --release)")
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
        rules = Rules.from_dict(overrides)
    except TypeError as exc:
        raise ScoringInputError(f"bad scoring settings: {exc}") from exc
    result = score_files(
        options["ratings"],
        options["diversity"],
        options["fad"],
        options["teams"],
        rules,
        fad_model=options.get("fad_model") or "",
    )
    return json.dumps(result, indent=options.get("indent"), ensure_ascii=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scoring.offline", description=__doc__)
    add_arguments(parser)
    options = vars(parser.parse_args(argv))
    try:
        text = run(options)
    except ScoringInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
