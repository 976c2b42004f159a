"""The sections of a challenge's definition, declared once each by the layer that owns what it
sets (stimuli: the challenge, clip, categories, tracks, schedule, objective stage; raters: the
listening test and the rater-quality rules; scoring: the scoring), and registered here like the
kinds of job: the file's schema, its export and its application are the union of the sections.

A section says what its part of the file holds (a pydantic type, with descriptions that the
manual's reference is generated from), how to read it off a challenge, what the challenge's
state forbids changing (the same refusal its page and the API give), and how to write it,
through the services its page uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model


class Strict(BaseModel):
    """A part of the file: unknown keys are refused by name (a misspelt key would otherwise be
    silently ignored and its default used)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


@dataclass(frozen=True)
class Change:
    """One difference between the challenge and the file, at a key's path."""

    path: str
    old: Any
    new: Any

    @property
    def kind(self) -> str:
        if self.old is None and self.new is not None:
            return "+"
        if self.new is None and self.old is not None:
            return "-"
        return "~"

    def __str__(self) -> str:
        if self.kind == "+":
            return f"+ {self.path}: {_show(self.new)}"
        if self.kind == "-":
            return f"- {self.path}: {_show(self.old)}"
        return f"~ {self.path}: {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    return repr(value) if not isinstance(value, bool) else str(value).lower()


@dataclass(frozen=True)
class Section:
    """`key`: the section's key in the file (None: its fields sit at the top of the file, like
    slug and name). `annotation`: what the key holds. `read(challenge)`: its values now, as the
    file holds them. `refusals(challenge, changes)`: the changes the challenge's state forbids,
    in the words its page and the API use. `write(challenge, value)`: store the value (a dict,
    or a list, as the file gives it), raising `Refused` on a problem. `keyed`: for a list of
    mappings, the field that names an item in the diff."""

    key: str | None
    annotation: Any
    position: int
    read: Callable[[Any], Any]
    write: Callable[[Any, Any], None]
    refusals: Callable[[Any, list[Change]], list[str]] = lambda challenge, changes: []
    keyed: str | None = None
    default: Any = field(default=...)
    # The value in the form `read` gives it, from the file's (with the whole file at hand).
    normalise: Callable[[Any, dict], Any] | None = None


_SECTIONS: dict[str | None, Section] = {}


def register(section: Section) -> Section:
    if section.key in _SECTIONS and _SECTIONS[section.key] is not section:
        raise ValueError(f"a definition section {section.key!r} is already registered")
    _SECTIONS[section.key] = section
    return section


def sections() -> list[Section]:
    return sorted(_SECTIONS.values(), key=lambda s: s.position)


def definition_model() -> type[BaseModel]:
    """The whole file's schema: the top-level fields, then each section in its order."""
    fields: dict[str, Any] = {}
    for section in sections():
        if section.key is None:
            model = section.annotation
            fields.update({name: (f.annotation, f) for name, f in model.model_fields.items()})
        else:
            fields[section.key] = (section.annotation, section.default)
    return create_model(
        "ChallengeDefinition",
        __config__=ConfigDict(extra="forbid", title="A challenge's definition (challenge.yaml)"),
        __doc__=(
            "Everything an organizer sets about a challenge, in one file: applying it creates "
            "the challenge of its slug or changes it; unknown keys are refused by name."
        ),
        **fields,
    )


def flatten(value: Any, path: str, keyed: str | None = None) -> dict[str, Any]:
    """Every leaf of `value` by its dotted path; a list of mappings by the field that names its
    items (`categories[dog_bark].name`) where the section has one, otherwise by position."""
    if isinstance(value, dict):
        if not value:
            return {path: {}}
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for index, item in enumerate(value):
            name = item.get(keyed) if keyed else None
            out.update(flatten(item, f"{path}[{name if name is not None else index}]"))
        return out
    return {path: value}


def changes_of(section: Section, old: Any, new: Any) -> list[Change]:
    prefix = section.key or ""
    before = flatten(old, prefix, section.keyed) if old is not None else {}
    after = flatten(new, prefix, section.keyed) if new is not None else {}
    if old is None and new is not None and section.key:
        return [Change(section.key, None, "set")] + [
            Change(p, None, v) for p, v in after.items() if p != section.key
        ]
    if new is None and old is not None and section.key:
        return [Change(section.key, "set", None)]
    changed = []
    for path in list(before) + [p for p in after if p not in before]:
        a, b = before.get(path), after.get(path)
        if a != b:
            changed.append(Change(path, a, b))
    return changed
