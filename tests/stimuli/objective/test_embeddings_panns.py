"""PANNs CNN14 (32 and 16 kHz) and Wavegram-Logmel-CNN14: released checkpoint layouts, frames,
errors, and, where panns_inference installs, the same embeddings as its CNN14.

No released weights are available to the tests: random-initialised checkpoints with the
published parameter names and shapes stand in for them, in the released form (a dict whose
`model` is the state dict), with torchlibrosa's DFT kernels and librosa's mel matrix.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import WeightsMissing, load_embedding_model

# variant -> n_fft, mel bins, sample rate, fmax (the released configurations)
CONFIG = {"cnn14": (1024, 64, 32000, 14000), "cnn14-16k": (512, 64, 16000, 8000),
          "wavegram-logmel": (1024, 64, 32000, 14000)}  # fmt: skip


def released_shapes(variant: str) -> dict[str, tuple]:
    """Every parameter of the released checkpoint, by the authors' names, with its shape."""
    n_fft, mels, *_ = CONFIG[variant]
    bins = n_fft // 2 + 1
    shapes = {
        "spectrogram_extractor.stft.conv_real.weight": (bins, 1, n_fft),
        "spectrogram_extractor.stft.conv_imag.weight": (bins, 1, n_fft),
        "logmel_extractor.melW": (bins, mels),
        "fc1.weight": (2048, 2048), "fc1.bias": (2048,),
        "fc_audioset.weight": (527, 2048), "fc_audioset.bias": (527,),
    }  # fmt: skip

    def bn(prefix: str, width: int) -> None:
        for name in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{prefix}.{name}"] = (width,)
        shapes[f"{prefix}.num_batches_tracked"] = ()

    bn("bn0", mels)
    inputs = [1, 128 if variant == "wavegram-logmel" else 64, 128, 256, 512, 1024]
    outputs = [64, 128, 256, 512, 1024, 2048]
    for i, (a, b) in enumerate(zip(inputs, outputs, strict=True), start=1):
        shapes[f"conv_block{i}.conv1.weight"] = (b, a, 3, 3)
        shapes[f"conv_block{i}.conv2.weight"] = (b, b, 3, 3)
        bn(f"conv_block{i}.bn1", b)
        bn(f"conv_block{i}.bn2", b)
    if variant == "wavegram-logmel":
        shapes["pre_conv0.weight"] = (64, 1, 11)
        bn("pre_bn0", 64)
        for i, (a, b) in enumerate(((64, 64), (64, 128), (128, 128)), start=1):
            shapes[f"pre_block{i}.conv1.weight"] = (b, a, 3)
            shapes[f"pre_block{i}.conv2.weight"] = (b, b, 3)
            bn(f"pre_block{i}.bn1", b)
            bn(f"pre_block{i}.bn2", b)
        shapes["pre_block4.conv1.weight"] = (64, 4, 3, 3)
        shapes["pre_block4.conv2.weight"] = (64, 64, 3, 3)
        bn("pre_block4.bn1", 64)
        bn("pre_block4.bn2", 64)
    return shapes


