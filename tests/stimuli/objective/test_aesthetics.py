"""The Audiobox Aesthetics predictor: the released checkpoint's layout, ratings and their
windows, errors, and, where `audiobox_aesthetics` imports, the same ratings as the release's own
`AesPredictor` on the same weights.

No released weights are available to the tests: random checkpoints with the published parameter
names and shapes stand in for `checkpoint.pt`, in the released form (a dict of `state_dict`, its
names prefixed `model.`, `model_cfg` and `target_transform`), with heads of five linear layers
and layer norms as the published configuration describes them (written by the platform's
stand-ins, stimuli/objective/predictors/standins.py). The encoder's sizes are read from the
file: the released layout gives WavLM Base, the demo's smaller stand-in its own sizes, and either
is held to them name by name and shape by shape.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import WeightsMissing
from stimuli.objective.predictors import aesthetics, wavlm
from stimuli.objective.predictors.standins import (
    DEMO_SIZES,
    MODEL_CFG,
    TARGETS,
    aesthetics_state,
    write_standins,
)
from stimuli.objective.predictors.standins import aesthetics_cheap_state as cheap_state
from stimuli.objective.predictors.standins import write_aesthetics as write_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("aesthetics") / "checkpoint.pt"
    write_checkpoint(path)
    return path


@pytest.fixture(scope="module")
def model(checkpoint):
    return aesthetics.load(checkpoint, device="cpu")


def noise(seconds: float, rate: int, channels: int = 0, seed: int = 0) -> np.ndarray:
    shape = (int(seconds * rate), channels) if channels else (int(seconds * rate),)
    return np.random.default_rng(seed).normal(0, 0.1, shape).astype(np.float32)


@pytest.mark.slow
def test_a_released_checkpoint_loads_and_rates_each_clip_on_the_four_axes(model):
    stereo = noise(3.0, 22050, channels=2)
    first = aesthetics.predict(model, stereo, 22050)
    assert list(first) == ["PQ", "PC", "CE", "CU"]
    assert all(isinstance(v, float) and np.isfinite(v) for v in first.values())
    tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(2 * 22050) / 22050).astype(np.float32)
    both = aesthetics.predict_clips(model, [stereo, tone], 22050)
    # Rated in one batch, a clip is rated as alone: its padding is masked out.
    assert len(both) == 2 and both[0] == pytest.approx(first, abs=1e-5)
    assert both[0] != pytest.approx(both[1], abs=1e-4)


def test_a_long_clip_is_the_mean_of_its_10_s_windows_weighted_by_their_share():
    # A stand-in network that rates a window by the mean of the clip's samples in it.
    def rate_windows(windows, valid):
        mean = windows.sum(1) / valid
        return torch.stack([mean, 2 * mean, valid / 1000.0, torch.ones_like(mean)], dim=-1)

    model = types.SimpleNamespace(device=torch.device("cpu"), rate_windows=rate_windows)
    clip = np.concatenate([np.full(160000, 1.0), np.full(160000, 2.0), np.full(48000, 4.0)])
    rated = aesthetics.predict_clips(model, [clip, clip[:48000], clip] * 2, 16000)
    expected = (1 + 2 + 0.3 * 4) / 2.3
    assert rated[0] == pytest.approx({"PQ": expected, "PC": 2 * expected,
                                      "CE": (160 + 160 + 0.3 * 48) / 2.3, "CU": 1.0})  # fmt: skip
    assert rated[1] == pytest.approx({"PQ": 1.0, "PC": 2.0, "CE": 48.0, "CU": 1.0})
    assert rated[5] == rated[0]  # across the batches of 8 windows


def test_the_windows_are_10_s_every_10_s_the_last_padded_with_what_is_the_clips():
    windows, valid = aesthetics.clip_windows(torch.arange(1, 23 * 16000 + 1, dtype=torch.float32))
    assert windows.shape == (3, 160000) and valid.tolist() == [160000, 160000, 48000]
    assert windows[2, 47999] == 23 * 16000 and windows[2, 48000:].abs().sum() == 0
    # Resampled as long as torchaudio makes it: ceil(samples * 16000 / rate).
    assert aesthetics.resample(torch.zeros(1, 22051), 22050).shape == (1, 16001)
    with pytest.raises(ValueError, match="not \\(0,\\)"):
        aesthetics.predict_clips(None, [np.zeros(0)], 16000)


def test_a_checkpoint_not_as_released_names_every_difference_at_once(tmp_path):
    state = cheap_state()
    del state["model.wavlm_model.encoder.layers.3.fc1.bias"]
    state["model.wavlm_model.encoder.layers.3.fc3.weight"] = torch.zeros(2)
    state["model.proj_layer.PQ.12.weight"] = torch.zeros(2, 768)
    del state["model.layer_weights.CU"]
    path = tmp_path / "other.pt"
    write_checkpoint(path, state, targets={k: v for k, v in TARGETS.items() if k != "PC"})
    with pytest.raises(aesthetics.CheckpointMismatch) as caught:
        aesthetics.load(path, device="cpu")
    error = caught.value
    assert error.missing == ["wavlm_model.encoder.layers.3.fc1.bias", "layer_weights.CU"]
    assert error.unexpected == ["wavlm_model.encoder.layers.3.fc3.weight"]
    assert error.wrong_shape == ["proj_layer.PQ.12.weight is (2, 768), not (1, 768)"]
    message = str(error)
    for name in ("layers.3.fc1.bias", "layer_weights.CU", "layers.3.fc3.weight",
                 "proj_layer.PQ.12.weight is (2, 768)", "no mean and std for PC",
                 "facebook/audiobox-aesthetics"):  # fmt: skip
        assert name in message
    write_checkpoint(path, cheap_state())
    assert aesthetics.load(path, device="cpu").std.tolist() == pytest.approx([1.5, 1.9, 1.9, 1.8])


def test_the_encoders_sizes_are_read_from_the_file_and_held_to_as_strictly(tmp_path):
    # The released layout gives WavLM Base, as the release's code builds it.
    released = {k.removeprefix("model.wavlm_model."): v for k, v in cheap_state().items()}
    problems: list[str] = []
    assert wavlm.sizes_of(released, problems) == wavlm.WAVLM_BASE and problems == []
    # The demo's stand-in: the same layout, a smaller encoder, loaded as what it is.
    small = DEMO_SIZES.wavlm
    files = write_standins(tmp_path / "demo", DEMO_SIZES)
    model = aesthetics.load(files["aesthetics"], device="cpu")
    assert model.net.wavlm_model.sizes == small and model.untrained
    assert model.net.layer_weights["PQ"].shape == (small.layers + 1,)
    rated = aesthetics.predict(model, noise(4.0, 22050), 22050)
    assert list(rated) == list(aesthetics.AXES) and all(np.isfinite(list(rated.values())))
    # Every tensor is held to the sizes the rest of the file gives: each one that differs, and
    # an nth_layer that is not the encoder's layers and its input, are named at once.
    state = aesthetics_state(sizes=small, heads=2)
    state["model.wavlm_model.encoder.layers.0.fc2.weight"] = torch.zeros(32, 128)
    state["model.layer_weights.PC"] = torch.zeros(13)
    del state["model.wavlm_model.encoder.layers.0.self_attn.grep_a"]
    write_checkpoint(tmp_path / "small.pt", state, {**MODEL_CFG, "proj_num_layer": 2})
    with pytest.raises(aesthetics.CheckpointMismatch) as caught:
        aesthetics.load(tmp_path / "small.pt", device="cpu")
    assert caught.value.missing == ["wavlm_model.encoder.layers.0.self_attn.grep_a"]
    assert caught.value.wrong_shape == [
        "wavlm_model.encoder.layers.0.fc2.weight is (32, 128), not (32, 64)",
        "layer_weights.PC is (13,), not (2,)",
    ]
    assert "nth_layer is 13, not 2" in str(caught.value)
    # Sizes no network has (a width its heads do not divide) build nothing: named as such.
    state = aesthetics_state(sizes=small, heads=2)
    state["model.wavlm_model.encoder.layers.0.self_attn.relative_attention_bias.weight"] = (
        torch.zeros(320, 3)
    )
    write_checkpoint(tmp_path / "odd.pt", state, {**MODEL_CFG, "proj_num_layer": 2})
    with pytest.raises(aesthetics.CheckpointMismatch, match="width of 32 is not divided among 3"):
        aesthetics.load(tmp_path / "odd.pt", device="cpu")


def test_only_a_file_marked_as_a_stand_in_loads_as_untrained(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save({"state_dict": cheap_state(), "model_cfg": MODEL_CFG, "target_transform": TARGETS},
               path)  # fmt: skip
    assert aesthetics.load(path, device="cpu").untrained is False
    write_checkpoint(path, cheap_state())
    assert aesthetics.load(path, device="cpu").untrained is True


def test_another_head_config_expects_other_heads_and_a_bad_config_is_named(tmp_path):
    state = {k: v for k, v in cheap_state().items() if not k.startswith("model.proj_layer.")}
    for axis in aesthetics.AXES:
        state[f"model.proj_layer.{axis}.0.weight"] = torch.zeros(1, 768)
        state[f"model.proj_layer.{axis}.0.bias"] = torch.zeros(1)
    config = {**MODEL_CFG, "proj_num_layer": 1, "precision": "bf16"}
    write_checkpoint(tmp_path / "one.pt", state, model_cfg=config)
    heads = aesthetics.load(tmp_path / "one.pt", device="cpu").net.proj_layer
    assert [type(m).__name__ for m in heads["PQ"]] == ["Linear"]
    bad = {**config, "nth_layer": 7}
    del bad["normalize_embed"]
    write_checkpoint(tmp_path / "bad.pt", state, model_cfg=bad)
    with pytest.raises(
        aesthetics.CheckpointMismatch, match=r"lacks normalize_embed.*nth_layer is 7"
    ):
        aesthetics.load(tmp_path / "bad.pt", device="cpu")


def test_rating_scales_saved_as_numpy_numbers_load(tmp_path):
    targets = {a: {"mean": np.float64(5.0), "std": np.float32(2.0)} for a in TARGETS}
    problems: list[str] = []
    raw_path = tmp_path / "np.pt"
    torch.save({"target_transform": targets}, raw_path)
    raw = aesthetics.read_checkpoint(raw_path)
    assert aesthetics.rating_scales(raw["target_transform"], problems) == {
        a: (5.0, 2.0) for a in aesthetics.AXES
    }
    assert problems == []


def test_a_missing_checkpoint_names_the_file_the_setting_and_where_it_is_published(
    tmp_path, settings
):
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    with pytest.raises(WeightsMissing) as caught:
        aesthetics.load()
    message = str(caught.value)
    assert str(tmp_path / "audiobox-aesthetics" / "checkpoint.pt") in message
    assert "FOLEY_AESTHETICS_WEIGHTS" in message and "facebook/audiobox-aesthetics" in message
    settings.FOLEY_AESTHETICS_WEIGHTS = str(tmp_path / "elsewhere.pt")
    with pytest.raises(WeightsMissing, match=r"elsewhere\.pt.*FOLEY_AESTHETICS_WEIGHTS"):
        aesthetics.load()
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"junk\.pt is not a torch checkpoint"):
        aesthetics.load(tmp_path / "junk.pt")


def _reference_predictor():
    try:
        from audiobox_aesthetics.infer import AesPredictor
    except Exception as exc:  # it imports torchaudio, built for one torch, and the hub
        pytest.skip(f"audiobox_aesthetics does not import here ({type(exc).__name__}: {exc})")
    return AesPredictor


@pytest.mark.slow
def test_the_same_ratings_as_the_release_on_the_same_weights(checkpoint, model):
    predictor = _reference_predictor()(checkpoint_pth=str(checkpoint), batch_size=2)
    # 16 kHz, so that neither resamples: a stereo clip of three windows, the last short, and a
    # clip under 10 s, rated together as the release rates a batch.
    clips = [noise(23.5, 16000, channels=2, seed=3), noise(4.0, 16000, seed=4)]
    batch = [{"path": torch.from_numpy(clips[0].T.copy()), "sample_rate": 16000},
             {"path": torch.from_numpy(clips[1][None].copy()), "sample_rate": 16000}]  # fmt: skip
    expected = predictor.forward(batch)
    ours = aesthetics.predict_clips(model, clips, 16000)
    worst = max(abs(ours[i][a] - expected[i][a]) for i in range(2) for a in aesthetics.AXES)
    # Random heads vary little from clip to clip, so the encoder's 13 hidden states are compared
    # too, frame by frame, on the short clip's padded window.
    window, valid = aesthetics.clip_windows(torch.from_numpy(clips[1]))
    padding = torch.arange(160000)[None] >= valid[:, None]
    with torch.inference_mode():
        (_, layers), frame_padding = predictor.model.wavlm_model.extract_features(
            source=window, padding_mask=padding, output_layer=13, ret_layer_results=True
        )
        states, our_padding = model.net.wavlm_model(window, valid)
    assert torch.equal(our_padding, frame_padding) and len(states) == len(layers) == 13
    keep = ~our_padding[0]
    pairs = zip(states, layers, strict=True)
    hidden = max((s[0, keep] - t[keep, 0]).abs().max().item() for s, (t, _) in pairs)
    print(f"max |ours - audiobox_aesthetics|: ratings {worst:.2e}, hidden states {hidden:.2e}")
    assert worst < 1e-5, (ours, expected)
    assert hidden < 1e-5


@pytest.mark.slow
def test_resampling_is_close_to_the_releases(checkpoint, model):
    """The release resamples with torchaudio, here julius with the same filter."""
    predictor = _reference_predictor()(checkpoint_pth=str(checkpoint))
    import torchaudio.functional

    clip = noise(4.0, 22050, seed=5)
    theirs = torchaudio.functional.resample(torch.from_numpy(clip), 22050, 16000)
    ours = aesthetics.resample(torch.from_numpy(clip)[None], 22050)[0]
    assert ours.shape == theirs.shape
    inner = slice(100, -100)  # julius repeats the edges where torchaudio pads with zeros
    audio_diff = (ours - theirs)[inner].abs().max().item()
    expected = predictor.forward([{"path": torch.from_numpy(clip[None]), "sample_rate": 22050}])
    rated = aesthetics.predict(model, clip, 22050)
    rating_diff = max(abs(rated[a] - expected[0][a]) for a in aesthetics.AXES)
    print(f"resampled audio: max |julius - torchaudio| = {audio_diff:.2e} (signal rms 0.1); "
          f"ratings: max diff {rating_diff:.2e}")  # fmt: skip
    assert audio_diff < 1e-2 and rating_diff < 1e-2
