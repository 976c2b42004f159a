"""The objective stage's management commands: compute_fad, rank_by_fad, select_medoids,
import_reference_stats."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from stimuli.models import Medoid, ReferenceStats
from stimuli.objective.embeddings.base import split_model_id
from stimuli.objective.fad import GaussianStats, fad, frechet_distance
from stimuli.services import create_challenge
from tests.factories import make_wav
from tests.objective_setup import small_challenge


def run(*args) -> dict:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


def test_compute_fad_on_embeddings_and_statistics(tmp_path):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 16)), rng.normal(0.5, 1.0, size=(300, 16))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    stats = GaussianStats.from_embeddings(b)
    (tmp_path / "b.npz").write_bytes(stats.to_npz_bytes())
    result = run("compute_fad", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"))
    assert result["fad"] == pytest.approx(fad(a, b), rel=1e-9)
    result = run("compute_fad", str(tmp_path / "a.npy"), str(tmp_path / "b.npz"), "--inf")
    assert result["fad"] == pytest.approx(fad(a, b), rel=1e-9)
    assert "fad_inf" in result and result["b"]["embeddings"] == 300


def test_compute_fad_on_the_dcase_statistics(dcase_stats_dir):
    files = sorted(dcase_stats_dir.glob("*.npz"))
    result = run("compute_fad", str(files[0]), str(files[1]))
    expected = frechet_distance(GaussianStats.from_npz(files[0]), GaussianStats.from_npz(files[1]))
    assert result["fad"] == pytest.approx(expected)


def test_compute_fad_on_audio_folders(tmp_path):
    for folder, amplitude in (("a", 0.1), ("b", 0.3)):
        (tmp_path / folder).mkdir()
        for n in range(4):
            data = make_wav(seconds=1.0, seed=n + (10 if folder == "b" else 0), amplitude=amplitude)
            (tmp_path / folder / f"{n}.wav").write_bytes(data)
    result = run(
        "compute_fad", str(tmp_path / "a"), str(tmp_path / "b"), "--model", "logmel",
        "--bootstrap", "50",
    )  # fmt: skip
    assert result["fad"] > 0 and result["a"]["clips"] == 4
    assert result["model_id"].startswith("logmel:")
    low, high = result["ci95"]
    assert low <= high
    same = run("compute_fad", str(tmp_path / "a"), str(tmp_path / "a"), "--model", "logmel")
    assert same["fad"] == pytest.approx(0.0, abs=1e-6)


def test_compute_kad_on_embeddings_frames_and_audio(tmp_path):
    from stimuli.objective.kad import KadReference, kernel_distance

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 16)), rng.normal(0.5, 1.0, size=(30, 4, 16))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    result = run("compute_kad", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"))
    assert result["kad"] == pytest.approx(kernel_distance(b, KadReference.of(a)), rel=1e-12)
    assert result["b"] == {"clips": 30, "embeddings": 120}
    low, high = result["ci95"]
    assert 0 <= low < result["kad"] < high
    for folder, amplitude in (("ref", 0.1), ("sys", 0.3)):
        (tmp_path / folder).mkdir()
        for n in range(4):
            data = make_wav(
                seconds=1.0, seed=n + (10 if folder == "sys" else 0), amplitude=amplitude
            )
            (tmp_path / folder / f"{n}.wav").write_bytes(data)
    audio = run("compute_kad", str(tmp_path / "ref"), str(tmp_path / "sys"), "--model", "logmel")
    assert audio["kad"] > 0 and audio["model_id"].startswith("logmel:")
    assert audio["ci_withheld"] == "fewer than 5 clips"
    np.save(tmp_path / "c.npy", np.zeros((5, 8)))
    np.save(tmp_path / "d.npy", rng.normal(size=(5, 8)))
    with pytest.raises(CommandError, match="sizes differ: 16 and 8"):
        call_command("compute_kad", str(tmp_path / "d.npy"), str(tmp_path / "b.npy"))
    with pytest.raises(CommandError, match="median pairwise distance is 0"):
        call_command("compute_kad", str(tmp_path / "c.npy"), str(tmp_path / "c.npy"))
    with pytest.raises(CommandError, match=r"expected a folder of audio or a \.npy"):
        call_command("compute_kad", str(tmp_path / "a.npy"), __file__)


def test_compute_fad_errors_are_clear(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((5, 4)))
    np.save(tmp_path / "b.npy", np.ones((5, 8)))
    with pytest.raises(CommandError, match="embedding sizes differ: A has 4, B has 8"):
        call_command("compute_fad", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("compute_fad", str(tmp_path / "nope"), str(tmp_path / "b.npy"))
    # 50 embeddings are too few to extrapolate FAD-inf from subsets of 100 and more.
    np.save(tmp_path / "c.npy", np.random.default_rng(0).normal(size=(50, 4)))
    with pytest.raises(CommandError, match="FAD-inf needs more than 100 embeddings"):
        call_command("compute_fad", str(tmp_path / "c.npy"), str(tmp_path / "c.npy"), "--inf")
    (tmp_path / "w").mkdir()
    for n in range(2):
        (tmp_path / "w" / f"{n}.wav").write_bytes(make_wav(seconds=0.5, seed=n))
    with pytest.raises(CommandError, match=r"Weights file .*vggish.* is missing"):
        call_command("compute_fad", str(tmp_path / "w"), str(tmp_path / "w"), "--model", "vggish")


@pytest.mark.django_db
def test_evaluate_and_select_medoids_commands(tmp_path):
    challenge = small_challenge(tmp_path)
    result = run("rank_by_fad", challenge.slug)
    assert [r["system"] for r in result["tracks"]["A"]] == ["Close", "Far"]
    assert result["tracks"]["A"][0]["finalist"] and not result["tracks"]["A"][1]["finalist"]
    assert result["tracks"]["B"][0]["rank"] == 1
    medoids = run("select_medoids", challenge.slug)["medoids"]
    assert set(medoids) == {"Close", "Middle"}
    assert [m["position"] for m in medoids["Close"]["rain"]] == [0, 1, 2, 3, 4]
    assert Medoid.objects.count() == 20


@pytest.mark.django_db
def test_import_reference_stats_command(dcase_stats_dir):
    challenge = create_challenge(name="DCASE", slug="dcase")
    out = io.StringIO()
    call_command("import_reference_stats", "dcase", str(dcase_stats_dir), stdout=out)
    assert "7 evaluation statistics stored." in out.getvalue()
    assert "rain: 128-d, 1000 embeddings, vggish:dcase2023-act0-raw@*" in out.getvalue()
    rows = ReferenceStats.objects.filter(challenge=challenge, model="vggish")
    assert rows.count() == 7 and set(rows.values_list("model_id", flat=True)) == {
        "vggish:dcase2023-act0-raw@*"
    }
    with pytest.raises(CommandError, match="name the model the statistics were made with"):
        call_command("import_reference_stats", "dcase", str(dcase_stats_dir), "--model", "openl3")
    with pytest.raises(CommandError, match="no challenge 'nope'"):
        call_command("import_reference_stats", "nope", str(dcase_stats_dir))


@pytest.fixture
def vggish_weights(tmp_path):
    """A random-init VGGish saved as torchvggish's release is: no released weights here."""
    import torch

    from stimuli.objective.embeddings import vggish

    path = tmp_path / vggish.WEIGHTS_FILE
    torch.save(vggish.load_model("random", device="cpu").net.state_dict(), path)
    return path


