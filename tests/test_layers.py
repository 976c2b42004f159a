"""The layering contract (pyproject's [tool.importlinter]) holds, and fails when an import points back.

scripts/test runs `lint-imports` on the tree; these tests prove that the contract can fail: a copy of
the packages with one import added against the direction of the protocol is refused.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("foley_platform", "stimuli", "raters", "scoring")


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def copy_of_the_tree(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package,
            tmp_path / package,
            ignore=shutil.ignore_patterns("__pycache__", "migrations", "templates", "static"),
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_its_layers():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "back_import", "names"),
    [
        ("stimuli/selectors.py", "from raters import selectors as _back", "raters"),
        ("raters/selectors.py", "from scoring import compute as _back", "scoring"),
        (
            "stimuli/generators/source.py",
            "from stimuli.objective.embeddings import base as _x",
            "objective",
        ),
        (
            "stimuli/objective/pipeline.py",
            "from stimuli.generators import generation as _x",
            "generators",
        ),
    ],
)
def test_an_import_against_the_layers_is_refused(tmp_path, module, back_import, names):
    tree = copy_of_the_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{back_import}\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout.upper()
    assert names in done.stdout
