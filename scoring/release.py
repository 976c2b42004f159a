"""The data release of a published snapshot: a versioned bundle that anyone can rescore.

One directory (and a zip of it) per release: every rating with the rules' verdict on it and how
the sound was heard, the diversity ratings, the screening results, the anchors and gold sounds,
the FAD/KAD values, the learned predictors' means (where they ran), the stimuli's sha256 (and the audio of the systems whose teams consent), the
scoring settings and code version, the snapshot's result, the challenge's definition, a datasheet
(README.md), DOI-ready metadata and a Frictionless `datapackage.json`.

Raters appear under a pseudonym: a salted hash of their code, salted per challenge by a secret
derived from SECRET_KEY, so that the pseudonyms of two challenges cannot be linked and no one
without the secret can link a pseudonym to a rater's code, account or participant id. No
participant id, e-mail, IP address, network or free text goes in any file.

`score_offline --release DIR` rescoring a bundle alone gives the snapshot's numbers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import io
import json
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from raters.columns import DIVERSITY_COLUMNS, RATING_COLUMNS, VOTE_COLUMNS
from raters.models import Anchor, GoldSound, PlatformSubmission, Rater, ScreeningAttempt
from raters.models import Stimulus as TestStimulus
from raters.selectors import diversity_rows, export_vote_rows, rating_rows
from stimuli import definition
from stimuli import selectors as stimuli_selectors
from stimuli.definition.document import dump as dump_definition
from stimuli.errors import Refused
from stimuli.exports import to_csv
from stimuli.jobs import Failed, JobProgress, create_job, enqueue, run_job
from stimuli.models import Challenge, ChallengeRole, Job, System
from stimuli.permissions import may_write
from stimuli.predictor_axes import UNTRAINED_MARK
from stimuli.storage import read_audio

from .inputs import Inputs
from .job_kinds import RELEASE
from .models import DataRelease, Snapshot
from .release_tables import FAD_PARTS, OTHER_FILES, SCORING_FILE, TABLES, Field, field
from .services import predictor_rows

LICENCE = {
    "name": "CC-BY-4.0",
    "title": "Creative Commons Attribution 4.0 International",
    "path": "https://creativecommons.org/licenses/by/4.0/",
}
WITHHELD = "[withheld]"


# --- Pseudonyms and what never goes out -----------------------------------------------------


def salt(challenge: Challenge) -> bytes:
    """The challenge's secret salt: derived from SECRET_KEY, so stored nowhere and different for
    every challenge."""
    key = django_settings.SECRET_KEY.encode()
    return hmac.new(key, f"foley-data-release:{challenge.pk}".encode(), hashlib.sha256).digest()


def pseudonym(secret: bytes, code: str) -> str:
    return "P" + hmac.new(secret, code.encode(), hashlib.sha256).hexdigest()[:12]


class Scrubber:
    """Replaces every rater code by its pseudonym and withholds every identifying string (the
    raters' participant, study and crowd session ids, networks and accounts; the platform's
    submission ids; the organizers' and the challenge's e-mail addresses) in any text."""

    def __init__(self, challenge: Challenge):
        secret = salt(challenge)
        raters = list(
            Rater.objects.filter(challenge=challenge).values_list(
                "code", "participant_id", "study_id", "crowd_session_id", "network",
                "user__username", "user__email",
            )
        )  # fmt: skip
        self.codes = {row[0]: pseudonym(secret, row[0]) for row in raters}
        secrets = {value for row in raters for value in row[1:] if value}
        for values in PlatformSubmission.objects.filter(test__challenge=challenge).values_list(
            "participant_id", "submission_id"
        ):
            secrets.update(v for v in values if v)
        people = get_user_model().objects.filter(challenge_roles__challenge=challenge)
        secrets.update(e for e in people.values_list("email", flat=True) if e)
        if challenge.contact_email:
            secrets.add(challenge.contact_email)
        # Longest first, so that a string inside another is withheld with it.
        self.secrets = sorted(secrets, key=len, reverse=True)
        self._codes = re.compile("|".join(map(re.escape, self.codes))) if self.codes else None

    def text(self, value: str) -> str:
        if self._codes is not None:
            value = self._codes.sub(lambda m: self.codes[m.group(0)], value)
        for secret in self.secrets:
            if len(secret) >= 3 and secret in value:
                value = value.replace(secret, WITHHELD)
        return value

    def value(self, value):
        """Any JSON-like value with its strings (keys too) scrubbed."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value

    def rows(self, rows: Iterable[Mapping]) -> list[dict]:
        return [{k: self.value(v) for k, v in row.items()} for row in rows]


