"""docs/architecture.md stays true to the code: every module and folder it names exists, and every
package of the apps is named in it."""

from __future__ import annotations

import re
from pathlib import Path

from tests import ROOT_DIR

DOC = ROOT_DIR / "docs" / "architecture.md"
APPS = ("foley_platform", "stimuli", "raters", "scoring", "sandbox")


def named_paths(text: str) -> set[str]:
    """The repository paths the page names: in backticks, and in its tree (each line's first
    word, under the folder of the line above it with less indentation)."""
    paths = {p for p in re.findall(r"`([\w./-]+)`", text) if "/" in p and not p.startswith("/")}
    for block in re.findall(r"```\n(.*?)```", text, flags=re.S):
        parents: list[tuple[int, str]] = []
        for line in block.splitlines():
            stripped = line.strip()
            if not stripped or not re.match(r"[\w.]+/?\s", stripped + " "):
                continue
            indent = len(line) - len(line.lstrip())
            while parents and parents[-1][0] >= indent:
                parents.pop()
            for word in stripped.split("  ")[0].split():
                # A path is a file name or a folder: "the" or "and" in a description is not.
                if not re.fullmatch(r"[\w.]+/?", word) or not ("." in word or word.endswith("/")):
                    break
                base = parents[-1][1] if parents else ""
                paths.add(base + word)
            first = stripped.split()[0]
            if first.endswith("/"):
                parents.append((indent, (parents[-1][1] if parents else "") + first))
    return paths


def packages() -> set[str]:
    found = set()
    for app in APPS:
        for init in (ROOT_DIR / app).rglob("__init__.py"):
            folder = init.parent.relative_to(ROOT_DIR)
            if "migrations" in folder.parts or "management" in folder.parts:
                continue
            found.add(str(folder) + "/")
    return found


def test_every_path_the_architecture_names_exists():
    text = DOC.read_text()
    names = named_paths(text)
    assert len(names) > 40  # the tree was read
    missing = sorted(n for n in names if not (ROOT_DIR / n.rstrip("/")).exists())
    assert missing == []


def test_every_package_is_named_in_the_architecture():
    names = {n if n.endswith("/") else n + "/" for n in named_paths(DOC.read_text())}
    unnamed = sorted(p for p in packages() if p not in names)
    assert unnamed == []


def test_the_reader_finds_what_it_should():
    sample = "```\nstimuli/   base\n  jobs.py   running\n  objective/  stage\n    fad.py\n```\n"
    assert {"stimuli/", "stimuli/jobs.py", "stimuli/objective/", "stimuli/objective/fad.py"} <= (
        named_paths(sample)
    )
    assert Path(DOC).exists()
