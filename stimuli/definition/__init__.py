"""A challenge defined in one reviewable file (challenge.yaml): exported, diffed and applied.

`export(challenge)` writes the file; `apply(text, by=..., dry_run=...)` creates or changes the
challenge it names and returns the changes, refusing, with every reason at once, what the file
gets wrong or what the challenge's state forbids. A dry run goes through the very same steps
inside a transaction that is then rolled back: what it reports is what applying would do.
The manual's reference of the format (docs/challenge-file.md) is generated from `schema()`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from django.db import transaction

from ..errors import Refused
from ..models import Challenge
from .document import DefinitionError, dump, parse
from .sections import Change, changes_of, definition_model, sections

__all__ = [
    "Applied",
    "Change",
    "DefinitionError",
    "apply",
    "export",
    "read",
    "schema",
    "sha256",
]


@dataclass
class Applied:
    """What applying a file did (or, in a dry run, would do)."""

    slug: str
    created: bool
    changes: list[Change] = field(default_factory=list)
    dry_run: bool = False

    @property
    def diff(self) -> str:
        if self.created:
            head = f"+ challenge {self.slug}"
            return "\n".join([head, *(str(c) for c in self.changes)])
        return "\n".join(str(c) for c in self.changes) or "no changes"


def read(challenge: Challenge) -> dict:
    """The challenge's definition as plain data, in the file's order."""
    out: dict = {}
    for section in sections():
        value = section.read(challenge)
        if section.key is None:
            out.update(value)
        else:
            out[section.key] = value
    return out


def export(challenge: Challenge) -> str:
    return dump(read(challenge))


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema() -> dict:
    """The JSON Schema of the file (published in the manual and by the API): each key described
    in plain words, each object titled by where it sits in the file."""
    made = definition_model().model_json_schema()
    _tidy(made)
    for path, ref in _objects(made):
        made["$defs"][ref]["title"] = path
    return {"$schema": JSON_SCHEMA_DIALECT, **made}


def _tidy(node: object) -> None:
    # pydantic titles every key by its name in words ("Fad Model"): the key itself says more,
    # and the manual names keys, never titles. Descriptions from docstrings keep their line
    # breaks, which a reader of the schema should not see.
    if isinstance(node, dict):
        for prop in (node.get("properties") or {}).values():
            prop.pop("title", None)
        if isinstance(node.get("description"), str):
            node["description"] = " ".join(node["description"].split())
        for value in node.values():
            _tidy(value)
    elif isinstance(node, list):
        for value in node:
            _tidy(value)


def _objects(made: dict, node: dict | None = None, path: str = "") -> list[tuple[str, str]]:
    """`(path, name)` of each object defined under `$defs`, by the key path it sits at
    (`listening.screening`, `categories[]` for a list's items)."""
    found = []
    for key, prop in ((node or made).get("properties") or {}).items():
        where = f"{path}.{key}" if path else key
        for option in [prop, *prop.get("anyOf", [])]:
            if "items" in option:
                option, where = option["items"], f"{where}[]"
            if "$ref" in option:
                ref = option["$ref"].removeprefix("#/$defs/")
                found += [(where, ref), *_objects(made, made["$defs"][ref], where)]
    return found


def schema_json() -> str:
    return json.dumps(schema(), indent=2, sort_keys=False) + "\n"


def apply(text: str, *, by=None, dry_run: bool = False) -> Applied:
    """Create or change the challenge `text` defines. Refuses (`DefinitionError` for the file,
    `Refused` for what the challenge's state forbids or its pages' checks refuse) with every
    problem at once, and stores nothing then."""
    definition = parse(text, definition_model())
    wanted = _by_section(normalise(json.loads(definition.model_dump_json())))
    slug = wanted[None]["slug"]
    with transaction.atomic():
        challenge = Challenge.objects.select_for_update().filter(slug=slug).first()
        created = challenge is None
        if created:
            challenge = _create(wanted[None], by)
        current = _by_section(read(challenge))
        planned = [
            (section, changes)
            for section in sections()
            if (changes := changes_of(section, current[section.key], wanted[section.key]))
        ]
        refusals = [
            refusal
            for section, changes in planned
            if not created
            for refusal in section.refusals(challenge, changes)
        ]
        if refusals:
            raise Refused(refusals, status=409)
        problems: list[str] = []
        for section, _ in planned:
            try:
                with transaction.atomic():
                    section.write(challenge, wanted[section.key])
            except Refused as exc:
                problems.extend(_in_section(section.key, p) for p in exc.problems)
        if problems:
            raise Refused(problems)
        if _by_section(read(challenge)) != wanted:  # each section reads back what it wrote
            raise RuntimeError("the challenge does not read back as its definition")
        if dry_run:
            transaction.set_rollback(True)
    return Applied(
        slug=slug,
        created=created,
        changes=[change for _, changes in planned for change in changes],
        dry_run=dry_run,
    )


def normalise(data: dict) -> dict:
    """The file's values as a challenge reads back: each section's own normal form (times in
    the challenge's time zone, say)."""
    out = dict(data)
    for section in sections():
        if section.key is not None and section.normalise is not None:
            out[section.key] = section.normalise(out[section.key], data)
    return out


def _by_section(data: dict) -> dict:
    return {
        section.key: (
            {name: data[name] for name in section.annotation.model_fields}
            if section.key is None
            else data[section.key]
        )
        for section in sections()
    }


def _in_section(key: str | None, problem: str) -> str:
    if key is None or problem.startswith(f"{key}.") or problem.startswith(f"{key}:"):
        return problem
    return f"{key}.{problem}"


def _create(top: dict, by) -> Challenge:
    from ..permissions import name_owner

    challenge = Challenge(slug=top["slug"], name=top["name"])
    challenge.full_clean()
    challenge.save()
    if by is not None:
        name_owner(challenge, by)
    return challenge


# The sections stimuli owns; raters' and scoring's register from their own `definition` modules.
from . import base  # noqa: E402, F401