# --- The tables ---------------------------------------------------------------------------------


def _stimulus_hashes(challenge: Challenge) -> dict[str, str]:
    """The export's stimulus codes (raters.selectors.rating_rows) to the sha256 heard."""
    out = {
        s.code: s.clip.audio.sha256
        for s in TestStimulus.objects.filter(challenge=challenge).select_related(
            "system", "category", "clip__audio"
        )
    }
    for pk, sha in Anchor.objects.filter(challenge=challenge).values_list("pk", "audio__sha256"):
        out[f"anchor/{pk}"] = sha
    for pk, sha in GoldSound.objects.filter(challenge=challenge).values_list("pk", "audio__sha256"):
        out[f"gold/{pk}"] = sha
    return out


@dataclass
class Collected:
    ratings: list[dict]
    diversity: list[dict]
    fad: list[dict]
    teams: list[dict]
    fad_model: str
    # The learned predictors' means per system, category and axis ([]: they did not run).
    predictors: list[dict] = dataclasses.field(default_factory=list)
    # The votes on A/B trials ([]: a test of sliders).
    votes: list[dict] = dataclasses.field(default_factory=list)


def collect(snapshot: Snapshot) -> Collected:
    """The snapshot's input tables as the database holds them now, refused unless they are the
    very tables the snapshot was scored from (by their hashes)."""
    challenge = snapshot.challenge
    found = Collected(
        ratings=rating_rows(challenge),
        diversity=diversity_rows(challenge),
        fad=stimuli_selectors.fad_rows(challenge, every_model=True),
        teams=stimuli_selectors.team_rows(challenge),
        fad_model=stimuli_selectors.designated_fad_model(challenge) or "",
        predictors=predictor_rows(challenge),
        votes=export_vote_rows(challenge),
    )
    hashes = Inputs(
        found.ratings,
        found.diversity,
        found.fad,
        found.teams,
        predictors=found.predictors,
        pairs=found.votes,
    ).hashes()
    # A table the snapshot was scored from is one the release must hold as it was: the
    # predictors' and the votes' too, whether their values changed or are gone.
    optional = [n for n in ("predictors", "votes") if n in snapshot.input_hashes]
    named = [*hashes, *optional]
    changed = [
        name for name in dict.fromkeys(named) if snapshot.input_hashes.get(name) != hashes.get(name)
    ]
    if changed:
        raise Refused(
            f"the {', '.join(changed)} changed since results #{snapshot.number} were published, "
            "so a release of them would not rescore to the published numbers; release the "
            "latest final results instead"
        )
    return found


def _released_systems(challenge: Challenge) -> dict[str, System]:
    return {
        s.name: s
        for s in System.objects.filter(challenge=challenge).select_related("team", "track")
    }


def _votes(
    rows: list[dict], scrub: Scrubber, result: dict, systems: dict, hashes: dict
) -> list[dict]:
    """The votes table: each side's sound by sha256 (a hidden anchor's and a gold sound's by
    their own), the systems' public ids and the published scoring's verdict on the session."""
    excluded = {
        s["session"]: "; ".join(s["reasons"])
        for s in (result.get("pairwise") or {}).get("excluded_sessions", [])
    }
    codes = {code for row in rows for code in (row["left_stimulus"], row["right_stimulus"])}
    sounds = {
        **hashes,
        **{
            f"anchor/{a.pk}": a.audio.sha256
            for a in Anchor.objects.filter(pk__in=_ids(codes, "anchor")).select_related("audio")
        },
        **{
            f"gold/{g.pk}": g.audio.sha256
            for g in GoldSound.objects.filter(pk__in=_ids(codes, "gold")).select_related("audio")
        },
    }

    def public(name: str) -> str:
        return systems[name].public_id if name in systems else ""

    return [
        {
            **{c: row.get(c, "") for c in VOTE_COLUMNS},
            "left_stimulus": sounds.get(row["left_stimulus"], WITHHELD),
            "right_stimulus": sounds.get(row["right_stimulus"], WITHHELD),
            "left_system_id": public(row["left_system"]),
            "right_system_id": public(row["right_system"]),
            "excluded": row["session"] in excluded,
            "excluded_because": excluded.get(row["session"], ""),
        }
        for row in scrub.rows(rows)
    ]


