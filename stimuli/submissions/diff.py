"""What changed between two versions of a system, so organizers see what a review-window fix
touched: every added, removed, renamed or changed file by its size and sha256, whether it is code
under the challenge's rule or model data, and the unified diff of the text files that changed."""

from __future__ import annotations

import difflib
import zipfile
from dataclasses import dataclass

from django.core.files.storage import default_storage

from . import selectors
from .models import Submission
from .review import CodeRule
from .services import frozen_manifest

# Larger text is listed by size and sha256 only: a page of a megabyte of diff shows nothing.
MAX_TEXT_BYTES = 512 * 1024


@dataclass(frozen=True)
class FileChange:
    """One file that is not byte-identical in the two versions."""

    name: str
    change: str  # added, removed, renamed, changed
    before: dict | None
    after: dict | None
    # Why the file is model data under the rule, on either side ("" when code on both sides).
    model_data: str
    renamed_from: str = ""


def file_changes(old: dict, new: dict, rule: CodeRule) -> list[FileChange]:
    """Every file that differs between two versions' manifests, by content (sha256), in name
    order; a file whose content moved to another name is one change, "renamed"."""
    removed_by_sha: dict[str, str] = {}
    for name in sorted(old.keys() - new.keys()):
        removed_by_sha.setdefault(old[name]["sha256"], name)
    renamed: dict[str, str] = {}  # new name -> old name, same content
    for name in sorted(new.keys() - old.keys()):
        source = removed_by_sha.pop(new[name]["sha256"], None)
        if source is not None:
            renamed[name] = source
    gone = set(renamed.values())
    changes = []
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name), new.get(name)
        if name in gone or (a is not None and b is not None and a["sha256"] == b["sha256"]):
            continue
        source = renamed.get(name, "")
        if source:
            change, a = "renamed", old[source]
        else:
            change = "added" if a is None else "removed" if b is None else "changed"
        why = (a is not None and rule.why_not_code(source or name, a)) or (
            b is not None and rule.why_not_code(name, b)
        )
        changes.append(FileChange(name, change, a, b, why or "", source))
    return changes


def _texts(submission: Submission, names: set[str]) -> dict[str, list[str]]:
    """The named files of a version that are UTF-8 text and small enough to show."""
    texts = {}
    wanted = [
        n
        for n in sorted(names)
        if (e := submission.manifest.get(n)) and e["size"] <= MAX_TEXT_BYTES
    ]
    if not wanted:
        return texts
    with default_storage.open(submission.archive, "rb") as handle, zipfile.ZipFile(handle) as zf:
        for name in wanted:
            try:
                texts[name] = zf.read(name).decode("utf-8").splitlines(keepends=True)
            except (UnicodeDecodeError, KeyError):
                continue
    return texts


def code_diff(before: Submission, after: Submission, changes: list[FileChange]) -> str:
    """The unified diff of every changed file that is text on both sides (or on the one side
    it exists); the others are in `changes`, by size and sha256."""
    names = {c.name for c in changes if c.change != "renamed"}
    old, new = _texts(before, names), _texts(after, names)
    lines: list[str] = []
    for name in sorted(names):
        a, b = before.manifest.get(name), after.manifest.get(name)
        if (a is not None and name not in old) or (b is not None and name not in new):
            continue  # binary or too large on one side: listed by size and sha256 instead
        lines.extend(
            difflib.unified_diff(
                old.get(name, []),
                new.get(name, []),
                fromfile=f"v{before.version}/{name}",
                tofile=f"v{after.version}/{name}",
            )
        )
    return "".join(lines)


@dataclass(frozen=True)
class VersionDiff:
    changes: list[FileChange]
    model_data: list[FileChange]
    code: list[FileChange]
    text: str
    settings_changed: bool


def version_diff(before: Submission, after: Submission) -> VersionDiff:
    """The two versions compared under the challenge's rule of code."""
    rule = CodeRule.of(selectors.schedule(after.challenge))
    changes = file_changes(frozen_manifest(before), frozen_manifest(after), rule)
    return VersionDiff(
        changes=changes,
        model_data=[c for c in changes if c.model_data],
        code=[c for c in changes if not c.model_data],
        text=code_diff(before, after, changes),
        settings_changed=(before.config or {}) != (after.config or {}),
    )
