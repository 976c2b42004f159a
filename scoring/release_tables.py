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
            field("rater_team", "string", "The rater's own team (empty: outside every team)."),
            field("session", "string", "The rater's category session (pseudonym-number)."),
            field("category", "string", "The category's slug."),
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
            field("rater_kind", "string", "participant, invited, crowd or organizer."),
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
            field("flags", "string", "Every rater-quality rule that named the session, with why."),
            field("system_id", "string", "The system's public id."),
            field("system_team", "string", "The team that submitted the system."),
            field("excluded", "boolean", "Whether the published scoring set the session aside."),
            field("excluded_because", "string", "The published scoring's reasons, when excluded."),
        ],
    ),
    "diversity": (
        "Diversity ratings",
        "One row per diversity answer (a system's set of sounds in a category).",
        [
            RATER,
            field("rater_team", "string", "The rater's own team (empty: outside every team)."),
            field("category", "string", "The category's slug."),
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
            field("rater_kind", "string", "participant, invited, crowd or organizer."),
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
            field("category", "string", "The category's slug."),
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
            field("category", "string", "The category's slug."),
            field("fad_dev", "number", "FAD against the development set."),
            field("fad_eval", "number", "FAD against the evaluation set."),
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