def _ids(codes: set[str], kind: str) -> set[int]:
    """The ids of the export's sound codes of one kind (`anchor/<id>`, `gold/<id>`)."""
    return {int(c.split("/", 1)[1]) for c in codes if c.startswith(f"{kind}/")}


def build_tables(snapshot: Snapshot, scrub: Scrubber) -> tuple[dict[str, list[dict]], dict]:
    """Every table of the bundle, scrubbed, and the sounds whose audio goes in (sha256 to the
    storage name)."""
    challenge = snapshot.challenge
    found = collect(snapshot)
    systems = _released_systems(challenge)
    hashes = _stimulus_hashes(challenge)
    result = scrub.value(snapshot.result)
    excluded = {s["session"]: "; ".join(s["reasons"]) for s in result["excluded_sessions"]}
    excluded_pairs = {(s["rater"], s["category"]) for s in result["excluded_sessions"]}

    ratings = []
    for row in scrub.rows(found.ratings):
        system = systems.get(row["system"]) if row["system"] else None
        session = row["session"]
        ratings.append(
            {
                **{c: row.get(c, "") for c in RATING_COLUMNS},
                "stimulus": hashes.get(row["stimulus"], WITHHELD),
                "system_id": system.public_id if system else "",
                "system_team": system.team.name if system else "",
                "excluded": session in excluded,
                "excluded_because": excluded.get(session, ""),
            }
        )
    diversity = [
        {
            **{c: row.get(c, "") for c in DIVERSITY_COLUMNS},
            "system_id": systems[row["system"]].public_id if row["system"] in systems else "",
            "excluded": (row["rater"], row["category"]) in excluded_pairs,
        }
        for row in scrub.rows(found.diversity)
    ]
    screening = [
        {
            "rater": scrub.codes.get(a.rater.code, WITHHELD),
            "rater_kind": a.rater.kind,
            "step": a.step,
            "attempt": a.number,
            "state": a.state,
            "score": a.score,
            "summary": scrub.text(a.summary),
        }
        for a in ScreeningAttempt.objects.filter(rater__challenge=challenge)
        .select_related("rater")
        .order_by("rater__index", "step", "number")
    ]
    audio: dict[str, str] = {}
    stimuli = []
    for s in (
        TestStimulus.objects.filter(challenge=challenge)
        .select_related("system__team", "system__track", "category", "clip__audio")
        .order_by("category__position", "system__name", "position")
    ):
        sound = s.clip.audio
        if s.system.release_audio:
            audio[sound.sha256] = sound.file
        stimuli.append(
            {
                "sha256": sound.sha256,
                "category": s.category.slug,
                "system": s.system.name,
                "system_id": s.system.public_id,
                "team": s.system.team.name,
                "track": s.system.track.code,
                "duration_s": sound.duration_s,
                "sample_rate": sound.sample_rate,
                "audio_included": s.system.release_audio,
            }
        )
    votes = _votes(found.votes, scrub, result, systems, hashes) if found.votes else []
    heard = {row["stimulus"] for row in ratings} | {
        row[side] for row in votes for side in ("left_stimulus", "right_stimulus")
    }
    anchors = [
        {"sha256": a.audio.sha256, "role": f"anchor_{a.kind}", "category": a.category.slug}
        for a in Anchor.objects.filter(challenge=challenge).select_related("audio", "category")
    ] + [
        {
            "sha256": g.audio.sha256,
            "role": "gold",
            "category": "",
            "quality_min": g.quality_min,
            "quality_max": g.quality_max,
            "fit_min": g.fit_min,
            "fit_max": g.fit_max,
            "vote": g.vote,
        }
        for g in GoldSound.objects.filter(challenge=challenge).select_related("audio")
        # Built-in gold sounds are made ahead in a pool: those a trial heard.
        if g.audio.sha256 in heard
    ]
    public_ids = {name: s.public_id for name, s in systems.items()}
    fad = [{**row, "system_id": public_ids.get(row["system"], "")} for row in found.fad]
    teams = [
        {
            **row,
            "system_id": public_ids.get(row["system"], ""),
            "release_audio": systems[row["system"]].release_audio,
        }
        for row in found.teams
    ]
    tables = {
        "ratings": ratings,
        "diversity": diversity,
        "screening": screening,
        "stimuli": stimuli,
        "anchors": anchors,
        "fad": fad,
        "teams": teams,
    }
    if votes:
        tables["votes"] = votes
    if found.predictors:  # a snapshot scored without predictor values releases no table of them
        tables["predictors"] = [
            {**row, "system_id": public_ids.get(row["system"], "")} for row in found.predictors
        ]
    return tables, {"audio": audio, "result": result, "fad_model": found.fad_model}


