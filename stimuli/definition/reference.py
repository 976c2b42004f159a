"""The manual's reference of the definition file (docs/challenge-file.md), rendered from its JSON
Schema (`schema()`): every key, its type, default and description come from the sections that
define them, so the page cannot say something the file does not accept.

`python manage.py challenge schema --markdown` prints the page; a test holds the committed page
and schema (docs/challenge.schema.json) to what this renders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from . import schema
from .document import dump

PAGE = "docs/challenge-file.md"
SCHEMA = "docs/challenge.schema.json"
EXAMPLE = "challenges/dcase2023-task7.yaml"
REGENERATE = (
    f"python manage.py challenge schema --markdown > {PAGE} && "
    f"python manage.py challenge schema > {SCHEMA}"
)
# A default longer than this is shown as a block under its table, not in a cell.
INLINE_DEFAULT = 32

INTRO = """\
# The challenge file

<!-- Generated from the file's JSON Schema by `python manage.py challenge schema --markdown`:
change the sections' descriptions in stimuli/definition/, raters/definition.py and
scoring/definition.py, then regenerate this page and docs/challenge.schema.json. -->

A challenge's **definition** is everything an organizer sets about it, in one YAML file,
`challenge.yaml`: its name and time zone, the clip spec, the categories and tracks, the schedule
and the limits on submissions, the objective stage, the listening test, the rater-quality rules,
the scoring and the text-prompt study. A file is reviewed like code, applied again for next year's
edition, and cited with the results. The challenge's data (clips, teams, systems, ratings) and its
phase are not in it.

```sh
python manage.py challenge export <slug> [-o challenge.yaml]   # the file of a challenge
python manage.py challenge apply challenge.yaml --dry-run      # what applying would change
python manage.py challenge apply challenge.yaml [--owner <username>]
python manage.py challenge schema [--markdown]                 # its JSON Schema, or this page
```

- **Applying** creates the challenge of the file's `slug` (owned by `--owner`), or changes it,
  and prints each change: `+` a key set, `-` one removed, `~` one changed, with the old and the
  new value; `no changes` when the challenge already is as the file says, so applying a file twice
  changes nothing. `--dry-run` goes through the very same steps and undoes them: what it prints
  is what applying would do.
- **Refusals.** A file that is not YAML, a key of the wrong type or out of its range, a key
  given twice: every problem is named at once, each with its key's path (`listening.screening.attempts`,
  `categories[2].slug`) and its line and column, and nothing is stored. What the challenge's
  phase forbids (the clip spec once audio is imported, a category that holds clips, the objective
  settings once the listening test is open) is refused in the words its pages and the API use.
- **Unknown keys are refused by name**, with the keys allowed there: a misspelt key would
  otherwise be ignored and its default silently used.
- **Defaults.** A key left out takes its default (below); `slug`, `name`, `categories` and
  `tracks` are required. An export writes every key.
- **Dates** are ISO 8601 (`2026-05-15T23:59:00`); a date without an offset means the file's
  `time_zone`, and an export writes each with its offset.
- **Not in the file:** the crowd platform's completion and screen-out codes and links. The file
  is published with the results, and a code in it would let anyone claim a completed study; they
  are set on the listening test's page only, and applying a file leaves them as they are.

