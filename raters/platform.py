"""The crowd platform's record of the participants, reconciled with the crowd workers.

A participant id in a link proves nothing: anyone can make one up. The crowd platform knows who
really took part, and how it ended: its submissions export (Prolific's "Download submissions"
CSV: participant id, status, submission id, started and completed times). Loaded by the
organizers, it decides whose ratings count: a crowd worker absent from it, or listed there as
returned, timed out, rejected or screened out, or who came with another submission id than the
one the platform lists, leaves the scoring (the `platform` rater-quality rule), named with the
reason in the result and its downloads.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from stimuli.models import Challenge

from .errors import ListeningError
from .models import ListeningTest, PlatformSubmission, Rater

# Statuses whose participants' ratings count: still in progress, waiting for review, approved.
KEPT = ("ACTIVE", "AWAITING REVIEW", "APPROVED", "PARTIALLY APPROVED")
# Statuses whose participants' ratings leave the scoring: the platform does not pay them.
LEFT = ("RETURNED", "TIMED-OUT", "REJECTED", "SCREENED OUT")
STATUSES = KEPT + LEFT
# A column's accepted headers, compared without case, spaces and underscores.
COLUMNS = {
    "participant_id": ("participantid", "prolificpid", "participant"),
    "status": ("status",),
    "submission_id": ("submissionid", "sessionid"),
    "started_at": ("startedat", "started"),
    "completed_at": ("completedat", "completed"),
}
REQUIRED = ("participant_id", "status")
MAX_ROWS = 100_000


@dataclass
class Loaded:
    rows: int
    by_status: dict[str, int]
    unknown: int  # crowd workers of the test the export does not list


def _key(header: str) -> str:
    return "".join(ch for ch in header.lower() if ch.isalnum())


def _when(text: str) -> datetime | None:
    text = text.strip()
    if not text:
        return None
    moment = parse_datetime(text.replace(" ", "T", 1) if "T" not in text else text)
    if moment is None:
        raise ValueError(text)
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment, UTC)


def parse_export(data: bytes) -> list[dict]:
    """The export's rows; every problem of the file named at once (ListeningError)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ListeningError("The export is not UTF-8 text (a CSV file is expected).") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise ListeningError("The export is empty: a CSV file with a header row is expected.")
    where: dict[str, int] = {}
    for index, name in enumerate(header):
        for column, accepted in COLUMNS.items():
            if _key(name) in accepted and column not in where:
                where[column] = index
    missing = [c for c in REQUIRED if c not in where]
    if missing:
        raise ListeningError(
            "The export lacks the column(s) "
            + ", ".join(f"'{c.replace('_', ' ').capitalize()}'" for c in missing)
            + " (Prolific's submissions export has them)."
        )
    problems: list[str] = []
    rows: list[dict] = []
    seen: dict[str, int] = {}
    for line, values in enumerate(reader, start=2):
        if not any(v.strip() for v in values):
            continue
        if len(rows) >= MAX_ROWS:
            problems.append(f"more than {MAX_ROWS} rows")
            break

        def cell(column: str, values=values) -> str:
            index = where.get(column)
            return values[index].strip() if index is not None and index < len(values) else ""

        row = {"line": line, "participant_id": cell("participant_id")}
        row["status"] = cell("status").upper()
        row["submission_id"] = cell("submission_id")[:64]
        if not row["participant_id"] or len(row["participant_id"]) > 64:
            problems.append(f"line {line}: no participant id (or one over 64 characters)")
        elif row["participant_id"] in seen:
            problems.append(
                f"line {line}: participant {row['participant_id']} is listed on line "
                f"{seen[row['participant_id']]} too"
            )
        else:
            seen[row["participant_id"]] = line
        if row["status"] not in STATUSES:
            problems.append(
                f"line {line}: unknown status {row['status']!r} (known: {', '.join(STATUSES)})"
            )
        for column in ("started_at", "completed_at"):
            try:
                row[column] = _when(cell(column))
            except ValueError as exc:
                problems.append(f"line {line}: {column.replace('_', ' ')} {exc} is not a time")
        rows.append(row)
    if problems:
        shown = problems[:50]
        more = f"; and {len(problems) - 50} more" if len(problems) > 50 else ""
        raise ListeningError(
            f"The export was not loaded ({len(problems)} problem(s)): " + "; ".join(shown) + more
        )
    if not rows:
        raise ListeningError("The export lists no participant.")
    return rows


def load_export(challenge: Challenge, data: bytes) -> Loaded:
    """Replace the test's record of the platform with the export, whole or not at all."""
    rows = parse_export(data)
    test, _ = ListeningTest.objects.get_or_create(challenge=challenge)
    with transaction.atomic():
        ListeningTest.objects.select_for_update(no_key=True).get(pk=test.pk)
        PlatformSubmission.objects.filter(test=test).delete()
        PlatformSubmission.objects.bulk_create(
            PlatformSubmission(
                test=test,
                participant_id=row["participant_id"],
                submission_id=row["submission_id"],
                status=row["status"],
                started_at=row["started_at"],
                completed_at=row["completed_at"],
            )
            for row in rows
        )
        ListeningTest.objects.filter(pk=test.pk).update(platform_export_at=timezone.now())
    by_status: dict[str, int] = {}
    for row in rows:
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
    return Loaded(len(rows), by_status, len(unreconciled(challenge)))


def unreconciled(challenge: Challenge) -> dict[str, str]:
    """Per crowd worker's rater code, why the platform's record takes their ratings out of the
    scoring; empty while no export is loaded."""
    # Read here, not through raters.selectors, which reads this module for its exports.
    test = (
        ListeningTest.objects.filter(challenge=challenge).only("pk", "platform_export_at").first()
    )
    if test is None or test.platform_export_at is None:
        return {}
    listed = {
        p.participant_id: p
        for p in PlatformSubmission.objects.filter(test=test).only(
            "participant_id", "submission_id", "status"
        )
    }
    out = {}
    for code, participant, session in Rater.objects.filter(
        challenge=challenge, kind=Rater.Kind.CROWD
    ).values_list("code", "participant_id", "crowd_session_id"):
        found = listed.get(participant)
        if found is None:
            out[code] = "not in the crowd platform's submissions export"
        elif found.status in LEFT:
            out[code] = f"{found.status.lower()} on the crowd platform"
        elif found.submission_id and session and found.submission_id != session:
            out[code] = (
                "came with another submission id than the one the crowd platform lists "
                f"({session} against {found.submission_id})"
            )
    return out
