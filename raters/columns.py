"""The listening test's answer tables as columns: what the ratings and diversity exports hold,
and the columns of them the scoring reads (scoring.inputs takes them from here). Plain Python:
the scoring imports it with no Django."""

from __future__ import annotations

# What the scoring reads of each quality/fit rating: the rater (a pseudonymous code) and their
# team, the session and category, the system, its track and the sound, the trial's role (a
# trial, an anchor type, gold) and the two answers.
SCORED_RATING_COLUMNS = (
    "rater",
    "rater_team",
    "session",
    "category",
    "system",
    "track",
    "stimulus",
    "role",
    "quality",
    "fit",
)
# The ratings table the listening test writes: the scored columns, then what the rater-quality
# rules (raters.rules) read, and their verdict.
RATING_COLUMNS = (
    *SCORED_RATING_COLUMNS,
    "rater_kind",
    # What a gold trial asks for (empty for the others): the gold rule reads them.
    "expected_quality_min",
    "expected_quality_max",
    "expected_fit_min",
    "expected_fit_max",
    "plays",
    "seeks",
    "heard_fraction",
    "answer_s",
    # Why the crowd platform's record takes the rater's ratings out ("" when it does not).
    "platform",
    "flags",
)
FLAGS_COLUMN = "flags"
# What the scoring reads of each diversity rating.
SCORED_DIVERSITY_COLUMNS = ("rater", "rater_team", "category", "system", "track", "diversity")
# The diversity table the listening test writes: the scored columns and how it was heard.
DIVERSITY_COLUMNS = (
    *SCORED_DIVERSITY_COLUMNS,
    "plays",
    "seeks",
    "heard_fraction",
    "answer_s",
)
