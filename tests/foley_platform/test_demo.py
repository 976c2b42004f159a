"""The demo challenge is built from its definition file and through the same import path as real
uploads; the demo command prints its help without doing anything else."""

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from stimuli import definition
from stimuli.demo import (
    DEMO_FILE,
    DEMO_PASSWORD,
    DEMO_SLUG,
    DEMO_USER,
    TEXT_DEMO_FILE,
    TEXT_DEMO_SLUG,
    seed_demo,
    seed_text_demo,
)
from stimuli.job_kinds import GENERATE
from stimuli.models import Clip
from stimuli.permissions import challenge_role, is_organizer

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def test_the_demos_files_name_the_demos_challenges():
    # Each file under challenges/ applies and exports back to itself:
    # tests/stimuli/test_shipped_definitions.py.
    assert DEMO_FILE.parent == TEXT_DEMO_FILE.parent == ROOT / "challenges"
    assert yaml.safe_load(DEMO_FILE.read_text())["slug"] == DEMO_SLUG
    assert yaml.safe_load(TEXT_DEMO_FILE.read_text())["slug"] == TEXT_DEMO_SLUG


def test_seed_demo_creates_reference_sets_systems_and_an_organizer(django_user_model):
    summary = seed_demo(per_category=2, system_clips=3)
    challenge = summary.challenge
    assert summary.created
    assert Clip.objects.filter(challenge=challenge, role="development").count() == 14
    assert Clip.objects.filter(challenge=challenge, role="evaluation").count() == 14
    # The anchors' private sources, imported as such.
    assert Clip.objects.filter(challenge=challenge, role="anchor").count() == 14
    assert Clip.objects.filter(challenge=challenge, role="system").count() == 7 * 7 * 3
    tracks = sorted(challenge.systems.values_list("track__code", flat=True))
    assert tracks == ["A"] * 5 + ["B"] * 2  # with the baseline's three: five per track
    user = django_user_model.objects.get(username=DEMO_USER)
    assert user.check_password(DEMO_PASSWORD) and is_organizer(user)
    assert challenge_role(user, challenge) == "owner"
    # Its settings are its file's: the models of the objective stage, the league, the finalists.
    assert yaml.safe_load(definition.export(challenge)) == yaml.safe_load(DEMO_FILE.read_text())
    objective = challenge.objective_settings
    assert (objective.fad_model, objective.medoid_model, objective.finalists_per_track) == (
        "logmel",
        "logmel",
        4,
    )
    assert objective.league_models[0]["name"] == "logmel"
    again = seed_demo(per_category=2, system_clips=3)
    assert not again.created and again.challenge == challenge


def test_the_text_demo_is_its_file_and_its_study_opens_on_the_baselines_text_variant():
    from raters.demo import open_text_study

    challenge, created = seed_text_demo(per_category=2)
    assert created and challenge.slug == TEXT_DEMO_SLUG
    assert yaml.safe_load(definition.export(challenge)) == yaml.safe_load(
        TEXT_DEMO_FILE.read_text()
    )
    study = challenge.text_prompt_study
    assert (study.judges, study.realism_clips, study.prompts) == (5, 6, 3)
    assert not study.is_open and not study.systems.exists()
    path = open_text_study(challenge)
    study.refresh_from_db()
    assert study.is_open and study.systems.get().name == "Procedural baseline (text)"
    assert path.startswith(f"/listen/{TEXT_DEMO_SLUG}/join/")
    assert open_text_study(challenge) == path


def test_demo_command_refuses_without_debug(settings):
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG=1 only"):
        call_command("demo")


