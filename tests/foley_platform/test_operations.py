"""The glossary's table of operations holds: each row's service, job kind and task, command, API
path and page button exist in the code under the names it gives."""

from __future__ import annotations

import re

import pytest
from django.core.management import get_commands
from django.urls import Resolver404, resolve
from django.utils.module_loading import import_string

from tests import ROOT_DIR

GLOSSARY = ROOT_DIR / "docs" / "glossary.md"


def rows() -> list[dict[str, str]]:
    text = GLOSSARY.read_text()
    table = text[text.index("| Operation | Service |") :].split("\n\n")[0].splitlines()
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    found = []
    for line in table[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        found.append(dict(zip(header, cells, strict=True)))
    return found


def ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def quoted(cell: str) -> list[str]:
    return re.findall(r'"([^"]+)"', cell)


TEMPLATES = "\n".join(
    path.read_text()
    for app in ("stimuli", "raters", "scoring")
    for path in (ROOT_DIR / app).rglob("*.html")
)


@pytest.mark.parametrize("row", rows(), ids=lambda row: row["Operation"])
def test_each_operation_has_its_one_name_everywhere(row):
    from stimuli.job_kinds import KINDS

    import_string(ticked(row["Service"])[0])  # the service exists under its name
    names = ticked(row["Job kind (task)"])
    kinds = [n for n in names if "." not in n]
    tasks = [n for n in names if "." in n]
    assert kinds and tasks
    for kind in kinds:
        assert kind in KINDS, kind
    assert KINDS[kinds[-1]].task == tasks[-1]
    for command in ticked(row["Command"]):
        assert command in get_commands(), command
    for api in ticked(row["API"]):
        path = api.split(" ", 1)[1].replace("<slug>", "demo").replace("<system>", "1")
        try:
            resolve(path)
        except Resolver404:
            pytest.fail(f"{api} does not resolve")
    for label in quoted(row["Page button"]):
        assert label in TEMPLATES, label


def test_the_table_names_every_organizer_started_kind():
    from stimuli.job_kinds import KINDS

    named = {n for row in rows() for n in ticked(row["Job kind (task)"]) if "." not in n}
    # Started by the pages, the API or the command line; the others are started by the platform
    # itself (a team's check, clips from judges' prompts, the text-prompt study's CLAP scores).
    assert named == set(KINDS) - {"validate_submission", "generate_text", "clap_prompt_scores"}