The file's [JSON Schema](challenge.schema.json) (draft 2020-12) lets an editor check a file as it
is typed; with the YAML language server, a first line
`# yaml-language-server: $schema=<address of challenge.schema.json>` does it.
"""


def markdown() -> str:
    """The reference page of the definition file, from its JSON Schema."""
    made = schema()
    defs = made["$defs"]
    out = [INTRO, _shipped(), "## Top level", "", made.get("description", ""), ""]
    out += _table(made, defs, below=[])
    for key, prop in made["properties"].items():
        target = _object_of(prop, defs)
        if target is None:
            continue
        ref, is_list = target
        out += _section(key, prop, defs[ref], defs, is_list=is_list)
    out += _example()
    return "\n".join(out).rstrip() + "\n"


def _shipped() -> str:
    root = Path(settings.BASE_DIR) / "challenges"
    others = sorted(p.name for p in root.glob("*.yaml") if f"challenges/{p.name}" != EXAMPLE)
    listed = " and ".join(f"`challenges/{name}`" for name in others)
    return (
        f"The repository ships definitions under `challenges/`. `{EXAMPLE}` is DCASE 2023 "
        "Task 7 as its overview paper describes it, each value with a comment citing the paper's "
        "section; it is [reproduced at the end of this page](#example). "
        + (f"The demo (`scripts/demo`) builds its challenges from {listed}.\n" if others else "\n")
    )


def _section(key: str, prop: dict, obj: dict, defs: dict, *, is_list: bool) -> list[str]:
    anchor = _anchor(key)
    out = [f"## `{key}` {{#{anchor}}}", ""]
    if is_list:
        out += [f"{_words(prop.get('description', ''))} {_list_rule(prop)}".strip(), ""]
        out += [f"Each item: {_words(obj.get('description', ''))}".strip(), ""]
    else:
        out += [_words(obj.get("description") or prop.get("description", "")), ""]
        if _is_nullable(prop):
            out += [_words(prop.get("description", "")), ""]
    below: list[str] = []
    out += _table(obj, defs, below=below)
    out += below
    for name, inner in obj.get("properties", {}).items():
        target = _object_of(inner, defs)
        if target is not None:
            ref, inner_list = target
            sub = _section(f"{key}.{name}", inner, defs[ref], defs, is_list=inner_list)
            out += ["#" + sub[0], *sub[1:]]
    return out


def _table(obj: dict, defs: dict, *, below: list[str]) -> list[str]:
    required = set(obj.get("required", []))
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for name, prop in obj.get("properties", {}).items():
        default = _default(name, prop, required, defs, below)
        described = prop.get("description") or _summary(prop, defs)
        cells = [f"`{name}`", _kind(prop, defs), default, _cell(described)]
        rows.append("| " + " | ".join(cells) + " |")
    return [*rows, ""]


def _summary(prop: dict, defs: dict) -> str:
    """An object's description up to its first colon (`The clip spec`): the rest is said in its
    own section."""
    target = _object_of(prop, defs)
    if target is None:
        return ""
    text = _words(defs[target[0]].get("description", ""))
    head = text.split(": ", 1)[0]
    return head if head.endswith(".") else head + "."


def _default(name: str, prop: dict, required: set[str], defs: dict, below: list[str]) -> str:
    if name in required:
        return "required"
    if "default" not in prop:
        # An object whose keys each have their own default (the sections).
        return "each key's own" if _object_of(prop, defs) else ""
    value = prop["default"]
    shown = dump({name: value})
    inline = shown.removeprefix(f"{name}: ").rstrip("\n")
    if "\n" in inline or (len(inline) > INLINE_DEFAULT and isinstance(value, dict | list)):
        below += [f"The default of `{name}`:", "", "```yaml", shown.rstrip("\n"), "```", ""]
        return "below"
    return f"`{inline}`"


def _kind(prop: dict, defs: dict) -> str:
    """The type of a key in words: `integer ≥ 0`, `number in (0, 60]`, `one of 16/24`, `text`,
    `date-time or null`, `list of ...`, `object`."""
    if "anyOf" in prop:
        return " or ".join(_kind(option, defs) for option in prop["anyOf"])
    if "$ref" in prop:
        ref = prop["$ref"].removeprefix("#/$defs/")
        title = defs[ref]["title"]
        return f"object ([below](#{_anchor(title.removesuffix('[]'))}))"
    if "enum" in prop:
        return "one of " + "/".join(_literal(v) for v in prop["enum"])
    kind = prop.get("type")
    if kind in ("integer", "number"):
        return kind + _range(prop)
    if kind == "string":
        if prop.get("format") == "date-time":
            return "date-time"
        limits = []
        if "pattern" in prop:
            limits.append(f"matching `{prop['pattern']}`")
        if prop.get("minLength") == 1:
            limits.append("not empty")
        if "maxLength" in prop:
            limits.append(f"≤ {prop['maxLength']} characters")
        return ", ".join(["text", *limits])
    if kind == "boolean":
        return "true or false"
    if kind == "null":
        return "null"
    if kind == "array":
        items = prop.get("items") or {}
        return "list" if not items else f"list of {_plural(_kind(items, defs))}"
    if kind == "object":
        return "object"
    return "any"


def _range(prop: dict) -> str:
    low = ("[", prop["minimum"]) if "minimum" in prop else None
    low = ("(", prop["exclusiveMinimum"]) if "exclusiveMinimum" in prop else low
    high = ("]", prop["maximum"]) if "maximum" in prop else None
    high = (")", prop["exclusiveMaximum"]) if "exclusiveMaximum" in prop else high
    if low and high:
        return f" in {low[0]}{low[1]}, {high[1]}{high[0]}"
    if low:
        return f" {'≥' if low[0] == '[' else '>'} {low[1]}"
    if high:
        return f" {'≤' if high[0] == ']' else '<'} {high[1]}"
    return ""


def _literal(value: Any) -> str:
    return f"`{value}`" if isinstance(value, str) else str(value)


def _plural(kind: str) -> str:
    head, _, rest = kind.partition(" ")
    plural = {"object": "objects", "integer": "integers", "number": "numbers"}.get(head, head)
    return f"{plural} {rest}".strip()


def _list_rule(prop: dict) -> str:
    if "minItems" in prop:
        return f"At least {prop['minItems']}."
    return ""


def _object_of(prop: dict, defs: dict) -> tuple[str, bool] | None:
    """The `$defs` name of the object `prop` holds, and whether as a list's items."""
    for option in [prop, *prop.get("anyOf", [])]:
        if "$ref" in option:
            return option["$ref"].removeprefix("#/$defs/"), False
        if "$ref" in (option.get("items") or {}):
            return option["items"]["$ref"].removeprefix("#/$defs/"), True
    return None


def _is_nullable(prop: dict) -> bool:
    return any(option.get("type") == "null" for option in prop.get("anyOf", []))


def _anchor(path: str) -> str:
    return path.replace(".", "-").replace("_", "-")


def _words(text: str) -> str:
    return " ".join(text.split()).replace("<", "&lt;").replace(">", "&gt;")


def _cell(text: str) -> str:
    return _words(text).replace("|", "\\|")


def _example() -> list[str]:
    text = (Path(settings.BASE_DIR) / EXAMPLE).read_text()
    return [
        "## An example: DCASE 2023 Task 7 {#example}",
        "",
        f"`{EXAMPLE}`, as shipped; apply it with "
        f"`python manage.py challenge apply {EXAMPLE} --owner <username>`.",
        "",
        "```yaml",
        text.rstrip("\n"),
        "```",
        "",
    ]