def columns_of(name: str, rows: list[dict]) -> list[Field]:
    """The table's columns: those declared, then any a FAD row adds (described by its parts)."""
    declared = TABLES[name][2]
    known = {f.name for f in declared}
    extra = []
    for row in rows:
        for column in row:
            if column not in known:
                known.add(column)
                extra.append(_fad_field(column) if name == "fad" else field(column, "string", ""))
    if name == "fad" and not any("model" in row for row in rows):
        declared = [f for f in declared if f.name != "model"]
    return [*declared, *extra]


def _fad_field(column: str) -> Field:
    if column == "system_id":
        return field(column, "string", "The system's public id.")
    parts = column.split("_")
    words = [FAD_PARTS.get(p, f"on a draw of {p} clips" if p.isdigit() else p) for p in parts]
    return field(column, "number", " ".join(words).capitalize() + ".")


# --- The bundle ---------------------------------------------------------------------------------


def next_version(snapshot: Snapshot) -> str:
    """1.0.0 for a snapshot's first release, 1.1.0 for the next...; the snapshot's number as
    the build metadata."""
    made = DataRelease.objects.filter(snapshot=snapshot).count()
    return f"1.{made}.0+snapshot.{snapshot.number}"


def creators(challenge: Challenge) -> list[dict]:
    """The challenge's owners and organizers by their display names; the challenge when none
    has one."""
    names = []
    for role in (
        ChallengeRole.objects.filter(
            challenge=challenge,
            role__in=[ChallengeRole.Role.OWNER, ChallengeRole.Role.ORGANIZER],
        )
        .select_related("user")
        .order_by("role", "user__last_name", "user__first_name")
    ):
        name = role.user.get_full_name().strip()
        if name and "@" not in name:
            names.append({"name": name, "role": "organizer"})
    return names or [{"name": challenge.name, "role": "organizer"}]


def write_csv(path: Path, rows: list[dict], fields: list[Field]) -> None:
    columns = [f.name for f in fields]
    path.write_text(to_csv(rows, columns), encoding="utf-8")


