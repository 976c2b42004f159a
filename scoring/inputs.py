"""The scoring's input tables: their columns, reading and checking rows, and the hashes a
published result records of them. No Django here."""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from raters.columns import SCORED_DIVERSITY_COLUMNS, SCORED_RATING_COLUMNS, SCORED_VOTE_COLUMNS
from stimuli.errors import Refused
from stimuli.exports import read_cell

from .league import SUBSET_SIZES, fad_models, has_kad

# The listening test's tables as the scoring reads them, declared where they are written.
RATING_COLUMNS = SCORED_RATING_COLUMNS
DIVERSITY_COLUMNS = SCORED_DIVERSITY_COLUMNS
VOTE_COLUMNS = SCORED_VOTE_COLUMNS
FAD_COLUMNS = ("system", "track", "category", "fad_dev", "fad_eval")
# Optional FAD-inf columns: present when the objective settings compute FAD-inf.
FAD_INF_COLUMNS = ("fad_dev_inf", "fad_eval_inf")
# Optional KAD columns: KAD beside FAD against the same references (where they are audio).
KAD_COLUMNS = ("kad_dev", "kad_eval")
# The distances a FAD row may carry, each against the development and the evaluation reference.
METRICS = ("fad", "kad")
# Optional: each distance on one draw of 25, 50, 100 clips (the league's stability).
SUBSET_COLUMNS = tuple(
    f"{metric}_{ref}_{size}"
    for metric in METRICS
    for ref in ("dev", "eval")
    for size in SUBSET_SIZES
)
TEAM_COLUMNS = ("system", "team", "track")
# The learned predictors' summary, one row per system, category and axis (optional: a challenge
# whose predictors have not run has none): the mean of the clips' values and its interval.
PREDICTOR_COLUMNS = (
    "system", "track", "category", "predictor", "axis", "clips", "mean", "low", "high",
)  # fmt: skip
# Optional: the files that gave the values, and the mean on one draw of 25, 50, 100 clips.
PREDICTOR_HASH_COLUMNS = (
    *PREDICTOR_COLUMNS, "model_id", *(f"mean_{size}" for size in SUBSET_SIZES),
)  # fmt: skip

TRIAL = "trial"
SCALES = ("quality", "fit", "diversity")
SCALE_MAX = 10  # every slider runs from 0 to 10


class ScoringInputError(Refused, ValueError):
    """Rows that cannot be scored; the message says which row or column and why."""


@dataclass
class Inputs:
    ratings: list[dict]
    diversity: list[dict]
    fad: list[dict]
    teams: list[dict]
    # With a `model` column in the FAD rows: the model whose FAD the leaderboard shows (default:
    # the first named); every model enters the embedding league (scoring/league.py).
    fad_model: str = ""
    # The learned predictors' means per system, category and axis (PREDICTOR_COLUMNS), beside
    # FAD and KAD on the leaderboards and in the metric league (scoring/predictors.py).
    predictors: list[dict] = field(default_factory=list)
    # The pairs design's votes on A/B trials, one row per vote and question (VOTE_COLUMNS;
    # scoring/votes.py): scored by Davidson's Bradley-Terry model beside the ratings' result.
    pairs: list[dict] = field(default_factory=list)

    def hashes(self) -> dict[str, str]:
        """sha256 of each input table in a canonical form (row order does not matter)."""
        fad_columns = (*FAD_COLUMNS, "model") if fad_models(self.fad) else FAD_COLUMNS
        if has_fad_infinity(self.fad):
            fad_columns = (*fad_columns, *FAD_INF_COLUMNS)
        if has_kad(self.fad):
            fad_columns = (*fad_columns, *KAD_COLUMNS)
        if any(name in row for row in self.fad for name in SUBSET_COLUMNS):
            fad_columns = (*fad_columns, *SUBSET_COLUMNS)
        tables = [
            ("ratings", self.ratings, RATING_COLUMNS),
            ("diversity", self.diversity, DIVERSITY_COLUMNS),
            ("fad", self.fad, fad_columns),
            ("teams", self.teams, TEAM_COLUMNS),
        ]
        if self.predictors:  # a result without predictor values records no table of them
            tables.append(("predictors", self.predictors, PREDICTOR_HASH_COLUMNS))
        if self.pairs:  # nor one without votes
            tables.append(("votes", self.pairs, VOTE_COLUMNS))
        return {name: table_hash(rows, columns) for name, rows, columns in tables}


NUMERIC_COLUMNS = {
    "quality", "fit", "diversity", "fad_dev", "fad_eval", *FAD_INF_COLUMNS, *KAD_COLUMNS,
    *SUBSET_COLUMNS, "clips", "mean", "low", "high", *(f"mean_{size}" for size in SUBSET_SIZES),
}  # fmt: skip


def has_fad_infinity(fad_rows: Iterable[Mapping]) -> bool:
    """Whether the FAD rows carry FAD-inf columns (values may still be empty where a set was
    too small for one)."""
    return any(name in row for row in fad_rows for name in FAD_INF_COLUMNS)


def _canonical(value, numeric: bool) -> str:
    if value is None:
        return ""
    if numeric:
        text = str(value).strip()
        try:
            # 7, "7" and 7.0 are the same rating whether read from a CSV file or the database.
            return repr(float(text)) if text else ""
        except ValueError:
            return text
    return str(value).strip()


def table_hash(rows: Iterable[Mapping], columns: Sequence[str]) -> str:
    """sha256 of a table in a canonical form: row order and number spelling do not matter."""
    numeric = [c in NUMERIC_COLUMNS for c in columns]
    lines = sorted(
        "\x1f".join(_canonical(row.get(c), n) for c, n in zip(columns, numeric, strict=True))
        for row in rows
    )
    digest = hashlib.sha256("\x1f".join(columns).encode())
    digest.update(b"\n")
    digest.update("\n".join(lines).encode())
    return digest.hexdigest()


def read_csv(path: str | Path, columns: Sequence[str]) -> list[dict]:
    """Rows of a CSV file that has (at least) the given columns in its header."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in columns if c not in (reader.fieldnames or [])]
            if missing:
                raise ScoringInputError(
                    f"{path.name}: missing column(s) {', '.join(missing)}; "
                    f"expected {', '.join(columns)}"
                )
            # The platform's exports escape formula-like cells (stimuli/exports.py): read back
            # as written.
            return [
                {k: read_cell(v) if isinstance(v, str) else v for k, v in row.items()}
                for row in reader
            ]
    except OSError as exc:
        raise ScoringInputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def cell_text(value) -> str:
    return "" if value is None else str(value).strip()


def cell_number(value, what: str, line: int, *, optional: bool = False) -> float:
    text = cell_text(value)
    if text == "" and optional:
        return math.nan
    try:
        number = float(text)
    except ValueError:
        raise ScoringInputError(f"{what} row {line}: {text!r} is not a number") from None
    if not math.isfinite(number):
        raise ScoringInputError(f"{what} row {line}: {text!r} is not a finite number")
    return number


def scale_value(value, what: str, column: str, line: int) -> float:
    number = cell_number(value, what, line)
    if not 0 <= number <= SCALE_MAX:
        raise ScoringInputError(
            f"{what} row {line}: {column} {number:g} is outside the scale (0 to {SCALE_MAX})"
        )
    return number


def check_columns(rows: Sequence[Mapping], columns: Sequence[str], what: str) -> None:
    for line, row in enumerate(rows, start=1):
        missing = [c for c in columns if c not in row]
        if missing:
            raise ScoringInputError(f"{what} row {line}: missing {', '.join(missing)}")
