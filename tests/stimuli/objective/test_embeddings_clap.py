"""The LAION-CLAP audio encoder (HTSAT-tiny and HTSAT-base): the released checkpoints' layout,
embeddings and their windows, errors, and, where laion_clap imports, the same embeddings as its
HTSAT and projection on the same weights.

No released weights are available to the tests: random-initialised checkpoints with the
published parameter names and shapes stand in for `630k-audioset-best.pt` and
`music_audioset_epoch_15_esc_90.14.pt`, in the released form (a training dict whose
`state_dict` holds the DataParallel-prefixed parameters of the whole model); the audio branch's
from the platform's stand-ins (stimuli/objective/predictors/standins.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import WeightsMissing, load_embedding_model
from stimuli.objective.predictors.standins import HTSAT_SIZES as WIDTH
from stimuli.objective.predictors.standins import htsat_state as released_audio_state

RATE = 48000


def released_checkpoint(variant: str, path, seed: int = 0) -> dict[str, torch.Tensor]:
    """The whole released form: `state_dict` of `module.`-prefixed audio, text and scales."""
    rng = torch.Generator().manual_seed(seed + 1)
    audio = released_audio_state(variant, seed)
    width = WIDTH[variant][0]
    projection = {
        "0.weight": 0.05 * torch.randn(512, 8 * width, generator=rng),
        "0.bias": 0.05 * torch.randn(512, generator=rng),
        "2.weight": 0.05 * torch.randn(512, 512, generator=rng),
        "2.bias": 0.05 * torch.randn(512, generator=rng),
    }
    state = {f"module.audio_branch.{k}": v for k, v in audio.items()}
    state.update({f"module.audio_projection.{k}": v for k, v in projection.items()})
    state["module.logit_scale_a"] = state["module.logit_scale_t"] = torch.tensor(2.66)
    state["module.text_branch.embeddings.position_ids"] = torch.arange(514)[None]
    torch.save({"epoch": 15, "name": "test", "state_dict": state}, path)
    return state


def noise(seconds: float, rate: int = RATE, n: int = 2, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, (n, int(seconds * rate))).astype(np.float32)


@pytest.mark.parametrize("variant", list(WIDTH))
def test_released_checkpoints_load_and_embed_each_clip_on_the_unit_sphere(tmp_path, variant):
    path = tmp_path / f"{variant}.pt"
    released_checkpoint(variant, path)
    model = load_embedding_model("clap", {"variant": variant}, str(path), device="cpu")
    assert model.model_id.startswith(f"clap:{variant}@")
    assert model.sample_rate == RATE and model.timestamp_embedding_size == 512
    clips = model.embed(noise(4.0, 22050), 22050)
    assert clips.shape == (2, 1, 512) and np.isfinite(clips).all()
    np.testing.assert_allclose(np.linalg.norm(clips, axis=-1), 1.0, rtol=1e-5)
    assert not np.allclose(clips[0], clips[1])


def test_clips_over_10_s_are_embedded_in_windows_the_last_ending_with_the_clip(tmp_path):
    path = tmp_path / "630k-audioset-best.pt"
    released_checkpoint("htsat-tiny", path)
    model = load_embedding_model("clap", {}, str(path), device="cpu")
    audio = torch.from_numpy(noise(23.0, n=1))
    emb, stamps = model.module.get_timestamp_embeddings(audio, model.model)
    assert emb.shape == (1, 3, 512)
    assert stamps.tolist() == [[5000.0, 15000.0, 18000.0]]
    # The last window is the clip's last 10 s, embedded as a clip of its own.
    alone, _ = model.module.get_timestamp_embeddings(audio[:, -10 * RATE :], model.model)
    np.testing.assert_allclose(emb[0, 2], alone[0, 0], atol=1e-5)
    short, stamps = model.module.get_timestamp_embeddings(audio[:, : 3 * RATE], model.model)
    assert short.shape == (1, 1, 512) and stamps.tolist() == [[1500.0]]


def test_a_missing_other_or_fusion_checkpoint_is_an_error_naming_the_files_and_where_published(
    tmp_path, settings
):
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    with pytest.raises(WeightsMissing, match=r"630k-audioset-best\.pt.*lukewys/laion_clap"):
        load_embedding_model("clap")
    with pytest.raises(WeightsMissing, match=r"music_audioset_epoch_15_esc_90\.14\.pt"):
        load_embedding_model("clap", {"variant": "htsat-base"})
    path = tmp_path / "tiny.pt"
    state = released_checkpoint("htsat-tiny", path)
    with pytest.raises(ValueError, match=r"no CLAP htsat-base checkpoint: .*patch_embed\.proj"):
        load_embedding_model("clap", {"variant": "htsat-base"}, str(path))
    state["module.audio_branch.patch_embed.fusion_model.local_att.0.weight"] = torch.zeros(1)
    torch.save({"state_dict": state}, tmp_path / "fusion.pt")
    with pytest.raises(ValueError, match="feature fusion"):
        load_embedding_model("clap", {}, str(tmp_path / "fusion.pt"))
    with pytest.raises(ValueError, match="the variants are htsat-tiny, htsat-base"):
        load_embedding_model("clap", {"variant": "htsat-large"}, str(path))


def _reference_htsat():
    try:
        from laion_clap.clap_module.htsat import create_htsat_model
    except Exception as exc:  # it imports torchvision and torchaudio, built for one torch each
        pytest.skip(f"laion_clap does not import here ({type(exc).__name__}: {exc})")
    return create_htsat_model


@pytest.mark.parametrize("variant", list(WIDTH))
def test_the_same_embeddings_as_laion_clap_on_the_same_weights(tmp_path, variant):
    import types

    create_htsat_model = _reference_htsat()
    config = types.SimpleNamespace(
        mel_bins=64, sample_rate=48000, window_size=1024, hop_size=480, fmin=50, fmax=14000,
        class_num=527, model_name=variant.removeprefix("htsat-"),
    )  # fmt: skip
    state = released_checkpoint(variant, tmp_path / "w.pt")
    reference = create_htsat_model(config)
    branch = {k.removeprefix("module.audio_branch."): v for k, v in state.items()}
    reference.load_state_dict({k: branch[k] for k in reference.state_dict()})
    reference.eval()
    projection = torch.nn.Sequential(
        torch.nn.Linear(8 * WIDTH[variant][0], 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)
    )
    projection.load_state_dict(
        {k.removeprefix("module.audio_projection."): v for k, v in state.items()
         if k.startswith("module.audio_projection.")}
    )  # fmt: skip
    audio = noise(4.0)
    # What the release's get_audio_embedding_from_data does to a short numpy clip.
    x = torch.from_numpy((np.clip(audio, -1, 1) * 32767.0).astype(np.int16) / 32767.0).float()
    x = x.repeat(1, 480000 // x.shape[1])
    x = torch.nn.functional.pad(x, (0, 480000 - x.shape[1]))
    with torch.no_grad():
        expected = reference({"waveform": x})["embedding"]
        expected = torch.nn.functional.normalize(projection(expected), dim=-1).numpy()
    ours = load_embedding_model("clap", {"variant": variant}, str(tmp_path / "w.pt"), "cpu")
    np.testing.assert_allclose(ours.embed(audio, RATE)[:, 0], expected, atol=1e-5)
