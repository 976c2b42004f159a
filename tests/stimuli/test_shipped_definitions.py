"""Every definition shipped under challenges/ (DCASE 2023 Task 7's, the demo's) applies on an
empty database, says what its export says, and applied again changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stimuli import definition
from stimuli.models import Challenge

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "challenges").glob("*.yaml"))


def test_the_shipped_definitions_are_found():
    assert {p.name for p in SHIPPED} >= {"dcase2023-task7.yaml", "demo.yaml", "demo-text.yaml"}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_each_shipped_definition_applies_on_an_empty_database_and_exports_to_no_changes(path):
    text = path.read_text()
    applied = definition.apply(text)
    assert applied.created and applied.diff.startswith(f"+ challenge {applied.slug}")
    exported = definition.export(Challenge.objects.get(slug=applied.slug))
    # The file says what the export says (the file with its comments).
    assert yaml.safe_load(exported) == yaml.safe_load(text)
    again = definition.apply(exported, dry_run=True)
    assert not again.created and again.diff == "no changes"
    assert definition.apply(text).diff == "no changes"
