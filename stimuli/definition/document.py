"""A challenge's definition file as text: read with each key's line and column, checked against
the sections' schema with every problem named at once, and written back.

No Django here: the sections (stimuli/definition/sections.py) give the schema; this module only
knows YAML, pydantic and where each key sits in the file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import Refused

Path = tuple[str | int, ...]


class DefinitionError(Refused):
    """A definition file that cannot be read or does not match the schema: every problem, each
    with the key's path and its place in the file."""

    def __init__(self, problems: list[str]):
        super().__init__(problems)


def dotted(path: Iterable[str | int]) -> str:
    """`listening.screening.attempts`, `categories[2].slug`: a key's path as the errors and the
    diff name it."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the file)"


def _positions(text: str) -> tuple[dict[Path, tuple[int, int]], list[str]]:
    """Where each key's value starts (1-based line and column), and the keys given twice (YAML
    keeps the last silently: a reviewer would read the first)."""
    positions: dict[Path, tuple[int, int]] = {}
    twice: list[str] = []
    root = yaml.compose(text, Loader=yaml.SafeLoader)

    def walk(node: yaml.Node, path: Path) -> None:
        positions[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                name = key.value
                if name in seen:
                    line = key.start_mark.line + 1
                    twice.append(f"{dotted((*path, name))}: given twice (line {line})")
                seen.add(name)
                walk(value, (*path, name))
                positions[(*path, name)] = (key.start_mark.line + 1, key.start_mark.column + 1)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                walk(item, (*path, index))

    if root is not None:
        walk(root, ())
    return positions, twice


def _where(positions: dict[Path, tuple[int, int]], path: Path) -> str:
    # A missing key has no place of its own: its mapping's is the nearest.
    for end in range(len(path), -1, -1):
        if path[:end] in positions:
            line, column = positions[path[:end]]
            return f"line {line}, column {column}"
    return "line 1, column 1"


def _message(error: dict, model: type[BaseModel], data: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key" + _known_keys(model, error["loc"][:-1])
    if kind == "missing":
        return "required, and missing"
    return error["msg"][0].lower() + error["msg"][1:]


def _known_keys(model: type[BaseModel], path: Path) -> str:
    """`; the keys here are: a, b`, from the schema at `path` (where it is a plain object)."""
    current: Any = model
    for part in path:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return ""
        current = _model_in(fields[part].annotation)
    fields = getattr(current, "model_fields", None)
    return f"; the keys here are: {', '.join(fields)}" if fields else ""


def _model_in(annotation: Any) -> Any:
    """The model class inside `X`, `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def parse(text: str, model: type[BaseModel]) -> BaseModel:
    """The definition in `text`, checked against `model`; `DefinitionError` names every problem
    at once, each with its key's path, line and column."""
    try:
        positions, twice = _positions(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise DefinitionError([f"not YAML: {problem}{where}"]) from None
    if not isinstance(data, dict):
        raise DefinitionError(["(the file): a mapping of keys (slug:, name:, clip:, ...) needed"])
    problems = list(twice)
    try:
        definition = model.model_validate(data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(part for part in error["loc"] if not _is_tag(part))
            problems.append(
                f"{dotted(loc)}: {_message(error, model, data)} ({_where(positions, loc)})"
            )
        definition = None
    if problems:
        raise DefinitionError(problems)
    return definition


def _is_tag(part: str | int) -> bool:
    # pydantic names the member of a union it tried (`function-after[...]`, `list[...]`):
    # not a key of the file.
    return isinstance(part, str) and ("[" in part or part in ("none", "function-after"))


def dump(data: dict) -> str:
    """The file's text: keys in the schema's order, block style, times as ISO 8601."""
    return yaml.dump(
        _plain(data),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


class _Dumper(yaml.SafeDumper):
    """Lists indented under their key, and long texts as literal blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


def _text(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)
