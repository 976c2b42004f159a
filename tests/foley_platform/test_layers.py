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

from tests import ROOT_DIR

ROOT = ROOT_DIR
PACKAGES = ("foley_platform", "stimuli", "raters", "scoring", "sandbox")


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
            "stimuli/generators/validate.py",
            "from stimuli.objective.embeddings import base as _x",
            "objective",
        ),
        # The sandbox is free of Django and of the apps.
        ("sandbox/process.py", "from django.conf import settings as _x", "django"),
        ("sandbox/source.py", "from stimuli import archives as _x", "stimuli"),
        (
            "stimuli/objective/services.py",
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


def import_graph(root: Path) -> dict[str, set[str]]:
    """Every module of the packages and the modules of the packages it imports, at any level of
    the file (imports inside functions too: a circle hidden in a function is still a circle)."""
    import ast

    modules = {}
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # `from package import module` names the module; otherwise the name is in base.
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_another_in_a_circle():
    assert circles(import_graph(ROOT)) == []


def test_a_circle_inside_a_function_is_found(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    models = tree / "stimuli" / "models.py"
    models.write_text(models.read_text() + "\n\ndef _late():\n    from .jobs import enqueue\n")
    assert ["stimuli.jobs", "stimuli.models"] in circles(import_graph(tree))


def test_no_module_is_longer_than_800_lines():
    """A module that long holds several things; split it where its parts are."""
    long = {
        str(path.relative_to(ROOT)): n
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (n := len(path.read_text().splitlines())) > 800
    }
    assert long == {}
