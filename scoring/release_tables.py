"""The data release's tables and files, declared: each table's title, description and
columns (their types and meaning), as the datasheet and the Data Package descriptor describe them
(scoring/release.py builds the release)."""

from __future__ import annotations

from dataclasses import dataclass

# The files score_offline --release reads (scoring/offline.py names them too).
SCORING_FILE = "scoring.json"


@dataclass(frozen=True)
class Field:
    name: str
    type: str  # a Frictionless Table Schema type
    description: str


def field(name: str, type_: str, description: str) -> Field:
    return Field(name, type_, description)


# The rater columns every table of answers shares.
RATER = field("rater", "string", "The rater's pseudonym: a salted hash, the same in every table.")
# Columns several tables of answers share.
RATER_TEAM = field("rater_team", "string", "The rater's own team (empty: outside every team).")
CATEGORY = field("category", "string", "The category's slug.")
SESSION = field("session", "string", "The rater's category session (pseudonym-number).")
RATER_KIND = field("rater_kind", "string", "participant, invited, crowd or organizer.")
FLAGS = field("flags", "string", "Every rater-quality rule that named the session, with why.")
EXCLUDED = field("excluded", "boolean", "Whether the published scoring set the session aside.")
EXCLUDED_BECAUSE = field(
    "excluded_because", "string", "The published scoring's reasons, when excluded."
)
LISTENING = [
    field(
        "plays", "integer", "Times the sound was played before the answer (empty: not recorded)."
    ),
    field("seeks", "integer", "Times the rater moved the play head."),
    field("heard_fraction", "number", "Share of the sound heard before the answer (0 to 1)."),
    field("answer_s", "number", "Seconds from the sound's first play to the answer."),
]
SYSTEM_COLUMNS = [
    field("system", "string", "The system's name (empty for anchors and gold)."),
    field("system_id", "string", "The system's public id (empty for anchors and gold)."),
    field("team", "string", "The team that submitted the system."),
    field("track", "string", "The system's track code."),
]