def test_demo_runs_the_whole_challenge_and_publishes(settings, tmp_path):
    from scoring.demo import run_demo
    from scoring.models import Snapshot
    from stimuli.models import FadResult, Medoid, PredictorScore

    # A lighter configuration than the demo command's: 20 bootstrap resamples per FAD instead of
    # 200 (two thirds of the ranking's time here; the intervals themselves are tested in
    # tests/stimuli/objective/test_fad.py), and 6 medoids per finalist and category instead of
    # 20 (under a third of the sounds to prepare and rate; the medoids' selection is tested in
    # tests/stimuli/objective/test_services.py). The 10 ratings wanted per sound stay: with fewer,
    # the farm's and careless raters' exclusions leave finalists unranked and the league short.
    run = run_demo(
        clips_per_category=26,
        simulate_raters=True,
        n_raters=4,
        objective_settings={"fad_bootstrap": 20, "medoids_per_category": 6},
        model_dir=tmp_path / "demo-models",
    )
    challenge = run.challenge
    generated = Clip.objects.filter(challenge=challenge, source_job__kind=GENERATE)
    assert generated.count() == 3 * 7 * 26  # the baseline and its two variants
    # 10 systems x 7 categories x (Eval, Dev) under the FAD model and each league model.
    models = set(FadResult.objects.filter(challenge=challenge).values_list("model_id", flat=True))
    assert len(models) >= 2
    assert FadResult.objects.filter(challenge=challenge).count() == len(models) * 10 * 7 * 2
    finalists = challenge.systems.filter(is_finalist=True)
    assert sorted(finalists.values_list("track__code", flat=True)) == ["A"] * 4 + ["B"] * 4
    assert Medoid.objects.filter(challenge=challenge).count() == 8 * 7 * 6
    assert run.published and challenge.phase == "published"
    snapshot = Snapshot.objects.get(challenge=challenge)
    assert {row["track"] for row in _rows(snapshot.result)} == {"A", "B"}
    # The embedding league: the FAD model and at least one more.
    league = snapshot.result["metric_league"]
    assert len(league["models"]) >= 2 and league["designated"] in league["models"]
    assert all(len(entries) == len(league["models"]) for entries in league["tracks"].values())
    # Each model ranked by FAD and by KAD over the 8 finalists, with its stability on 25 clips
    # (the demo here has 26 per category; the demo command's 52 adds 50).
    for table in (league["pooled"], league["kad"]["pooled"]):
        for entry in table.values():
            assert entry["n_systems"] == 8 and entry["spearman"] is not None
            assert entry["tau_25"] is not None and entry["tau_50"] is None  # 26 clips each
    assert snapshot.result["kad"] is True
    page = Client().get(f"/results/{challenge.slug}/{snapshot.number}/").content.decode()
    league_table = page[page.index('id="table-metric-league"') :]
    assert "KAD" in league_table and 'id="table-league-stability"' in league_table
    assert "KAD-Eval" in page
    # The learned predictors on every system clip, from the demo's small untrained stand-ins
    # (written in the folder it was given, none where the released files are looked for): each
    # axis in the league beside FAD and KAD, and the page saying what they are.
    system_clips = Clip.objects.filter(challenge=challenge, role=Clip.Role.SYSTEM).count()
    scores = PredictorScore.objects.filter(clip__challenge=challenge)
    assert scores.count() == system_clips * 5
    assert all(
        m.endswith("(untrained stand-in)") for m in scores.values_list("model_id", flat=True)
    )
    assert (tmp_path / "demo-models" / "audiobox-aesthetics" / "checkpoint.pt").is_file()
    assert [a["axis"] for a in league["predictors"]["axes"]] == ["PQ", "PC", "CE", "CU", "PAM"]
    assert all(e["n_systems"] == 8 for e in league["predictors"]["pooled"].values())
    assert "Audiobox Aesthetics (untrained stand-in)" in league_table
    assert "Audiobox Aesthetics and PAM ran on untrained stand-ins" in league_table
    assert run.listen_path.startswith(f"/listen/{challenge.slug}/join/")
    # The small text-prompt study on the baseline's text variant, open for its judges.
    study = run.text_challenge.text_prompt_study
    assert study.is_open and study.systems.get().generator.report["has_text"]
    assert run.text_challenge.described_clips.count() == 21
    assert run.text_judge_path.startswith(f"/listen/{run.text_challenge.slug}/join/")
    again = run_demo(clips_per_category=26)  # a second run only reports
    assert again.published and Snapshot.objects.filter(challenge=challenge).count() == 1
    _released_as_published(snapshot, tmp_path)


def _released_as_published(snapshot, tmp_path) -> None:
    """The demo's published challenge as a data release: a valid Data Package, none of its
    crowd workers' participant ids in any file, and its leaderboards rescored from the bundle
    alone."""
    import json

    import frictionless

    from raters.models import Rater
    from scoring.offline import run as score_offline
    from scoring.release import make_release, release_name
    from tests.scoring.test_release import numbers

    made = make_release(snapshot, out_dir=tmp_path)
    bundle = tmp_path / release_name(snapshot, made.version)
    report = frictionless.validate(bundle / "datapackage.json")
    assert report.valid, report.flatten(["rowNumber", "fieldName", "type", "note"])
    raters = Rater.objects.filter(challenge=snapshot.challenge)
    ids = {i for i in raters.values_list("participant_id", flat=True) if i}
    assert len(ids) >= 3  # the farm's and the recruited crowd workers'
    for path in bundle.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [i for i in ids if i.encode() in data], path.name
    # The leaderboards, rescored from the bundle alone, are the published ones.
    rescored = json.loads(score_offline({"release": bundle}))
    released = json.loads((bundle / "result.json").read_text())
    assert numbers(rescored["tracks"]) == numbers(released["tracks"])
    assert rescored["predictors"] == released["predictors"]  # from the release's predictors.csv
    assert [row.get("final") for row in _rows(released)] == [
        row.get("final") for row in _rows(snapshot.result)
    ]


def _rows(result: dict) -> list[dict]:
    return [
        {"track": track, **row}
        for track, rows in result["tracks"].items()
        for row in (rows if isinstance(rows, list) else rows.get("systems", []))
    ]


def _demo(*args: str, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "FOLEY_DATA_DIR": str(tmp_path / "data"), "FOLEY_VENV": "/nonexistent"}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "demo"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


@pytest.mark.django_db(False)
def test_the_demo_commands_help_prints_help_and_does_nothing_else(tmp_path):
    done = _demo("--help", tmp_path=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("Usage: scripts/demo [--port N]")
    assert "--port N" in done.stdout and "--simulate-raters" in done.stdout
    # Nothing installed, migrated or served: no virtual environment was looked for, no data.
    assert "Installing" not in done.stderr and not (tmp_path / "data").exists()
    refused = _demo("--port", "eighty", tmp_path=tmp_path)
    assert refused.returncode == 2 and "--port must be a number" in refused.stderr
