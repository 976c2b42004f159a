"""The learned predictors beside FAD and KAD: each system's mean of every predictor axis on the
leaderboards, and the [system, category] values the metric league ranks (scoring/league.py).
No Django here.

Input rows (`Inputs.predictors`, PREDICTOR_COLUMNS; what the objective stage's
`predictor_summary` gives): one per system, category and axis, with the number of clips, their
mean and its 95% Student's t interval (`low`, `high`; empty below 2 clips), and optionally
`mean_25`, `mean_50`, `mean_100`, the mean on one draw of that many clips (the league's
stability).

On the leaderboard an axis is keyed by its name in lower case (`pq`, `pc`, `ce`, `cu`, `pam`).
A system's value over categories is the mean of its categories' means, as every other value of
the leaderboard is (with DCASE's equal clips per category, the mean over its clips), with an
interval from the categories' intervals added in quadrature (their clips are distinct).

Direction: a higher predictor value means a better sound, where a lower FAD or KAD does. The
league ranks each axis with its sign turned, so that +1 means the same for every metric there:
the metric's better end goes with the better listening score.

Untrained stand-ins: where a row's `model_id` says its values came from the platform's untrained
stand-in files (the demo's, stimuli/objective/predictors/standins.py), the predictor's name says
so too (`Audiobox Aesthetics (untrained stand-in)`) and its axes carry `untrained`, so every
table, download and league row of them says their values mean nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from stimuli.predictor_axes import UNTRAINED_MARK

from .inputs import ScoringInputError, cell_number, cell_text, check_columns
from .league import SUBSET_SIZES
from .statistics import rounded

# The axes in the leaderboard's order: Audiobox Aesthetics' four, then PAM; any other after.
AXIS_ORDER = ("PQ", "PC", "CE", "CU", "PAM")
# How each predictor is named on the pages.
PREDICTOR_NAMES = {"aesthetics": "Audiobox Aesthetics", "pam": "PAM"}
# The columns a predictor row must have; `clips`, `low`, `high` and the draws may be empty.
REQUIRED = ("system", "category", "predictor", "axis", "mean")


def axis_label(predictor: str, axis: str) -> str:
    """A column's heading: `Aesthetics PQ`, or `PAM` for a predictor of one axis of its name."""
    if axis.lower() == predictor.lower():
        return axis
    return f"{PREDICTOR_NAMES.get(predictor, predictor).removeprefix('Audiobox ')} {axis}"


@dataclass(frozen=True)
class PredictorTable:
    """The predictors' means per system, category and axis, with their intervals and the means
    on fewer clips; `axes` in column order, each {predictor, name, axis, key, label}."""

    categories: list[str]
    axes: list[dict] = field(default_factory=list)
    # (system, category, axis) -> (mean, (low, high) or None)
    values: Mapping[tuple[str, str, str], tuple[float, tuple | None]] = field(default_factory=dict)
    # (system, category, axis, clips) -> the mean on one draw of that many clips
    subsets: Mapping[tuple[str, str, str, int], float] = field(default_factory=dict)
    track_of: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_subsets(self) -> bool:
        return bool(self.subsets)

    def cell(self, system: str, category: str) -> dict:
        """Each axis's mean over one category's clips, with its interval."""
        out: dict = {}
        for axis in self.axes:
            found = self.values.get((system, category, axis["axis"]))
            out[axis["key"]] = rounded(found[0]) if found else None
            out[f"{axis['key']}_ci"] = _ci(found[1]) if found else None
        return out

    def summary(self, system: str) -> dict:
        """Each axis's mean over the categories with a value, and its interval (None unless
        each of those categories has one)."""
        out: dict = {}
        for axis in self.axes:
            found = [
                hit
                for category in self.categories
                if (hit := self.values.get((system, category, axis["axis"]))) is not None
            ]
            out[axis["key"]] = rounded(sum(v for v, _ in found) / len(found)) if found else None
            out[f"{axis['key']}_ci"] = None
            if found and all(ci is not None for _, ci in found):
                n, mean = len(found), sum(v for v, _ in found) / len(found)
                below = math.sqrt(sum((v - ci[0]) ** 2 for v, ci in found)) / n
                above = math.sqrt(sum((ci[1] - v) ** 2 for v, ci in found)) / n
                out[f"{axis['key']}_ci"] = [rounded(mean - below), rounded(mean + above)]
        return out

    def matrix(self, systems: Sequence[str], axis: str, size: int | None = None) -> np.ndarray:
        """[system, category] means of one axis, NaN where there is none; with `size`, the
        means on that many clips (NaN where the system has no more clips: its own stands)."""
        out = np.full((len(systems), len(self.categories)), np.nan)
        for i, system in enumerate(systems):
            for j, category in enumerate(self.categories):
                if size is None:
                    found = self.values.get((system, category, axis))
                    value = found[0] if found else None
                else:
                    value = self.subsets.get((system, category, axis, size))
                if value is not None:
                    out[i, j] = value
        return out


