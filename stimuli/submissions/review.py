"""The review window's rule: between the frozen version and a fix, only code may change.

Code is what the challenge's rule names so (`ChallengeSchedule.review_code_suffixes` and the
caps): a file whose suffix is on the rule's list, UTF-8 text without NUL bytes, no larger than
the per-file cap. Everything else of a version is model data and stays byte-identical: weights
under any name, text data (`.txt`, `.json`, `.csv`), archives inside the archive, binary files,
and any file over the cap, a `.py` file holding a blob of weights included. `foley-generator.json`
is never code whatever the rule's suffixes: it names the module and where `load_model` looks, so
it is frozen with the files, and so are the declared settings.

A fix is compared with the frozen version (the version that counted when the review window
opened), never with the fix before it: the code a review window may add is capped once, not once
per fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from sandbox.source import MANIFEST

from .models import (
    DEFAULT_CODE_SUFFIXES,
    DEFAULT_FILE_MAX_BYTES,
    DEFAULT_FIX_MAX_BYTES,
    ChallengeSchedule,
)

WHEEL_METADATA = ("RECORD", "METADATA", "WHEEL")
PREFIX = "In the review window only code may change: "


@dataclass(frozen=True)
class CodeRule:
    """What a challenge names as code in the review window."""

    suffixes: tuple[str, ...] = tuple(DEFAULT_CODE_SUFFIXES.split())
    file_max_bytes: int = DEFAULT_FILE_MAX_BYTES
    fix_max_bytes: int = DEFAULT_FIX_MAX_BYTES

    @classmethod
    def of(cls, schedule: ChallengeSchedule) -> CodeRule:
        return cls(
            suffixes=tuple(schedule.review_code_suffixes.split()),
            file_max_bytes=schedule.review_file_max_bytes,
            fix_max_bytes=schedule.review_fix_max_bytes,
        )

    def why_not_code(self, name: str, entry: Mapping) -> str:
        """Why a file of a version is model data ("" when it is code)."""
        if name == MANIFEST:
            return f"{MANIFEST} names the module and model_path, frozen with the files"
        path = PurePosixPath(name)
        suffix = path.suffix.lower()
        # A wheel's own metadata changes with any fix (RECORD lists every file's hash).
        wheel_metadata = (
            len(path.parts) == 2
            and path.parts[0].endswith(".dist-info")
            and path.name in WHEEL_METADATA
        )
        if suffix not in self.suffixes and not wheel_metadata:
            return f"{suffix} is not a code suffix" if suffix else "no code suffix"
        if entry["size"] > self.file_max_bytes:
            return f"{entry['size']:,} bytes, over the cap of {self.file_max_bytes:,} per code file"
        if not entry.get("text"):
            return "not UTF-8 text"
        return ""


def _described(entry: Mapping) -> str:
    return f"{entry['size']:,} bytes, sha256 {entry['sha256'][:12]}…"


def fix_problems(
    frozen: Mapping[str, Mapping],
    fix: Mapping[str, Mapping],
    rule: CodeRule,
    frozen_config: Mapping | None = None,
    config: Mapping | None = None,
) -> list[str]:
    """Every file (and declared setting) a review-window fix may not change, each named.

    `frozen` and `fix` are the two versions' manifests: each file's sha256, size and whether it
    is UTF-8 text (`archive_manifest`)."""
    problems = []
    added_by_sha: dict[str, list[str]] = {}
    for name in sorted(fix.keys() - frozen.keys()):
        added_by_sha.setdefault(fix[name]["sha256"], []).append(name)
    # Model data moved to another name: one problem, named by both names.
    renamed: dict[str, list[str]] = {
        name: added_by_sha[frozen[name]["sha256"]]
        for name in frozen.keys() - fix.keys()
        if frozen[name]["sha256"] in added_by_sha and rule.why_not_code(name, frozen[name])
    }
    renamed_to = {new for names in renamed.values() for new in names}
    code_bytes = 0
    for name in sorted(frozen.keys() | fix.keys()):
        before, after = frozen.get(name), fix.get(name)
        if before is not None and after is not None and before["sha256"] == after["sha256"]:
            continue
        frozen_why = rule.why_not_code(name, before) if before is not None else ""
        fix_why = rule.why_not_code(name, after) if after is not None else ""
        if frozen_why:  # model data of the frozen version: nothing about it may change
            if after is None:
                if name in renamed:
                    problems.append(
                        f"{name} was renamed to {', '.join(renamed[name])} (model data: "
                        f"{frozen_why})"
                    )
                else:
                    problems.append(f"{name} was removed (model data: {frozen_why})")
            else:
                problems.append(
                    f"{name} changed (model data: {frozen_why}); {_described(before)} became "
                    f"{_described(after)}"
                )
        elif name in renamed_to:
            continue
        elif fix_why:
            what = "was added" if before is None else "changed"
            problems.append(f"{name} {what} and is not code ({fix_why}); {_described(after)}")
        elif after is not None:
            code_bytes += after["size"]
    if code_bytes > rule.fix_max_bytes:
        problems.append(
            f"the fix adds or changes {code_bytes:,} bytes of code since the frozen version; "
            f"the cap is {rule.fix_max_bytes:,}"
        )
    before_config, after_config = dict(frozen_config or {}), dict(config or {})
    if before_config != after_config:
        changed = sorted(
            k for k in before_config.keys() | after_config.keys()
            if before_config.get(k) != after_config.get(k)
        )  # fmt: skip
        problems.append("declared settings changed: " + ", ".join(changed))
    return [PREFIX + p for p in problems]