def build(snapshot: Snapshot, out: Path, *, version: str) -> dict:
    """Write the bundle of `snapshot` into the (new, empty) directory `out`; returns its
    metadata."""
    challenge = snapshot.challenge
    scrub = Scrubber(challenge)
    tables, extra = build_tables(snapshot, scrub)
    out.mkdir(parents=True, exist_ok=False)
    schemas = {}
    for name, rows in tables.items():
        fields = columns_of(name, rows)
        schemas[name] = fields
        write_csv(out / f"{name}.csv", rows, fields)
    (out / "result.json").write_text(json.dumps(extra["result"], indent=1, ensure_ascii=False))
    scoring = {
        "snapshot": snapshot.number,
        "settings": snapshot.settings,
        "code_version": snapshot.code_version,
        "fad_model": extra["fad_model"],
        "published_input_hashes": snapshot.input_hashes,
        # Of the definition frozen with the snapshot; challenge.yaml is it, but for what the
        # release withholds.
        "definition_sha256": snapshot.definition_sha256,
    }
    (out / SCORING_FILE).write_text(json.dumps(scoring, indent=1))
    (out / "challenge.yaml").write_text(released_definition(snapshot, scrub))
    if extra["audio"]:
        (out / "audio").mkdir()
        for sha, name in sorted(extra["audio"].items()):
            (out / "audio" / f"{sha}.wav").write_bytes(read_audio(name))
    now = timezone.now()
    today = now.date().isoformat()
    metadata = {
        "title": f"{challenge.name}: listening test and results, release {version}",
        "version": version,
        "date": today,
        "created": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "publication_year": today[:4],
        "creators": creators(challenge),
        "publisher": challenge.name,
        "resource_type": "Dataset",
        "license": LICENCE,
        "description": scrub.text(challenge.description)[:2000] if challenge.description else "",
        "subjects": ["Foley sound synthesis", "listening test", "audio generation evaluation"],
        "challenge": challenge.slug,
        "snapshot": snapshot.number,
        "snapshot_status": "final" if snapshot.final else "interim",
        "published_at": snapshot.published_at.isoformat(),
        "code_version": snapshot.code_version,
        "audio_files": len(extra["audio"]),
    }
    (out / "metadata.json").write_text(json.dumps(metadata, indent=1, ensure_ascii=False))
    (out / "README.md").write_text(datasheet(metadata, tables, extra["result"], scoring))
    package = datapackage(metadata, schemas)
    (out / "datapackage.json").write_text(json.dumps(package, indent=1, ensure_ascii=False))
    return metadata


def released_definition(snapshot: Snapshot, scrub: Scrubber) -> str:
    """The definition the snapshot was computed under (today's, for a snapshot published before
    definitions were kept), with what the release withholds withheld as values, so that the file
    stays a valid definition (`[withheld]` written bare would be a YAML list)."""
    text = snapshot.definition or definition.export(snapshot.challenge)
    if scrub.text(text) == text:
        return text  # the very file: its sha256 is the snapshot's
    return dump_definition(scrub.value(yaml.safe_load(text)))


def datapackage(metadata: dict, schemas: dict[str, list[Field]]) -> dict:
    """The Frictionless Data Package descriptor: every table with each column's type and
    description, and the other files as resources of their own."""
    name = re.sub(r"[^a-z0-9._-]", "-", f"{metadata['challenge']}-results-{metadata['snapshot']}")
    resources = [
        {
            "name": table,
            "path": f"{table}.csv",
            "profile": "tabular-data-resource",
            "title": TABLES[table][0],
            "description": TABLES[table][1],
            "format": "csv",
            "mediatype": "text/csv",
            "encoding": "utf-8",
            "schema": {
                "fields": [
                    {"name": f.name, "type": f.type, "description": f.description} for f in fields
                ],
                "missingValues": [""],
            },
        }
        for table, fields in schemas.items()
    ]
    for path, description in OTHER_FILES.items():
        if path == "datapackage.json":
            continue
        resources.append(
            {
                "name": re.sub(r"[^a-z0-9._-]", "-", path.rsplit(".", 1)[0].lower()),
                "path": path,
                "description": description,
                "format": path.rsplit(".", 1)[1],
            }
        )
    return {
        "profile": "data-package",
        "name": name,
        "title": metadata["title"],
        "version": metadata["version"].split("+", 1)[0],
        "created": metadata["created"],
        "licenses": [LICENCE],
        "contributors": [{"title": c["name"], "role": "author"} for c in metadata["creators"]],
        "resources": resources,
    }


def _count(rows: list[dict], key: str) -> int:
    return len({row[key] for row in rows if row.get(key) not in ("", None)})


