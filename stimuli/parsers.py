"""Reading JSON that someone outside the platform wrote: a request's body, a form's settings, a
team's archive manifest, a sandboxed generator's reply.

Python's parser recurses once per nested array or object and raises RecursionError past about a
thousand levels: a few kilobytes of `[` would end the request in a server error, or a job with
a traceback. Here that is a malformed document like any other (ValueError, or DRF's ParseError,
a 400), so each caller's existing "not JSON" answer covers it.
"""

from __future__ import annotations

import json

from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.parsers import JSONParser as DRFJSONParser

TOO_DEEP = "nested too deep"


def read_json(text: str | bytes | bytearray) -> object:
    """`json.loads(text)`, with a document nested past the parser's recursion a ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


class JSONParser(DRFJSONParser):
    """DRF's JSON parser, answering a document nested too deep with 400 as it does bad JSON."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - {TOO_DEEP}") from None


class TextParser(BaseParser):
    """A body that is a text file (a challenge's definition), as its bytes: the view decodes
    and checks them with the file's own rules (stimuli/definition_files.py), as it does an
    uploaded file's."""

    media_type = "text/plain"

    def parse(self, stream, media_type=None, parser_context=None) -> bytes:
        return stream.read() if stream is not None else b""


class YAMLParser(TextParser):
    media_type = "application/yaml"
