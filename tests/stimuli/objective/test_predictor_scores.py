"""The learned predictors as a step of the objective stage: `compute_predictors` on a folder of
audio, the `predictors` job over a challenge's system clips (one row per clip and axis, nothing
new on a second run, a clean failure without its files), and the summary per system and category.

Most tests put quick stand-ins in the registry (`PREDICTORS`) whose values are a known function
of the audio; the released networks, even with random weights, take seconds a clip on the CPU.
The missing-file tests use the real loaders; the last tests run the platform's stand-in files
(stimuli/objective/predictors/standins.py) through the command and the job: those of the
released sizes from where the settings look, the demo's small ones from a folder of their own.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from stimuli.job_kinds import PREDICTORS as PREDICTORS_KIND
from stimuli.models import Challenge, Clip, Job, PredictorScore
from stimuli.objective import predictor_scores, services
from stimuli.objective.config import ObjectiveConflict, ObjectiveError
from stimuli.objective.embeddings.store import _read
from stimuli.objective.predictor_scores import PREDICTORS, Predictor
from tests import ROOT_DIR
from tests.factories import make_wav
from tests.objective_setup import small_challenge

AXES = ["PQ", "PC", "CE", "CU"]
TWO_SYSTEMS = [("Close", "A", 0.0), ("Far", "A", 1.5)]


def expected(audio: np.ndarray, column: str) -> float:
    """What the quick stand-ins give a clip: its RMS and the column's place, so that each
    clip's and each column's values differ."""
    place = [*AXES, "PAM"].index(column)
    return float(np.sqrt(np.mean(np.square(audio, dtype=np.float64)))) * 10 + place


class QuickPredictors:
    """Stand-ins in the registry: they count the clips they rate; `files` names their files."""

    def __init__(self, monkeypatch):
        self.rated: Counter[str] = Counter()
        self.files = {"aesthetics": "1", "pam": "1"}
        for name in PREDICTORS:
            monkeypatch.setitem(PREDICTORS, name, self.predictor(PREDICTORS[name]))

    def predictor(self, real: Predictor) -> Predictor:
        def load(device, folder):
            return real.name, f"{real.name}@quick{self.files[real.name]}", "cpu"

        def rate(model, clips, sample_rate):
            self.rated[real.name] += len(clips)
            return [{c: expected(clip, c) for c in real.columns} for clip in clips]

        return Predictor(real.name, real.columns, load, rate)


@pytest.fixture
def quick(monkeypatch):
    return QuickPredictors(monkeypatch)


@pytest.fixture
def no_files(settings, tmp_path):
    """The settings name no file and FOLEY_MODEL_DIR holds none."""
    settings.FOLEY_MODEL_DIR = str(tmp_path / "models")
    settings.FOLEY_AESTHETICS_WEIGHTS = settings.FOLEY_PAM_WEIGHTS = ""
    settings.FOLEY_PAM_TOKENIZER = ""
    return tmp_path / "models"


def audio_folder(root: Path) -> Path:
    """Three clips in nested folders, one at another sample rate, and a file that is not audio."""
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.wav").write_bytes(make_wav(seconds=1.0, seed=1))
    (root / "sub" / "b.flac").write_bytes(make_wav(seconds=0.5, seed=2, fmt="FLAC", channels=2))
    (root / "sub" / "deeper" / "c.wav").write_bytes(make_wav(seconds=0.7, sample_rate=16000))
    (root / "notes.txt").write_text("not audio")
    return root


def read_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def mono(path: Path) -> np.ndarray:
    return predictor_scores.read_mono(path)[0]


# --- the command --------------------------------------------------------------------------------


def test_the_command_writes_one_row_per_file_with_the_chosen_columns(quick, tmp_path):
    folder = audio_folder(tmp_path / "clips")
    out = tmp_path / "clips.csv"
    call_command("compute_predictors", str(folder), "--out", str(out), stderr=io.StringIO())
    header, *rows = read_csv(out.read_text())
    assert header == ["path", "PQ", "PC", "CE", "CU", "PAM"]
    assert [row[0] for row in rows] == ["a.wav", "sub/b.flac", "sub/deeper/c.wav"]
    for path, *values in rows:
        audio = mono(folder / path)  # a stereo file is rated as the mean of its channels
        assert [float(v) for v in values] == pytest.approx(
            [expected(audio, c) for c in header[1:]], rel=1e-9
        )
    assert quick.rated == {"aesthetics": 3, "pam": 3}
    # One predictor, to standard output.
    printed = io.StringIO()
    call_command("compute_predictors", str(folder), "--predictors", "pam", stdout=printed)
    header, *rows = read_csv(printed.getvalue())
    assert header == ["path", "PAM"] and len(rows) == 3
    with pytest.raises(CommandError, match="unknown predictors: clap; the predictors are"):
        call_command("compute_predictors", str(folder), "--predictors", "pam,clap")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match="no audio files"):
        call_command("compute_predictors", str(tmp_path / "empty"), "--out", str(out))
    (folder / "sub" / "broken.wav").write_bytes(b"RIFF and nothing")
    with pytest.raises(CommandError, match=r"sub/broken\.wav: not readable audio"):
        call_command("compute_predictors", str(folder), stdout=io.StringIO())


def test_a_missing_checkpoint_stops_the_command_before_any_audio(no_files, tmp_path):
    folder = tmp_path / "clips"
    folder.mkdir()
    (folder / "unreadable.wav").write_bytes(b"read first, this would be the error")
    out = tmp_path / "clips.csv"
    printed = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("compute_predictors", str(folder), "--out", str(out), stdout=printed)
    message = str(caught.value)
    # Every missing file at once: each named with its setting and where it is published.
    assert str(no_files / "audiobox-aesthetics" / "checkpoint.pt") in message
    assert "FOLEY_AESTHETICS_WEIGHTS" in message and "facebook/audiobox-aesthetics" in message
    assert str(no_files / "CLAP_weights_2023.pth") in message
    assert "FOLEY_PAM_WEIGHTS" in message and "microsoft/msclap" in message
    assert "unreadable" not in message
    assert not out.exists() and printed.getvalue() == ""
    with pytest.raises(CommandError) as caught:
        call_command("compute_predictors", str(folder), "--predictors", "pam")
    assert "FOLEY_PAM_WEIGHTS" in str(caught.value)
    assert "FOLEY_AESTHETICS_WEIGHTS" not in str(caught.value)


def test_the_command_needs_no_secret_key(tmp_path):
    """A researcher's tool, like compute_fad: it reads files and prints, signing nothing."""
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    env["FOLEY_MODEL_DIR"] = str(tmp_path / "models")
    done = subprocess.run(
        [sys.executable, "manage.py", "compute_predictors", str(tmp_path), "--predictors", "pam"],
        cwd=ROOT_DIR, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "SECRET_KEY" not in done.stderr and "CLAP_weights_2023.pth" in done.stderr


# --- the job ------------------------------------------------------------------------------------


@pytest.fixture
def two_systems(db, tmp_path) -> Challenge:
    """Two systems of track A, 3 clips in each of 2 categories: 12 system clips."""
    return small_challenge(tmp_path, systems=TWO_SYSTEMS, system_clips=3, reference_clips=1)


def stored(challenge: Challenge) -> dict[tuple[int, str, str], tuple[int, float, str]]:
    rows = PredictorScore.objects.filter(clip__challenge=challenge)
    return {
        (r.clip_id, r.predictor, r.axis): (r.pk, r.value, r.model_id) for r in rows.order_by("pk")
    }


def test_the_job_stores_one_row_per_clip_and_axis_and_adds_nothing_when_run_again(
    quick, two_systems
):
    job = services.predictors_now(two_systems)
    assert (job.kind, job.state) == (PREDICTORS_KIND, Job.State.SUCCEEDED), job.error
    assert job.result == {
        "predictors": ["aesthetics", "pam"], "clips": 12, "computed": 12, "cached": 0,
        "model_ids": {"aesthetics": "aesthetics@quick1", "pam": "pam@quick1"}, "device": "cpu",
    }  # fmt: skip
    rows = stored(two_systems)
    clips = Clip.objects.filter(challenge=two_systems, role=Clip.Role.SYSTEM)
    assert len(rows) == 12 * 5 == clips.count() * 5
    for clip in clips.select_related("audio"):
        audio = _read(clip.audio)
        for axis in AXES:
            assert rows[(clip.pk, "aesthetics", axis)][1] == pytest.approx(expected(audio, axis))
        assert rows[(clip.pk, "pam", "PAM")][1] == pytest.approx(expected(audio, "PAM"))
    # Run again: every clip's rows are the same files', so nothing is rated or changed.
    again = services.predictors_now(two_systems)
    assert again.pk != job.pk and again.state == Job.State.SUCCEEDED
    assert (again.result["computed"], again.result["cached"]) == (0, 12)
    assert stored(two_systems) == rows and quick.rated == {"aesthetics": 12, "pam": 12}
    # New files for one predictor: its values are replaced in place, the other's left.
    quick.files["aesthetics"] = "2"
    third = services.predictors_now(two_systems)
    assert third.result["computed"] == 12 and quick.rated == {"aesthetics": 24, "pam": 12}
    now = stored(two_systems)
    assert now.keys() == rows.keys()
    assert all(now[k][0] == rows[k][0] for k in rows)  # the same rows, updated
    assert {now[k][2] for k in now if k[1] == "aesthetics"} == {"aesthetics@quick2"}
    assert {now[k][2] for k in now if k[1] == "pam"} == {"pam@quick1"}


def test_run_predictors_runs_the_step_on_a_challenge_and_prints_its_means(quick, two_systems):
    out = io.StringIO()
    call_command("run_predictors", two_systems.slug, "--predictors", "pam", stdout=out,
                 stderr=io.StringIO())  # fmt: skip
    printed = json.loads(out.getvalue())
    assert printed["predictors"] == ["pam"] and printed["computed"] == 12
    assert len(printed["summary"]) == 2 * 2  # per system and category, PAM's one axis
    assert {row["axis"] for row in printed["summary"]} == {"PAM"}
    assert PredictorScore.objects.filter(clip__challenge=two_systems).count() == 12
    with pytest.raises(CommandError, match="no challenge 'nothing'"):
        call_command("run_predictors", "nothing", stderr=io.StringIO())


def test_one_job_at_a_time_on_the_gpu_queue_and_the_phases_refusals(quick, two_systems):
    from foley_platform.celery import app

    assert app.amqp.router.route({}, "stimuli.tasks.predictors")["queue"].name == "gpu"
    first = services.start_predictors(two_systems, predictors="pam", enqueue_task=False)
    assert first.params == {"challenge_id": two_systems.pk, "predictors": ["pam"]}
    assert services.start_predictors(two_systems, enqueue_task=False).pk == first.pk
    job = services.run_predictors(first.pk)
    assert job.state == Job.State.SUCCEEDED and job.result["predictors"] == ["pam"]
    assert PredictorScore.objects.filter(predictor="aesthetics").count() == 0
    with pytest.raises(ObjectiveError, match="unknown predictors: fad"):
        services.start_predictors(two_systems, predictors=["fad"])
    Challenge.objects.filter(pk=two_systems.pk).update(phase=Challenge.Phase.PUBLISHED)
    two_systems.refresh_from_db()
    with pytest.raises(ObjectiveConflict, match="published"):
        services.start_predictors(two_systems)


def test_the_job_fails_cleanly_without_its_checkpoint(no_files, two_systems):
    job = services.predictors_now(two_systems)
    assert job.state == Job.State.FAILED
    # The files' own error, as the job's failure: no exception's name, no traceback.
    assert job.error.startswith("Audiobox Aesthetics checkpoint ")
    assert str(no_files / "audiobox-aesthetics" / "checkpoint.pt") in job.error
    assert "FOLEY_AESTHETICS_WEIGHTS" in job.error and "facebook/audiobox-aesthetics" in job.error
    assert "FOLEY_PAM_WEIGHTS" in job.error and "microsoft/msclap" in job.error
    assert "Traceback" not in job.log and job.result == {"predictors": ["aesthetics", "pam"]}
    assert not PredictorScore.objects.exists()


# --- the summary --------------------------------------------------------------------------------

# Student's t quantile 0.975 with 4 degrees of freedom.
T_975_4 = 2.7764451051977987


def test_the_mean_and_its_t_interval_on_known_values():
    mean, low, high = predictor_scores.mean_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    half = T_975_4 * math.sqrt(2.5) / math.sqrt(5)  # s² = 2.5
    assert (mean, low, high) == pytest.approx((3.0, 3.0 - half, 3.0 + half), rel=1e-12)
    assert predictor_scores.mean_interval([7.0]) == (7.0, None, None)
    assert predictor_scores.mean_interval([2.0, 2.0]) == (2.0, 2.0, 2.0)


def test_the_summary_per_system_and_category(two_systems):
    clips = list(
        Clip.objects.filter(challenge=two_systems, role=Clip.Role.SYSTEM).select_related(
            "system", "category"
        )
    )
    close_dog = [c for c in clips if c.system.name == "Close" and c.category.slug == "dog_bark"]
    far_rain = [c for c in clips if c.system.name == "Far" and c.category.slug == "rain"]
    rows = [
        PredictorScore(clip=c, predictor="aesthetics", axis="PQ", value=v, model_id="a@new")
        for c, v in zip(close_dog, (1.0, 3.0, 5.0), strict=True)
    ]
    rows.append(PredictorScore(clip=far_rain[0], predictor="pam", axis="PAM", value=0.25,
                               model_id="p@1"))  # fmt: skip
    PredictorScore.objects.bulk_create(rows)
    # A value from older files, left over: not counted beside the newer ones.
    old = PredictorScore.objects.create(
        clip=far_rain[0], predictor="aesthetics", axis="PQ", value=100.0, model_id="a@old"
    )
    PredictorScore.objects.filter(pk=old.pk).update(computed_at="2000-01-01T00:00Z")
    summary = predictor_scores.predictor_summary(two_systems)
    assert [(r["system"], r["category"], r["predictor"], r["axis"]) for r in summary] == [
        ("Close", "dog_bark", "aesthetics", "PQ"),
        ("Far", "rain", "pam", "PAM"),
    ]
    pq, pam = summary
    half = 4.302652729911275 * 2.0 / math.sqrt(3)  # t(0.975, 2), s = 2
    assert pq["track"] == "A" and pq["clips"] == 3 and pq["model_id"] == "a@new"
    assert (pq["mean"], pq["low"], pq["high"]) == pytest.approx((3.0, 3.0 - half, 3.0 + half))
    assert (pam["clips"], pam["mean"], pam["low"], pam["high"]) == (1, 0.25, None, None)


# --- the platform's stand-in files --------------------------------------------------------------


@pytest.mark.slow  # the released networks' full sizes: seconds a clip on the CPU
def test_the_stand_in_files_run_through_the_command_and_the_job(db, tmp_path, settings):
    from stimuli.objective.predictors.standins import write_standins

    settings.FOLEY_MODEL_DIR = str(tmp_path / "models")
    write_standins(tmp_path / "models")
    folder = tmp_path / "clips"
    folder.mkdir()
    (folder / "one.wav").write_bytes(make_wav(seconds=4.0, seed=1))
    out = tmp_path / "clips.csv"
    call_command("compute_predictors", str(folder), "--out", str(out), "--device", "cpu",
                 stderr=io.StringIO())  # fmt: skip
    header, row = read_csv(out.read_text())
    assert header == ["path", "PQ", "PC", "CE", "CU", "PAM"] and row[0] == "one.wav"
    values = dict(zip(header[1:], map(float, row[1:]), strict=True))
    assert all(math.isfinite(v) for v in values.values()) and 0 <= values["PAM"] <= 1
    challenge = small_challenge(
        tmp_path / "audio", systems=TWO_SYSTEMS[:1], system_clips=1, reference_clips=1
    )
    job = services.predictors_now(challenge)
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.result["model_ids"]["aesthetics"].startswith("aesthetics@")
    assert PredictorScore.objects.filter(clip__challenge=challenge).count() == 2 * 5
    summary = predictor_scores.predictor_summary(challenge)
    assert len(summary) == 2 * 5 and all(r["clips"] == 1 for r in summary)


def test_the_demos_small_stand_ins_run_from_a_folder_of_their_own_and_say_so(
    db, tmp_path, no_files
):
    from stimuli.objective.predictors.standins import DEMO_SIZES, write_standins
    from stimuli.predictor_axes import UNTRAINED_MARK

    write_standins(tmp_path / "demo-models", DEMO_SIZES)
    challenge = small_challenge(
        tmp_path / "audio", systems=TWO_SYSTEMS, system_clips=2, reference_clips=1
    )
    # Not where the settings look: the folder is named by the job, and recorded in it.
    job = services.predictors_now(challenge, model_dir=str(tmp_path / "demo-models"))
    assert job.state == Job.State.SUCCEEDED, job.error
    assert job.params["model_dir"] == str(tmp_path / "demo-models")
    assert all(i.endswith(f" {UNTRAINED_MARK}") for i in job.result["model_ids"].values())
    clips = Clip.objects.filter(challenge=challenge, role=Clip.Role.SYSTEM).count()
    assert PredictorScore.objects.filter(clip__challenge=challenge).count() == clips * 5
    summary = predictor_scores.predictor_summary(challenge)
    assert {r["model_id"] for r in summary} == set(job.result["model_ids"].values())
    # Nothing was looked for, or left, where the released files belong.
    assert not no_files.exists() or not any(no_files.iterdir())