def released_checkpoint(variant: str, path, seed: int = 0) -> dict:
    """A random-initialised checkpoint in the released form, its front end as torchlibrosa's."""
    import librosa

    n_fft, mels, rate, fmax = CONFIG[variant]
    rng = torch.Generator().manual_seed(seed)
    state = {}
    for name, shape in released_shapes(variant).items():
        if name.endswith("num_batches_tracked"):
            state[name] = torch.tensor(0)
        elif name.endswith("running_var"):
            state[name] = 1.0 + torch.rand(shape, generator=rng)
        elif name.endswith("running_mean") or name.endswith(".bias"):
            state[name] = 0.1 * torch.randn(shape, generator=rng)
        elif name.endswith("bn0.weight") or ".bn" in name or "pre_bn0" in name:
            state[name] = 1.0 + 0.1 * torch.randn(shape, generator=rng)
        else:
            fan_in = int(np.prod(shape[1:])) or 1
            state[name] = torch.randn(shape, generator=rng) / np.sqrt(fan_in)
    window = np.hanning(n_fft + 1)[:-1]  # periodic Hann, as librosa's get_window
    k, n = np.arange(n_fft // 2 + 1)[:, None], np.arange(n_fft)[None, :]
    angle = 2 * np.pi * k * n / n_fft
    state["spectrogram_extractor.stft.conv_real.weight"] = torch.tensor(
        (np.cos(angle) * window)[:, None, :], dtype=torch.float32
    )
    state["spectrogram_extractor.stft.conv_imag.weight"] = torch.tensor(
        (-np.sin(angle) * window)[:, None, :], dtype=torch.float32
    )
    mel = librosa.filters.mel(sr=rate, n_fft=n_fft, n_mels=mels, fmin=50, fmax=fmax).T
    state["logmel_extractor.melW"] = torch.tensor(mel, dtype=torch.float32)
    torch.save({"iteration": 0, "model": state}, path)
    return state


def noise(seconds: float, rate: int, n: int = 2, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, (n, int(seconds * rate))).astype(np.float32)


@pytest.mark.parametrize("variant", list(CONFIG))
def test_released_checkpoints_load_and_embed_clips_and_frames(tmp_path, variant):
    path = tmp_path / f"{variant}.pth"
    released_checkpoint(variant, path)
    model = load_embedding_model("panns", {"variant": variant}, str(path), device="cpu")
    assert model.model_id.startswith(f"panns:{variant}-clip@")
    assert model.timestamp_embedding_size == 2048
    rate = CONFIG[variant][2]
    clips = model.embed(noise(2.0, 22050), 22050)
    assert clips.shape == (2, 1, 2048) and np.isfinite(clips).all() and clips.std() > 0
    framed = load_embedding_model("panns", {"variant": variant, "frames": True}, str(path), "cpu")
    frames = framed.embed(noise(4.0, rate), rate)
    # 4 s: 400 hops of 10 ms, five 2x poolings: 12 frames of about 0.32 s.
    assert frames.shape == (2, 12, 2048)
    assert framed.model_id != model.model_id


def test_a_missing_or_other_checkpoint_is_an_error_naming_the_file_and_where_it_is_published(
    tmp_path, settings
):
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    with pytest.raises(WeightsMissing, match=r"Cnn14_16k_mAP=0\.438\.pth.*Zenodo"):
        load_embedding_model("panns", {"variant": "cnn14-16k"})
    path = tmp_path / "cnn14.pth"
    released_checkpoint("cnn14", path)
    with pytest.raises(ValueError, match="no PANNs wavegram-logmel checkpoint: lacks pre_conv0"):
        load_embedding_model("panns", {"variant": "wavegram-logmel"}, str(path))
    with pytest.raises(ValueError, match=r"conv_real\.weight is"):
        load_embedding_model("panns", {"variant": "cnn14-16k"}, str(path))
    with pytest.raises(ValueError, match="the variants are cnn14, cnn14-16k, wavegram-logmel"):
        load_embedding_model("panns", {"variant": "cnn10"}, str(path))


@pytest.mark.skipif(
    importlib.util.find_spec("panns_inference") is None, reason="panns_inference not installed"
)
@pytest.mark.parametrize("variant", ["cnn14", "cnn14-16k"])
def test_the_same_embeddings_as_panns_inference_on_the_same_weights(tmp_path, variant):
    from panns_inference.models import Cnn14

    n_fft, mels, rate, fmax = CONFIG[variant]
    reference = Cnn14(rate, n_fft, rate // 100, mels, 50, fmax, 527)  # hop: 10 ms
    reference.load_state_dict(released_checkpoint(variant, tmp_path / "w.pth"))
    reference.eval()
    audio = noise(3.0, rate)
    with torch.inference_mode():
        expected = reference(torch.from_numpy(audio))["embedding"].numpy()
    ours = load_embedding_model("panns", {"variant": variant}, str(tmp_path / "w.pth"), "cpu")
    got = ours.embed(audio, rate)[:, 0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())