# Each table of the bundle: its file, title, description and columns, in order.
TABLES: dict[str, tuple[str, str, list[Field]]] = {
    "ratings": (
        "Quality and fit ratings",
        "One row per quality/fit answer of the listening test, anchors and gold included, with "
        "the rater-quality rules' verdict on its session and how the sound was heard. The "
        "columns rater to fit are score_offline's input.",
        [
            RATER,
            RATER_TEAM,
            SESSION,
            CATEGORY,
            field("system", "string", "The system's name (empty for anchors and gold)."),
            field("track", "string", "The system's track code."),
            field(
                "stimulus", "string", "sha256 of the sound rated (see stimuli.csv, anchors.csv)."
            ),
            field(
                "role",
                "string",
                "trial, anchor_hq_goodfit, anchor_hq_poorfit, anchor_lq_poorfit or gold.",
            ),
            field("quality", "number", "Audio quality, 0 to 10."),
            field("fit", "number", "Fit to the category, 0 to 10."),
            RATER_KIND,
            field("expected_quality_min", "integer", "Gold: lowest quality the instruction asks."),
            field("expected_quality_max", "integer", "Gold: highest quality the instruction asks."),
            field("expected_fit_min", "integer", "Gold: lowest fit the instruction asks."),
            field("expected_fit_max", "integer", "Gold: highest fit the instruction asks."),
            *LISTENING,
            field(
                "platform",
                "string",
                "Why the crowd platform's record takes the rater's ratings "
                "out (empty when it does not).",
            ),
            FLAGS,
            field("system_id", "string", "The system's public id."),
            field("system_team", "string", "The team that submitted the system."),
            EXCLUDED,
            EXCLUDED_BECAUSE,
        ],
    ),
    "diversity": (
        "Diversity ratings",
        "One row per diversity answer (a system's set of sounds in a category).",
        [
            RATER,
            RATER_TEAM,
            CATEGORY,
            field("system", "string", "The system's name."),
            field("track", "string", "The system's track code."),
            field("diversity", "number", "Diversity, 0 to 10."),
            *LISTENING,
            field("system_id", "string", "The system's public id."),
            field(
                "excluded",
                "boolean",
                "Whether the published scoring set the answer aside (its "
                "rater's session of the category was excluded).",
            ),
        ],
    ),
    "screening": (
        "Screening results",
        "One row per attempt at a screening check (level, headphones, hearing).",
        [
            RATER,
            RATER_KIND,
            field("step", "string", "level, headphones or hearing."),
            field("attempt", "integer", "1 for the first attempt at the step."),
            field("state", "string", "open, passed or failed."),
            field("score", "number", "Trials right (headphones) or the SRT in dB SNR (hearing)."),
            field("summary", "string", "The result in words, as the platform wrote it."),
        ],
    ),
    "stimuli": (
        "Stimuli",
        "Every system sound of the listening test, by sha256; audio/<sha256>.wav is in the "
        "release where the system's team consented.",
        [
            field("sha256", "string", "sha256 of the canonical WAV."),
            CATEGORY,
            *SYSTEM_COLUMNS,
            field("duration_s", "number", "Duration in seconds."),
            field("sample_rate", "integer", "Sample rate in Hz."),
            field("audio_included", "boolean", "Whether audio/<sha256>.wav is in this release."),
        ],
    ),
    "anchors": (
        "Anchors and gold sounds",
        "The hidden checks: anchors by kind, gold sounds with the answer they ask for; by sha256 "
        "only, never with their audio.",
        [
            field("sha256", "string", "sha256 of the sound raters heard."),
            field(
                "role", "string", "anchor_hq_goodfit, anchor_hq_poorfit, anchor_lq_poorfit or gold."
            ),
            field("category", "string", "The anchor's category (empty for gold)."),
            field("quality_min", "integer", "Gold: lowest quality it asks."),
            field("quality_max", "integer", "Gold: highest quality it asks."),
            field("fit_min", "integer", "Gold: lowest fit it asks."),
            field("fit_max", "integer", "Gold: highest fit it asks."),
            field(
                "vote",
                "string",
                "Gold of A/B trials: the vote it asks for on both questions, this (its own "
                "side), other or tie (its ranges then span the scales).",
            ),
        ],
    ),
    "fad": (
        "FAD and KAD",
        "The objective stage's distances per embedding model, system and category (lower is "
        "closer to the reference); score_offline's FAD input.",
        [
            field("model", "string", "The embedding model's id."),
            field("system", "string", "The system's name."),
            field("track", "string", "The system's track code."),
            CATEGORY,
            field("fad_dev", "number", "FAD against the development set."),
            field("fad_eval", "number", "FAD against the evaluation set."),
        ],
    ),
    "predictors": (
        "Learned predictors",
        "The objective stage's learned predictors (Audiobox Aesthetics' PQ, PC, CE, CU on its "
        "1-10 scale; PAM, 0 to 1; higher is better) per system, category and axis: the mean "
        "over the system's clips with its 95% Student's t interval; score_offline's predictors "
        "input. Only in a release of results scored with them.",
        [
            field("system", "string", "The system's name."),
            field("track", "string", "The system's track code."),
            CATEGORY,
            field("predictor", "string", "aesthetics or pam."),
            field("axis", "string", "PQ, PC, CE, CU (aesthetics) or PAM."),
            field("clips", "integer", "The system's clips of the category that were rated."),
            field("mean", "number", "The mean of the clips' values."),
            field("low", "number", "The 95% interval's lower end (empty below 2 clips)."),
            field("high", "number", "The 95% interval's upper end (empty below 2 clips)."),
            field(
                "model_id",
                "string",
                "The predictor and its files' sha256 prefixes; '(untrained stand-in)' where "
                "the files were random weights, whose values mean nothing.",
            ),
            *(
                field(
                    f"mean_{n}",
                    "number",
                    f"The mean on one draw of {n} of the clips (empty where there are no more).",
                )
                for n in (25, 50, 100)
            ),
            field("system_id", "string", "The system's public id."),
        ],
    ),
    "votes": (
        "Votes on A/B trials",
        "One row per vote and question of a listening test of the pairs design, hidden anchors' "
        "A/B trials included, with the rater-quality rules' verdict on its session and how each "
        "side was heard. The columns rater to winner are score_offline's pairs input. Only in a "
        "release of results scored with votes.",
        [
            RATER,
            RATER_TEAM,
            CATEGORY,
            field("track", "string", "The systems' track code."),
            field("left_system", "string", "Side A's system (empty for an anchor)."),
            field("right_system", "string", "Side B's system (empty for an anchor)."),
            field(
                "left_stimulus",
                "string",
                "sha256 of side A's sound (see stimuli.csv, anchors.csv).",
            ),
            field("right_stimulus", "string", "sha256 of side B's sound."),
            field("winner", "string", "left (A), right (B) or tie."),
            SESSION,
            field("question", "string", "quality or fit."),
            field(
                "role",
                "string",
                "pair; anchor_pair for a hidden anchor against a sound; gold_pair for a gold "
                "sound against a sound.",
            ),
            field(
                "expected",
                "string",
                "anchor_pair and gold_pair: the known winner (empty: not known).",
            ),
            RATER_KIND,
            *(
                field(f"{side}_{f.name}", f.type, f"Side {letter}: {f.description}")
                for side, letter in (("left", "A"), ("right", "B"))
                for f in LISTENING[:3]
            ),
            field("heard_fraction", "number", "The less heard side's share heard."),
            field("answer_s", "number", "Seconds from the A/B trial's turn to the vote."),
            field(
                "platform",
                "string",
                "Why the crowd platform's record takes the rater's votes out (empty when not).",
            ),
            FLAGS,
            field("left_system_id", "string", "Side A's system's public id."),
            field("right_system_id", "string", "Side B's system's public id."),
            EXCLUDED,
            EXCLUDED_BECAUSE,
        ],
    ),
    "teams": (
        "Systems and teams",
        "Every system of the challenge; score_offline's teams input.",
        [
            field("system", "string", "The system's name."),
            field("team", "string", "The team that submitted it."),
            field("track", "string", "Its track code."),
            field("system_id", "string", "Its public id."),
            field("release_audio", "boolean", "Whether its team consented to its audio's release."),
        ],
    ),
}
# Columns a FAD row may add (intervals, FAD-inf, KAD, subsets): described by their name's parts.
FAD_PARTS = {
    "fad": "FAD",
    "kad": "KAD",
    "dev": "against the development set",
    "eval": "against the evaluation set",
    "inf": "extrapolated to infinitely many clips (FAD-inf)",
    "low": "interval's lower end",
    "high": "interval's upper end",
}
OTHER_FILES = {
    "result.json": "The snapshot's published result, raters under their pseudonyms.",
    SCORING_FILE: "The scoring settings, the code version and the FAD model of the snapshot.",
    "challenge.yaml": "The challenge's definition the snapshot was computed under (categories, "
    "tracks, clip spec, listening design, rules); score_offline --challenge reads its scoring "
    "settings.",
    "metadata.json": "DOI-ready metadata: title, creators, version, date, licence.",
    "README.md": "This datasheet.",
    "datapackage.json": "The Frictionless Data Package descriptor of every table.",
}