def _ci(pair) -> list | None:
    return [rounded(pair[0]), rounded(pair[1])] if pair else None


def predictor_table(rows: Sequence[Mapping], categories: list[str]) -> PredictorTable:
    """The predictor rows read and checked (ScoringInputError names the row and why)."""
    if not rows:
        return PredictorTable(categories)
    check_columns(rows, REQUIRED, "predictors")
    values: dict[tuple[str, str, str], tuple[float, tuple | None]] = {}
    subsets: dict[tuple[str, str, str, int], float] = {}
    track_of: dict[str, str] = {}
    predictor_of: dict[str, str] = {}
    untrained: set[str] = set()
    for line, row in enumerate(rows, start=1):
        system, category = cell_text(row["system"]), cell_text(row["category"])
        axis, predictor = cell_text(row["axis"]), cell_text(row["predictor"])
        if not (system and category and axis and predictor):
            raise ScoringInputError(
                f"predictors row {line}: empty system, category, predictor or axis"
            )
        if predictor_of.setdefault(axis, predictor) != predictor:
            raise ScoringInputError(
                f"predictors row {line}: axis {axis!r} of {predictor!r} is {predictor_of[axis]!r}'s"
            )
        if (system, category, axis) in values:
            raise ScoringInputError(
                f"predictors row {line}: {axis} of {system} in {category} given twice"
            )
        low = cell_number(row.get("low"), "predictors", line, optional=True)
        high = cell_number(row.get("high"), "predictors", line, optional=True)
        interval = (low, high) if math.isfinite(low) and math.isfinite(high) else None
        values[(system, category, axis)] = (cell_number(row["mean"], "predictors", line), interval)
        track_of.setdefault(system, cell_text(row.get("track")))
        if UNTRAINED_MARK in cell_text(row.get("model_id")):
            untrained.add(predictor)
        for size in SUBSET_SIZES:
            drawn = cell_number(row.get(f"mean_{size}"), "predictors", line, optional=True)
            if math.isfinite(drawn):
                subsets[(system, category, axis, size)] = drawn
    place = {axis: i for i, axis in enumerate(AXIS_ORDER)}
    axes = [
        axis_entry(predictor, axis, predictor in untrained)
        for axis, predictor in sorted(
            predictor_of.items(), key=lambda item: (place.get(item[0], len(place)), item[0])
        )
    ]
    return PredictorTable(categories, axes, values, subsets, track_of)


def axis_entry(predictor: str, axis: str, untrained: bool) -> dict:
    """An axis as the result lists it: {predictor, name, axis, key, label}, and `untrained`
    (the name saying so too) where its values came from untrained stand-ins."""
    name = PREDICTOR_NAMES.get(predictor, predictor)
    return {
        "predictor": predictor,
        "name": f"{name} {UNTRAINED_MARK}" if untrained else name,
        "axis": axis,
        "key": axis.lower(),
        "label": axis_label(predictor, axis),
        **({"untrained": True} if untrained else {}),
    }
