"""The listening test's answer tables as columns: what the ratings, votes and diversity exports
hold, and the columns of them the scoring reads (scoring.inputs takes them from here). Plain
Python: the scoring imports it with no Django."""

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
# The pairwise table `score_offline --pairs` reads: the rater and their team, the category and
# track, each side's system and sound, and the winner (left, right or tie).
PAIR_COLUMNS = (
    "rater",
    "rater_team",
    "category",
    "track",
    "left_system",
    "right_system",
    "left_stimulus",
    "right_stimulus",
    "winner",
)
# What the scoring reads of each vote on an A/B trial, one row per vote and question: the
# pairwise table's columns, then the session and the question (quality, fit).
SCORED_VOTE_COLUMNS = (*PAIR_COLUMNS, "session", "question")
# The votes table the listening test writes: the scored columns, then what the rater-quality
# rules read (the A/B trial's role, `pair` or, a hidden anchor against a stimulus, `anchor_pair`
# with the question's known winner where there is one; the rater's kind, each side's listening
# record, the share of the less heard side, the seconds from the A/B trial's turn to the vote,
# the crowd platform's record) and their verdict.
VOTE_COLUMNS = (
    *SCORED_VOTE_COLUMNS,
    "role",
    "expected",
    "rater_kind",
    "left_plays",
    "left_seeks",
    "left_heard_fraction",
    "right_plays",
    "right_seeks",
    "right_heard_fraction",
    "heard_fraction",
    "answer_s",
    "platform",
    "flags",
)
