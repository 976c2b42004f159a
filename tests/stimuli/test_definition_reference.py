"""The manual's reference of the definition file is generated from its JSON Schema: the committed
page and schema are what the sections say now, every key is described in words, and the
command prints the page."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from django.core.management import call_command

from stimuli import definition
from stimuli.definition import reference

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_page_and_schema_are_what_the_sections_generate():
    page = (ROOT / reference.PAGE).read_text()
    schema = (ROOT / reference.SCHEMA).read_text()
    stale = f"is stale; regenerate both with: {reference.REGENERATE}"
    assert schema == definition.schema_json(), f"{reference.SCHEMA} {stale}"
    assert page == reference.markdown(), f"{reference.PAGE} {stale}"


def test_the_command_prints_the_page_and_the_schema():
    out = io.StringIO()
    call_command("challenge", "schema", "--markdown", stdout=out)
    assert out.getvalue() == reference.markdown()
    assert out.getvalue().startswith("# The challenge file\n")
    out = io.StringIO()
    call_command("challenge", "schema", stdout=out)
    assert json.loads(out.getvalue()) == definition.schema()


def _objects(schema: dict) -> dict[str, dict]:
    return {"(top)": schema, **{d["title"]: d for d in schema["$defs"].values()}}


def test_every_key_is_described_in_words_and_titled_by_its_place_not_its_name():
    schema = definition.schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    titles = {d["title"] for d in schema["$defs"].values()}
    assert titles == {
        "clip",
        "categories[]",
        "tracks[]",
        "schedule",
        "objective",
        "listening",
        "listening.screening",
        "rater_rules",
        "scoring",
        "text_prompts",
    }
    vague = []
    for where, obj in _objects(schema).items():
        for key, prop in obj["properties"].items():
            assert "title" not in prop, f"{where}.{key}: a title in words ('Fad Model')"
            text = prop.get("description", "")
            if "$ref" in prop:  # a section: its object describes it
                continue
            # A description that only spells the key out (Django's verbose name) says nothing.
            if text.lower().strip(" .") in ("", key.replace("_", " ")) or "\n" in text:
                vague.append(f"{where}.{key}: {text!r}")
    assert not vague, vague


def test_the_page_has_a_section_per_object_and_a_row_per_key_with_its_type_in_words():
    page = reference.markdown()
    schema = definition.schema()
    headings = re.findall(r"^#{2,3} `([a-z_.]+)` \{#", page, flags=re.MULTILINE)
    assert headings == [
        "clip",
        "categories",
        "tracks",
        "schedule",
        "objective",
        "listening",
        "listening.screening",
        "rater_rules",
        "scoring",
        "text_prompts",
    ]
    for where, obj in _objects(schema).items():
        for key in obj["properties"]:
            assert f"\n| `{key}` | " in page, f"{where}.{key} has no row"
    rows = {
        "duration_s": "number in (0, 60]",
        "sample_rate": "integer in [8000, 192000]",
        "bit_depth": "one of 16/24",
        "registration_opens": "date-time or null",
        "fad_bootstrap": "integer ≥ 0",
        "who": "one of `crowd`/`everyone`",
        "categories": "list of objects ([below](#categories))",
        "screening": "object ([below](#listening-screening)) or null",
        "rules": "object",
    }
    for key, kind in rows.items():
        assert re.search(rf"\n\| `{key}` \| {re.escape(kind)} \| ", page), key
    assert "\n| `slug` | text, matching `^[-a-zA-Z0-9_]+$`, ≤ 80 characters | required |" in page
    assert "\n| `time_zone` | text | `UTC` | " in page
    # A long default is a YAML block under its table, as the file writes it.
    assert "| `misrating` | object | below |" in page
    assert "```yaml\nmisrating:\n  anchor_hq_goodfit:\n    - quality_not_high\n" in page
    # What the file leaves out on purpose, and how dates without an offset are read.
    assert "completion and screen-out codes" in page
    assert "a date without an offset means the file's" in page
    # The shipped DCASE file, reproduced as it is (a link out of docs/ would break the manual).
    assert (ROOT / reference.EXAMPLE).read_text() in page
