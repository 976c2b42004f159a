"""A definition file as organizers hand it in: a challenge's own, through its page or the API (the
file must name that challenge), or a new challenge's, through the API.

Both go through `definition.apply`, its dry run included; what is added here is what an upload
needs: the text read from bytes, the file held to the challenge of the address it was sent to,
and each refusal of the challenge's state placed at its line in the file, like the file's own
problems.
"""

from __future__ import annotations

import re

import yaml
from django.core.exceptions import PermissionDenied
from django.db import transaction

from . import definition
from .definition import Applied, DefinitionError
from .definition.document import parse
from .definition.sections import definition_model
from .errors import Conflict, Refused
from .models import Challenge
from .permissions import may_create_challenges

# A definition is a few kilobytes (DCASE 2023 Task 7's, with its comments, is 7); a body many
# times that is not one.
MAX_BYTES = 256 * 1024


def text_of(data: bytes | str) -> str:
    """The file's text: UTF-8 (a byte order mark dropped), at most MAX_BYTES, and its line ends
    as `\\n`, so that the same file pasted, uploaded or posted back by a browser (which sends
    `\\r\\n`) has one sha256."""
    if isinstance(data, bytes):
        if len(data) > MAX_BYTES:
            raise DefinitionError([_too_large(len(data))])
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DefinitionError(
                [f"(the file): not UTF-8 text (byte {exc.start + 1} cannot be read)"]
            ) from None
    elif len(data.encode()) > MAX_BYTES:
        raise DefinitionError([_too_large(len(data.encode()))])
    text = data.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise DefinitionError(["(the file): empty; a definition (slug:, name:, ...) needed"])
    return text


def _too_large(size: int) -> str:
    return f"(the file): {size:,} bytes; a definition file is at most {MAX_BYTES:,} bytes"


def apply_to(challenge: Challenge, text: str, *, by, dry_run: bool = False) -> Applied:
    """Apply `text` to `challenge`: a file that names another challenge is refused before
    anything is read of either (an upload to one challenge never changes or creates another)."""
    slug, where = _declared_slug(text)
    if isinstance(slug, str) and slug != challenge.slug:
        problems = [
            f"slug: the file defines challenge '{slug}' ({where}), but this is challenge "
            f"'{challenge.slug}'; a definition file changes only the challenge it names"
        ]
        try:  # the file's own problems too, all at once
            parse(text, definition_model())
        except DefinitionError as exc:
            problems.extend(exc.problems)
        raise DefinitionError(problems)
    return _placed(text, lambda: definition.apply(text, by=by, dry_run=dry_run))


def create(text: str, *, by, dry_run: bool = False) -> Applied:
    """A new challenge from `text`, owned by `by`: refused if its slug is taken (changing a
    challenge goes through that challenge's own address, where its organizers are checked)."""
    if not may_create_challenges(by):
        raise PermissionDenied("Only the organizers group can create challenges.")
    slug, where = _declared_slug(text)
    if isinstance(slug, str) and Challenge.objects.filter(slug=slug).exists():
        raise Conflict([_taken(slug, where)])
    with transaction.atomic():
        applied = _placed(text, lambda: definition.apply(text, by=by, dry_run=dry_run))
        if not applied.created:  # created by another request meanwhile: undone here
            raise Conflict([_taken(applied.slug, where)])
    return applied


def _taken(slug: str, where: str) -> str:
    return (
        f"slug: a challenge '{slug}' exists ({where}); a file changes it at that challenge's "
        "own address, where its organizers are"
    )


def _declared_slug(text: str) -> tuple[object, str]:
    """The file's `slug:` and where it stands, if the file is a YAML mapping (otherwise
    `definition.apply` names what is wrong)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None, ""
    if not isinstance(root, yaml.MappingNode):
        return None, ""
    for key, value in root.value:
        if key.value == "slug" and isinstance(value, yaml.ScalarNode):
            return value.value, f"line {key.start_mark.line + 1}"
    return None, ""


def _placed(text: str, run):
    """`run()`, with each refusal of the challenge's state (`clip: ...`) given the line of its
    key in the file, as the file's own problems are."""
    try:
        return run()
    except DefinitionError:
        raise
    except Refused as exc:
        problems = [_with_line(text, p) for p in exc.problems]
        raise Refused(problems, status=exc.status) from None


# `listening.screening.attempts`, `categories[rain].name`, `categories[2]`: a key's path before
# the problem's first colon.
_PATH = re.compile(r"^(?P<path>[A-Za-z_][\w-]*(?:\.[\w-]+|\[[^\]\s]+\])*):")
_PART = re.compile(r"\.?([\w-]+)|\[([^\]]+)\]")


def _with_line(text: str, problem: str) -> str:
    match = _PATH.match(problem)
    if match is None or "(line " in problem:
        return problem
    line = line_of(text, match.group("path"))
    return f"{problem} (line {line})" if line else problem


def line_of(text: str, path: str) -> int | None:
    """The line of the key at `path` in the file, or of the nearest key above it that the file
    has (a category the file leaves out: its list's). An item of a list is named by its index
    or by the value that names it (`categories[rain]`: the item whose slug is rain)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    line = None
    for name, item in _PART.findall(path):
        if isinstance(node, yaml.MappingNode) and name:
            found = next(((k, v) for k, v in node.value if k.value == name), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif isinstance(node, yaml.SequenceNode) and item:
            node = _item(node, item)
            if node is None:
                break
            line = node.start_mark.line + 1
        else:
            break
    return line


def _item(node: yaml.SequenceNode, name: str) -> yaml.Node | None:
    if name.isdigit():
        index = int(name)
        return node.value[index] if index < len(node.value) else None
    for item in node.value:
        if isinstance(item, yaml.MappingNode) and any(
            isinstance(v, yaml.ScalarNode) and v.value == name for _, v in item.value
        ):
            return item
    return None