def datasheet(metadata: dict, tables: dict[str, list[dict]], result: dict, scoring: dict) -> str:
    """The release's README.md: what was collected, how, by whom, what was set aside, licence,
    and every table's columns."""
    ratings, diversity = tables["ratings"], tables["diversity"]
    kinds: dict[str, int] = {}
    seen: set[str] = set()
    for row in ratings + diversity:
        if row["rater"] not in seen:
            seen.add(row["rater"])
            kind = row.get("rater_kind") or "diversity only"
            kinds[kind] = kinds.get(kind, 0) + 1
    trials = [r for r in ratings if r["role"] == "trial"]
    sessions_excluded = len(result["excluded_sessions"])
    counts = result["counts"]
    creators_text = ", ".join(c["name"] for c in metadata["creators"])
    lines = [
        f"# {metadata['title']}",
        "",
        f"Version {metadata['version']}, made {metadata['date']} from results "
        f"#{metadata['snapshot']} ({metadata['snapshot_status']}) of the challenge "
        f"`{metadata['challenge']}`, published {metadata['published_at'][:10]}. Scoring code "
        f"`{metadata['code_version']}`. Licence: {LICENCE['title']} ({LICENCE['name']}). "
        f"Creators: {creators_text}.",
        "",
        "## What was collected",
        "",
        f"- {len(ratings)} quality and fit ratings ({len(trials)} of system sounds, the rest of "
        f"hidden anchors and gold sounds) in {_count(ratings, 'session')} category sessions.",
        f"- {len(diversity)} diversity ratings.",
        f"- {len(tables['screening'])} screening attempts.",
        f"- {len(tables['stimuli'])} system sounds of {_count(tables['stimuli'], 'system')} "
        f"systems in {_count(tables['stimuli'], 'category')} categories; "
        f"{metadata['audio_files']} of them with their audio (the teams that consented).",
        f"- FAD/KAD values of {_count(tables['fad'], 'system')} systems"
        + (f" by {_count(tables['fad'], 'model')} embedding models" if tables["fad"] else "")
        + ".",
        *_predictors_line(tables.get("predictors", [])),
        *_votes_line(tables.get("votes", [])),
        "",
        "## How",
        "",
        "Raters heard each system sound of a category in a session with hidden anchors and "
        "gold sounds, and rated its audio quality and its fit to the category on 0-10 "
        "sliders, then the diversity of each system's sounds. The platform recorded how each "
        "sound was heard before the answer (plays, seeks, share heard, time to answer). "
        "`challenge.yaml` holds the listening design and rules; `scoring.json` the scoring "
        "settings the results were computed with.",
        "",
        "## By whom",
        "",
        f"{len(seen)} raters: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        + ". Each appears under a pseudonym, a salted hash of the platform's code for the "
        "rater, salted per challenge with a secret kept by the platform: no participant id, "
        "account, e-mail, network address or free text is in the release.",
        "",
        "## What was set aside",
        "",
        f"{sessions_excluded} of {counts['sessions_checked']} sessions were excluded by the "
        f"rater-quality rules (`excluded` and `excluded_because` in ratings.csv); "
        f"{counts['self_ratings_removed']} ratings of a rater's own team's systems were "
        f"removed. {counts['trial_ratings_used']} trial ratings and "
        f"{counts['diversity_ratings_used']} diversity ratings by {counts['raters']} raters "
        "count in the results.",
        "",
        "## Rescoring",
        "",
        "```",
        "python manage.py score_offline --release .",
        "python -m scoring.offline --release .",
        "```",
        "",
        "reads ratings.csv, diversity.csv, fad.csv, teams.csv (and predictors.csv and "
        "votes.csv where the release has them) and scoring.json and prints the "
        "result, whose numbers are those of result.json. (With the percentile-bootstrap "
        "intervals rather than the default jackknife-t, the pseudonyms order the raters "
        "differently from the platform's codes and the intervals' draws differ.)",
        "",
        "## Files",
        "",
    ]
    for path, description in OTHER_FILES.items():
        lines.append(f"- `{path}`: {description}")
    lines.append("- `audio/<sha256>.wav`: the sounds of the systems whose teams consented.")
    for name, (title, description, _) in TABLES.items():
        if name not in tables:  # an optional table this release does not hold
            continue
        lines += ["", f"### {name}.csv: {title}", "", description, ""]
        lines += ["| Column | Type | Description |", "| --- | --- | --- |"]
        for f in columns_of(name, tables[name]):
            lines.append(f"| `{f.name}` | {f.type} | {f.description} |")
    return "\n".join(lines) + "\n"


def _votes_line(rows: list[dict]) -> list[str]:
    """What the release holds of the votes on A/B trials, for the datasheet ([]: none)."""
    if not rows:
        return []
    votes = {(row["session"], row["left_stimulus"], row["right_stimulus"]) for row in rows}
    return [
        f"- {len(votes)} votes on A/B trials ({len(rows)} answers, a row per question) by "
        f"{_count(rows, 'rater')} raters, with each side's listening record."
    ]


