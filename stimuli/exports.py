"""The one CSV writer of every export (ratings, diversity, leaderboards and the other result
tables), safe to open in a spreadsheet.

A team or system name is chosen by a competitor: a cell starting with `=`, `+`, `-`, `@`, a tab
or a carriage return would run as a formula (`=HYPERLINK(...)` calling out with the sheet's
data). OWASP's rule prefixes such a text cell with `'`, which spreadsheets show as text and do
not display. A text cell that already starts with `'` gets one more, so `read_cell` gives back
exactly what was written: the platform's own exports read back (offline scoring) unchanged.
Numbers are written as numbers: a negative score stays a number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"


def safe_cell(value: object) -> object:
    """`value` as a spreadsheet takes it literally; None becomes an empty cell."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith((*FORMULA_STARTS, ESCAPE)):
        return ESCAPE + value
    return value


def read_cell(text: str) -> str:
    """What `safe_cell` wrote, given back."""
    return text[1:] if text.startswith(ESCAPE) else text


def to_csv(rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> str:
    """A header of `columns` and one line per row (keys outside `columns` are left out)."""
    buffer = io.StringIO()
    # CRLF ends a row (RFC 4180): a carriage return or newline inside a cell is then quoted.
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([safe_cell(c) for c in columns])
    for row in rows:
        writer.writerow([safe_cell(row.get(c)) for c in columns])
    return buffer.getvalue()