def test_compute_fad_against_the_dcase_statistics_embeds_with_their_preset_or_refuses(
    tmp_path, dcase_stats_dir, vggish_weights
):
    (tmp_path / "rain").mkdir()
    for n in range(3):
        (tmp_path / "rain" / f"{n}.wav").write_bytes(make_wav(seconds=4.0, seed=n))
    official = str(dcase_stats_dir / "rain.npz")
    weights = ("--weights", str(vggish_weights), "--device", "cpu")
    # No options: VGGish as the statistics declare it (DCASE 2023 Task 7's pipeline).
    result = run("compute_fad", str(tmp_path / "rain"), official, *weights)
    assert result["model_id"].startswith("vggish:dcase2023-act0-raw@")
    assert result["b"]["model_id"] == "vggish:dcase2023-act0-raw@*"
    assert result["a"]["embeddings"] == 3 * 10  # ten 1 s windows every 0.5 s per 4 s clip
    assert np.isfinite(result["fad"])
    # VGGish's own defaults (resampled, 0.96 s examples) are refused before any embedding.
    for option in ("hop_size=0.5", "preset="):
        with pytest.raises(CommandError, match=r"made with vggish:dcase2023-act0-raw@\*, but"):
            call_command(
                "compute_fad", str(tmp_path / "rain"), official, *weights,
                "--model-option", option,
            )  # fmt: skip
    with pytest.raises(CommandError, match=r"but --model embeds with logmel:"):
        call_command("compute_fad", str(tmp_path / "rain"), official, "--model", "logmel")
    # Statistics named as another configuration's are compared with it.
    logmel = run("compute_fad", str(tmp_path / "rain"), str(tmp_path / "rain"), "--model", "logmel")
    name, options, _ = split_model_id(logmel["model_id"])
    named = run(
        "compute_fad", str(tmp_path / "rain"), official, "--model", "logmel",
        "--stats-model", f"{name}:{options}@*",
    )  # fmt: skip
    assert (
        named["model_id"] == logmel["model_id"] and named["b"]["model_id"] == f"{name}:{options}@*"
    )
    with pytest.raises(CommandError, match="--stats-model: model 'nonsense'"):
        call_command("compute_fad", str(tmp_path / "rain"), official, "--stats-model", "nonsense")