def _predictors_line(rows: list[dict]) -> list[str]:
    """What the release holds of the learned predictors, for the datasheet ([]: none)."""
    if not rows:
        return []
    axes = ", ".join(dict.fromkeys(row["axis"] for row in rows))
    untrained = any(UNTRAINED_MARK in str(row.get("model_id") or "") for row in rows)
    return [
        f"- The learned predictors' means ({axes}) of {_count(rows, 'system')} systems per "
        "category, with their intervals over the clips"
        + (" (from untrained stand-ins: they say nothing of the sounds)" if untrained else "")
        + "."
    ]


def zip_dir(directory: Path, target: Path) -> None:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                archive.write(path, f"{directory.name}/{path.relative_to(directory)}")


def release_name(snapshot: Snapshot, version: str) -> str:
    return f"{snapshot.challenge.slug}-results-{snapshot.number}-v{version.split('+', 1)[0]}"


def latest_final(challenge: Challenge) -> Snapshot:
    found = Snapshot.objects.filter(challenge=challenge, final=True).order_by("-number").first()
    if found is None:
        raise Refused(f"{challenge.slug} has no final results to release yet")
    return found


def make_release(snapshot: Snapshot, *, by=None, out_dir: Path | None = None) -> DataRelease:
    """Build the snapshot's next release, store its zip and record it. With `out_dir`, the
    bundle's directory and zip stay there too."""
    if not snapshot.public:
        raise Refused("results that only organizers see are not released")
    version = next_version(snapshot)
    stem = release_name(snapshot, version)
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / stem
        metadata = build(snapshot, bundle, version=version)
        archive = Path(tmp) / f"{stem}.zip"
        zip_dir(bundle, archive)
        data = archive.read_bytes()
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            if (out_dir / stem).exists():
                raise Refused(f"{out_dir / stem} exists already")
            shutil.copytree(bundle, out_dir / stem)
            shutil.copy(archive, out_dir / f"{stem}.zip")
    name = default_storage.save(f"releases/{snapshot.challenge.slug}/{stem}.zip", ContentFile(data))
    with transaction.atomic():
        return DataRelease.objects.create(
            snapshot=snapshot,
            version=version,
            archive=name,
            sha256=hashlib.sha256(data).hexdigest(),
            size_bytes=len(data),
            audio_files=metadata["audio_files"],
            created_by=by,
        )


def open_archive(release: DataRelease) -> io.BufferedReader:
    return default_storage.open(release.archive, "rb")


# --- The page's action, as a job ---------------------------------------------------------------


def request_release(snapshot: Snapshot, user) -> Job:
    """The results page's button: a job builds the release (at once without a broker)."""
    if not may_write(user, snapshot.challenge):
        raise PermissionDenied("Only the challenge's organizers can make a data release.")
    if not snapshot.public:
        raise Refused("results that only organizers see are not released")
    job = create_job(
        RELEASE, challenge=snapshot.challenge, by=user, params={"snapshot": snapshot.number}
    )
    enqueue(job)
    job.refresh_from_db()
    return job


def run_release_job(job_id: int) -> Job:
    def work(job: Job, progress: JobProgress) -> dict | Failed:
        progress(0, 1, "Writing the tables, the datasheet and the zip")
        snapshot = Snapshot.objects.select_related("challenge").get(
            challenge=job.challenge, number=job.params["snapshot"]
        )
        try:
            made = make_release(snapshot, by=job.created_by)
        except Refused as exc:
            return Failed(str(exc))
        progress(1, 1, f"Data release {made.version}")
        return {"snapshot": snapshot.number, "version": made.version}

    return run_job(job_id, work)


def releases(snapshot: Snapshot) -> list[DataRelease]:
    return list(DataRelease.objects.filter(snapshot=snapshot).order_by("-created_at", "-pk"))


def release_jobs(snapshot: Snapshot) -> list[Job]:
    """The snapshot's release jobs still waiting or running, for the page."""
    return list(
        Job.objects.filter(
            challenge=snapshot.challenge,
            kind=RELEASE,
            params__snapshot=snapshot.number,
            state__in=[Job.State.QUEUED, Job.State.RUNNING],
        )
    )
