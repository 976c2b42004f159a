"""Rescore released data from CSV files, with or without Django:

    python -m scoring.offline --ratings R.csv --diversity D.csv --fad F.csv --teams T.csv

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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ratings", required=True, type=Path, help="Listening-test ratings CSV.")
    parser.add_argument("--diversity", required=True, type=Path, help="Diversity ratings CSV.")
    parser.add_argument(
        "--fad",
        required=True,
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
    parser.add_argument("--teams", required=True, type=Path, help="CSV: system, team, track.")
    parser.add_argument(
        "--settings-json",
        type=Path,
        help='JSON file with scoring rules to override, e.g. {"exclude_at": 4}.',
    )
    parser.add_argument("--seed", type=int, help="Bootstrap seed (default: the rules' seed).")
    parser.add_argument("--bootstrap", type=int, help="Bootstrap replicates (0: no intervals).")
    parser.add_argument("--indent", type=int, default=None, help="Pretty-print the JSON.")


def run(options: dict) -> str:
    """The JSON text for parsed options; ScoringInputError says what is wrong with the input."""
    overrides: dict = {}
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
