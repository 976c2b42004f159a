"""A challenge's definition file: export and apply round-trip, a second apply changes nothing,
every wrong key is named with its line, what the challenge's state forbids is refused in the
words of the API, and nothing is written on a refusal."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from raters.models import ListeningTest, Screening
from scoring.models import ScoringSettings
from stimuli import definition
from stimuli.definition import DefinitionError
from stimuli.errors import Refused
from stimuli.models import Category, Challenge, Clip
from stimuli.services import create_challenge
from stimuli.submissions.schedule import set_schedule
from tests.stimuli.test_api_edits import store_clips

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
DCASE = ROOT / "challenges" / "dcase2023-task7.yaml"


def _customised() -> Challenge:
    """A challenge with something set in every section."""
    challenge = create_challenge(
        name="Foley 2024",
        slug="foley-2024",
        categories=[("rain", "Rain"), ("door", "Door knock")],
        tracks=[("A", "Open", "Anything goes.", True)],
    )
    set_schedule(
        challenge,
        time_zone="Asia/Tokyo",
        submission_deadline=dt.datetime(2024, 5, 15, 23, 59),
        submissions_per_day=2,
    )
    test, _ = ListeningTest.objects.get_or_create(challenge=challenge)
    ListeningTest.objects.filter(pk=test.pk).update(
        gold_per_session=2, target_ratings=12, exclude_at=4, consent_text="I agree.\nTwice."
    )
    Screening.objects.create(test=test, headphone_trials=8, headphone_pass=6)
    ScoringSettings.objects.create(challenge=challenge, weight_diversity=0.25)
    return challenge


@pytest.fixture
def stdin(monkeypatch):
    def give(text: str) -> None:
        monkeypatch.setattr("sys.stdin", io.StringIO(text))

    return give


def _command_apply(stdin, text: str, *args: str) -> str:
    stdin(text)
    out = io.StringIO()
    call_command("challenge", "apply", "-", *args, stdout=out)
    return out.getvalue()


def test_export_then_apply_on_an_empty_database_gives_the_same_file(stdin):
    text = definition.export(_customised())
    assert "submission_deadline: '2024-05-15T23:59:00+09:00'" in text
    Challenge.objects.all().delete()
    out = _command_apply(stdin, text)
    assert out.startswith("+ challenge foley-2024")
    again = Challenge.objects.get(slug="foley-2024")
    assert definition.export(again) == text
    assert list(again.categories.values_list("slug", flat=True)) == ["rain", "door"]
    # Applied twice: nothing to change.
    assert _command_apply(stdin, text).strip() == "no changes"


def test_a_change_is_printed_as_a_diff_and_a_dry_run_changes_nothing(stdin):
    challenge = _customised()
    text = definition.export(challenge)
    changed = text.replace("weight_diversity: 0.25", "weight_diversity: 0.5").replace(
        "  - slug: door\n    name: Door knock\n", ""
    )
    out = _command_apply(stdin, changed, "--dry-run")
    assert "~ scoring.weight_diversity: 0.25 -> 0.5" in out
    assert "- categories[door].slug: 'door'" in out and "(dry run" in out
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 0.25
    assert challenge.categories.count() == 2
    _command_apply(stdin, changed)
    assert ScoringSettings.objects.get(challenge=challenge).weight_diversity == 0.5
    assert list(challenge.categories.values_list("slug", flat=True)) == ["rain"]


WRONG = {
    "slug": ("slug: foley-2024", "slug: [1, 2]"),
    "clip": ("clip:\n  duration_s: 4.0", "clip: 5\nx_:\n  duration_s: 4.0"),
    "categories": ("categories:\n", "categories: rain\nx_:\n"),
    "tracks": ("tracks:\n", "tracks: 7\nx_:\n"),
    "schedule": ("  submissions_per_day: 2", "  submissions_per_day: many"),
    "objective": ("  fad_bootstrap: 200", "  fad_bootstrap: [200]"),
    "listening": ("  gold_per_session: 2", "  gold_per_session: two"),
    "rater_rules": ("  exclude_at: 4", "  exclude_at: {}"),
    "scoring": ("  weight_diversity: 0.25", "  weight_diversity: half"),
    "text_prompts": ("text_prompts: null", "text_prompts: 3"),
}


@pytest.mark.parametrize("section", list(WRONG))
def test_each_section_of_a_wrong_type_is_refused_with_its_path_and_line(section):
    text = definition.export(_customised())
    before, after = WRONG[section]
    assert before in text
    wrong = text.replace(before, after, 1)
    line = wrong.splitlines().index(after.splitlines()[0]) + 1
    with pytest.raises(DefinitionError) as refused:
        definition.apply(wrong)
    problems = refused.value.problems
    mine = [p for p in problems if p.startswith(section) and "x_" not in p]
    assert mine, problems
    assert all(f"(line {line}, column" in p for p in mine), problems


def test_every_problem_is_named_at_once_and_nothing_is_written():
    challenge = _customised()
    text = definition.export(challenge)
    wrong = (
        text.replace("name: Foley 2024", "name: Renamed")
        .replace("  sample_rate: 22050", "  sample_rate: 1000")
        .replace("  seed: 2023", "  seed: 2023\n  colour: blue")
        .replace("  target_ratings: 12", "  target_ratings: -1")
    )
    with pytest.raises(DefinitionError) as refused:
        definition.apply(wrong)
    problems = refused.value.problems
    assert len(problems) == 3, problems
    assert any(p.startswith("clip.sample_rate: input should be greater than") for p in problems)
    assert any(
        p.startswith("scoring.colour: unknown key; the keys here are: remove_self_ratings")
        for p in problems
    )
    assert any(p.startswith("listening.target_ratings:") for p in problems)
    challenge.refresh_from_db()
    assert challenge.name == "Foley 2024"


def test_what_the_challenge_holds_refuses_changes_in_the_apis_words(api_client, stdin):
    challenge = create_challenge(name="Foley 2023", slug="foley-2023")
    store_clips(api_client, challenge)
    text = definition.export(challenge)
    changed = text.replace("sample_rate: 22050", "sample_rate: 44100").replace(
        "name: Foley 2023", "name: Foley 2023 (renamed)"
    )
    stdin(changed)
    with pytest.raises(CommandError) as refused:
        call_command("challenge", "apply", "-")
    api = api_client.patch(
        f"/api/challenges/{challenge.slug}/", {"sample_rate": 44_100}, format="json"
    )
    assert api.status_code == 409
    assert f"clip: {api.json()['detail']}" in str(refused.value)
    assert "nothing was changed" in str(refused.value)
    challenge.refresh_from_db()
    assert (challenge.sample_rate, challenge.name) == (22_050, "Foley 2023")
    # A category that holds clips cannot go either; one that holds none can.
    with pytest.raises(Refused, match=r"categories\[rain\]: cannot be removed: 1 clips"):
        definition.apply(text.replace("  - slug: rain\n    name: Rain\n", ""))
    assert Clip.objects.filter(challenge=challenge).count() == 1
    applied = definition.apply(text.replace("  - slug: gunshot\n    name: Gunshot\n", ""))
    assert not Category.objects.filter(challenge=challenge, slug="gunshot").exists()
    assert "- categories[gunshot].slug: 'gunshot'" in applied.diff


def test_the_shipped_dcase_definition_applies_and_exports_back_to_no_changes(stdin):
    out = _command_apply(stdin, DCASE.read_text())
    assert out.startswith("+ challenge dcase2023-task7")
    challenge = Challenge.objects.get(slug="dcase2023-task7")
    assert challenge.categories.count() == 7 and challenge.tracks.count() == 2
    assert (challenge.clip_duration_s, challenge.sample_rate, challenge.bit_depth) == (
        4.0,
        22_050,
        16,
    )
    test = ListeningTest.objects.get(challenge=challenge)
    assert (test.anchors_per_session, test.exclude_at, test.categories_min) == (12, 5, 4)
    exported = io.StringIO()
    call_command("challenge", "export", "dcase2023-task7", stdout=exported)
    out = _command_apply(stdin, exported.getvalue(), "--dry-run")
    assert out.startswith("no changes")
    # The shipped file and the export say the same (the shipped one with its comments).
    assert yaml.safe_load(DCASE.read_text()) == yaml.safe_load(exported.getvalue())


def test_an_unknown_key_is_refused_by_name_and_nothing_is_written(stdin):
    text = DCASE.read_text().replace("  anchors_per_session: 12", "  anchors_per_sesion: 12")
    stdin(text)
    with pytest.raises(CommandError) as refused:
        call_command("challenge", "apply", "-")
    message = str(refused.value)
    assert re.search(r"listening\.anchors_per_sesion: unknown key; the keys here are: ", message)
    assert "listening.anchors_per_session" not in message  # it has a default: not missing
    assert not Challenge.objects.filter(slug="dcase2023-task7").exists()


def test_a_yaml_error_and_a_key_given_twice_are_named_with_their_line():
    with pytest.raises(DefinitionError, match=r"not YAML: .*\(line 3, column 1\)"):
        definition.apply("slug: a\nname: [unclosed\n")
    with pytest.raises(DefinitionError, match=r"name: given twice \(line 3\)"):
        definition.apply("slug: a\nname: A\nname: B\ncategories: []\ntracks: []\n")
