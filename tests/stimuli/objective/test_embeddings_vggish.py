"""The built-in VGGish model: front end against a numpy reference, checkpoints, frames, errors.

No released weights are available to the tests: a random-init network saved in torchvggish's
state-dict layout stands in for them. Where torchvggish is installed, its own mel code and
network are compared too (loaded by file, because its package imports resampy).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import WeightsMissing, load_embedding_model, vggish

# float32 on torch against float64 in numpy; measured up to 2.5e-5 on values in [-4.6, 5.6].
LOGMEL_ATOL = 1e-4

TORCHVGGISH_KEYS = [
    f"{part}.{index}.{kind}"
    for part, indices in (("features", (0, 3, 6, 8, 11, 13)), ("embeddings", (0, 2, 4)))
    for index in indices
    for kind in ("weight", "bias")
]


# --- numpy reference of vggish_input.waveform_to_examples, written from its description ---


def ref_frame(data: np.ndarray, window: int, hop: int) -> np.ndarray:
    count = 1 + (len(data) - window) // hop
    return np.stack([data[i * hop : i * hop + window] for i in range(max(count, 0))])


def ref_mel_matrix(
    n_mels: int = 64, n_bins: int = 257, rate: int = 16000, lo: float = 125, hi: float = 7500
) -> np.ndarray:
    def mel(hz):
        return 1127.0 * np.log(1.0 + hz / 700.0)

    bin_mels = mel(np.linspace(0.0, rate / 2.0, n_bins))
    edges = np.linspace(mel(lo), mel(hi), n_mels + 2)
    weights = np.zeros((n_bins, n_mels))
    for band in range(n_mels):
        lower, centre, upper = edges[band : band + 3]
        for b in range(n_bins):
            up = (bin_mels[b] - lower) / (centre - lower)
            down = (upper - bin_mels[b]) / (upper - centre)
            weights[b, band] = max(0.0, min(up, down))
    weights[0, :] = 0.0  # the DC bin carries no weight
    return weights


def ref_waveform_to_examples(data: np.ndarray) -> np.ndarray:
    """16 kHz mono float64 -> examples [k, 96, 64]."""
    window_length, hop_length, fft_length = 400, 160, 512
    periodic_hann = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(window_length) / window_length)
    frames = ref_frame(data.astype(np.float64), window_length, hop_length)
    spectrogram = np.abs(np.fft.rfft(frames * periodic_hann, fft_length))
    log_mel = np.log(spectrogram @ ref_mel_matrix() + 0.01)
    return ref_frame(log_mel, 96, 96)


def make_signal(seconds: float, rate: int = 16000, seed: int = 0) -> np.ndarray:
    """A chirp across the mel range, a tone and some noise: every band gets energy."""
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    chirp = np.sin(2 * np.pi * (100 * t + 1200 * t**2))
    return 0.4 * chirp + 0.2 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)


@pytest.fixture(scope="module")
def random_model():
    return vggish.load_model("random", device="cpu")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, random_model) -> Path:
    """The random network saved as torchvggish saves its release: a plain state dict."""
    path = tmp_path_factory.mktemp("weights") / vggish.WEIGHTS_FILE
    torch.save(random_model.net.state_dict(), path)
    return path


def load_torchvggish_file(name: str):
    spec = importlib.util.find_spec("torchvggish")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torchvggish is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / f"{name}.py"
    module_spec = importlib.util.spec_from_file_location(f"_torchvggish_{name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


# --- front end ---


def test_mel_matrix_matches_reference() -> None:
    np.testing.assert_allclose(vggish.mel_matrix(), ref_mel_matrix(), rtol=0, atol=1e-12)


def test_logmel_examples_match_numpy_reference(random_model) -> None:
    audio = make_signal(3.3)
    expected = ref_waveform_to_examples(audio)
    with torch.inference_mode():
        got = random_model.examples(torch.from_numpy(audio[None].astype(np.float32)))[0]
    assert expected.shape == (3, 96, 64)
    assert tuple(got.shape) == expected.shape
    assert np.abs(got.numpy() - expected).max() < LOGMEL_ATOL


def test_logmel_matches_torchvggish_mel_features(random_model) -> None:
    mel_features = load_torchvggish_file("mel_features")
    audio = make_signal(2.5, seed=1)
    log_mel = mel_features.log_mel_spectrogram(
        audio,
        audio_sample_rate=16000,
        log_offset=0.01,
        window_length_secs=0.025,
        hop_length_secs=0.010,
        num_mel_bins=64,
        lower_edge_hertz=125,
        upper_edge_hertz=7500,
    )
    expected = mel_features.frame(log_mel, window_length=96, hop_length=96)
    with torch.inference_mode():
        got = random_model.examples(torch.from_numpy(audio[None].astype(np.float32)))[0]
    assert tuple(got.shape) == expected.shape
    assert np.abs(got.numpy() - expected).max() < LOGMEL_ATOL


@pytest.mark.parametrize("rate", [22050, 44100])
def test_resampling_tracks_resampy_kaiser_best(random_model, rate) -> None:
    """Google's input code resamples with resampy; our torch resampler should not move bands."""
    resampy = pytest.importorskip("resampy")
    rng = np.random.default_rng(rate)
    audio = 0.1 * rng.standard_normal(3 * rate)
    reference = resampy.resample(audio, rate, 16000, filter="kaiser_best")
    ours = vggish.resample(torch.from_numpy(audio[None].astype(np.float32)), rate)
    assert ours.shape == (1, reference.size)
    with torch.inference_mode():
        expected = random_model.examples(torch.from_numpy(reference[None].astype(np.float32)))
        got = random_model.examples(ours)
    # Measured: at most 0.04 (soxr HQ would give 0.5 in the top band, 7.3-7.5 kHz).
    assert (got - expected).abs().max().item() < 0.06


# --- frames and timestamps ---


def test_four_seconds_at_22050_give_four_frames(random_model) -> None:
    audio = np.stack([make_signal(4.0, 22050, seed=s) for s in (0, 1)]).astype(np.float32)
    emb = vggish.embed_batch(audio, 22050, random_model)
    assert emb.shape == (2, 4, 128)
    assert emb.dtype == np.float32
    assert np.isfinite(emb).all()


def test_timestamps_hop_and_short_clips() -> None:
    model = vggish.load_model("random", device="cpu", hop_size=0.48)
    assert model.options_id == "hop0.48-act0-raw"
    audio = torch.from_numpy(np.stack([make_signal(4.0)]).astype(np.float32))
    emb, stamps = vggish.get_timestamp_embeddings(audio, model)
    # 398 STFT frames, 96 a patch, every 48: 7 patches centred 480 ms apart.
    assert emb.shape == (1, 7, 128)
    np.testing.assert_allclose(stamps[0].numpy(), 487.5 + 480.0 * np.arange(7))
    # Shorter than one example: padded with silence rather than dropped.
    emb, stamps = vggish.get_timestamp_embeddings(torch.zeros(3, 8000), model)
    assert emb.shape == (3, 1, 128) and stamps.shape == (3, 1)
    assert vggish.get_scene_embeddings(audio, model).shape == (1, 128)


# --- weights ---


def test_checkpoint_layout_round_trip_and_identical_output(random_model, checkpoint) -> None:
    assert list(torch.load(checkpoint, weights_only=True)) == TORCHVGGISH_KEYS
    loaded = vggish.load_model(str(checkpoint), device="cpu")
    assert loaded.weights_id == hashlib.sha256(checkpoint.read_bytes()).hexdigest()[:12]
    assert random_model.weights_id == "random"
    audio = np.stack([make_signal(2.0, 16000, seed=s) for s in (2, 3)]).astype(np.float32)
    np.testing.assert_array_equal(
        vggish.embed_batch(audio, 16000, loaded), vggish.embed_batch(audio, 16000, random_model)
    )


def test_loads_through_the_embedding_registry(checkpoint) -> None:
    model = load_embedding_model("vggish", weights=str(checkpoint), device="cpu")
    again = load_embedding_model("vggish", weights=str(checkpoint), device="cpu")
    assert model.model_id == again.model_id
    assert model.model_id.startswith("vggish:hop0.96-act0-raw@")
    assert (model.sample_rate, model.timestamp_embedding_size) == (16000, 128)
    emb = model.embed(make_signal(4.0, 22050)[None].astype(np.float32), 22050)
    assert emb.shape == (1, 4, 128)


def test_same_output_as_torchvggish_network(random_model) -> None:
    reference = load_torchvggish_file("torchvggish")
    theirs = reference._vgg(postprocess=False).eval()
    theirs.load_state_dict(random_model.net.state_dict())
    with torch.inference_mode():
        examples = random_model.examples(
            torch.from_numpy(make_signal(3.0)[None].astype(np.float32))
        )[0]
        ours = random_model.net(examples)
        expected = theirs(examples[:, None])
    # torchvggish keeps a ReLU after the last layer; the DCASE tooling removes it.
    torch.testing.assert_close(torch.relu(ours), expected, rtol=1e-5, atol=1e-6)
    with_relu = vggish.load_model("random", device="cpu", activation=True)
    with torch.inference_mode():
        torch.testing.assert_close(with_relu.net(examples), expected, rtol=1e-5, atol=1e-6)


def test_postprocessing_with_pca_file(random_model, checkpoint, tmp_path) -> None:
    rng = np.random.default_rng(4)
    matrix = rng.standard_normal((128, 128)) * 0.05
    means = rng.standard_normal((128, 1)) * 0.01
    np.savez(tmp_path / "pca.npz", pca_eigen_vectors=matrix, pca_means=means)
    model = vggish.load_model(
        str(checkpoint), device="cpu", postprocess=True, pca_file=str(tmp_path / "pca.npz")
    )
    assert model.options_id.startswith("hop0.96-act0-pca")
    audio = make_signal(2.0)[None].astype(np.float32)
    raw = vggish.embed_batch(audio, 16000, random_model)[0]
    got = vggish.embed_batch(audio, 16000, model)[0]
    clipped = np.clip((raw.astype(np.float64) - means[:, 0]) @ matrix.T, -2.0, 2.0)
    expected = np.round((clipped + 2.0) * 255.0 / 4.0)
    assert np.abs(got - expected).max() <= 1.0  # rounding may differ at a .5 boundary
    assert got.min() >= 0 and got.max() <= 255
    with pytest.raises(WeightsMissing, match="vggish_pca_params"):
        vggish.load_model(str(checkpoint), device="cpu", postprocess=True)


def test_missing_weights_name_the_file(tmp_path, settings) -> None:
    missing = tmp_path / "nowhere" / "my-vggish.pth"
    with pytest.raises(WeightsMissing, match=r"my-vggish\.pth"):
        vggish.load_model(str(missing))
    with pytest.raises(WeightsMissing, match=r"vggish-10086976\.pth"):
        vggish.load_model("")
    settings.FOLEY_MODEL_DIR = tmp_path
    with pytest.raises(WeightsMissing, match=r"vggish-10086976\.pth.*torchvggish"):
        load_embedding_model("vggish")


def test_wrong_state_dict_is_refused(tmp_path) -> None:
    path = tmp_path / "other.pth"
    torch.save({"conv.weight": torch.zeros(1)}, path)
    with pytest.raises(ValueError, match="holds no complete VGGish"):
        vggish.load_model(str(path))


# --- preset dcase2023: DCASE 2023 Task 7's own FAD pipeline ---


def ref_dcase_examples(pcm: np.ndarray) -> np.ndarray:
    """The task's pipeline in numpy, from its description: 16-bit samples as integers, divided
    by max(0.1, their largest value), windows of 16,000 every 8,000 read as 16 kHz audio, one
    96-frame example each -> [windows, 96, 64]."""
    samples = pcm.astype(np.float64)
    samples = samples / max(0.1, samples.max())
    starts = range(0, len(samples) - 16000 + 1, 8000)
    examples = [ref_waveform_to_examples(samples[i : i + 16000]) for i in starts]
    assert all(len(e) == 1 for e in examples)  # 98 STFT frames: one 96-frame example
    return np.concatenate(examples)


def dcase_clip(seconds: float = 4.0, seed: int = 0) -> np.ndarray:
    """A 22,050 Hz clip as 16-bit samples."""
    return np.round(make_signal(seconds, 22050, seed=seed) * 20000).astype(np.int16)


@pytest.fixture(scope="module")
def dcase_model():
    return vggish.load_model("random", device="cpu", preset="dcase2023")


def test_dcase_preset_gives_ten_examples_per_clip_like_thepublished_stats(
    dcase_model, dcase_stats_dir
) -> None:
    # 100 clips a category in the official statistics.
    counts = {int(np.load(path)["embedding_count"]) for path in dcase_stats_dir.glob("*.npz")}
    assert counts == {1000}
    audio = np.stack([dcase_clip(seed=s) for s in (0, 1)]).astype(np.float32) / 32768
    assert audio.shape == (2, 88200)
    emb = vggish.embed_batch(audio, 22050, dcase_model)
    assert emb.shape == (2, counts.pop() // 100, 128) and np.isfinite(emb).all()
    # Windows start every 8,000 samples read as 16 kHz: centres 0.5 s apart.
    emb, stamps = vggish.get_timestamp_embeddings(torch.from_numpy(audio), dcase_model)
    np.testing.assert_allclose(stamps[0].numpy(), 487.5 + 500.0 * np.arange(10))


def test_dcase_preset_matches_numpy_reference_of_the_official_pipeline(dcase_model) -> None:
    pcm = dcase_clip(seed=3)
    # The platform decodes 16-bit audio to float full scale.
    audio = torch.from_numpy((pcm.astype(np.float32) / 32768)[None])
    with torch.inference_mode():
        got = dcase_model.examples(dcase_model.prepare(audio, 22050))[0].numpy()
    expected = ref_dcase_examples(pcm)
    assert expected.shape == got.shape == (10, 96, 64)
    assert np.abs(got - expected).max() < LOGMEL_ATOL
    # A clip with no positive sample meets the pipeline's floor of 0.1 (in 16-bit units).
    quiet = -np.abs(dcase_clip(seed=4) // 1000).astype(np.int16)
    with torch.inference_mode():
        got = dcase_model.examples(torch.from_numpy((quiet.astype(np.float32) / 32768)[None]))
    assert np.abs(got[0].numpy() - ref_dcase_examples(quiet)).max() < LOGMEL_ATOL


def test_dcase_preset_does_not_resample(dcase_model) -> None:
    # 2 kHz at 22,050 Hz, read as 16 kHz: the log-mel peaks in the band of 1,451 Hz.
    t = np.arange(88200) / 22050
    tone = (0.5 * np.sin(2 * np.pi * 2000.0 * t)).astype(np.float32)[None]
    with torch.inference_mode():
        logmel = dcase_model.examples(dcase_model.prepare(torch.from_numpy(tone), 22050))
    peak_band = int(logmel[0].mean(dim=(0, 1)).argmax())
    mel = vggish.mel_matrix()

    def band_of(hz: float) -> int:
        return int(mel[round(hz / 16000 * vggish.N_FFT)].argmax())

    assert band_of(2000.0) != band_of(2000.0 * 16000 / 22050)
    assert peak_band == band_of(2000.0 * 16000 / 22050)
    # The default pipeline resamples, so there the tone stays at 2 kHz.
    default = vggish.load_model("random", device="cpu")
    with torch.inference_mode():
        logmel = default.examples(default.prepare(torch.from_numpy(tone), 22050))
    assert int(logmel[0].mean(dim=(0, 1)).argmax()) == band_of(2000.0)


def test_dcase_preset_normalises_the_peak(dcase_model) -> None:
    clip = dcase_clip(seed=5).astype(np.float32) / 32768
    with torch.inference_mode():
        loud = dcase_model.examples(torch.from_numpy(clip[None]))
        quiet = dcase_model.examples(torch.from_numpy(0.05 * clip[None]))
        scaled = dcase_model.examples(torch.from_numpy(clip[None] / clip.max()))
    # Any gain gives the same examples: the clip is divided by its largest sample.
    assert (loud - quiet).abs().max().item() < LOGMEL_ATOL
    assert (loud - scaled).abs().max().item() < LOGMEL_ATOL
    # Its largest sample, not its absolute peak: a clip whose negative side is larger than its
    # positive side is divided by the positive one.
    skewed = np.where(clip < 0, 3 * clip, clip).astype(np.float32)
    assert -skewed.min() > skewed.max()
    with torch.inference_mode():
        got = dcase_model.examples(torch.from_numpy(skewed[None]))[0].numpy()
    expected = ref_dcase_examples(skewed.astype(np.float64) * 32768)
    assert np.abs(got - expected).max() < LOGMEL_ATOL


def test_dcase_preset_model_id_options_and_short_clips(checkpoint) -> None:
    model = load_embedding_model(
        "vggish", {"preset": "dcase2023"}, weights=str(checkpoint), device="cpu"
    )
    default = load_embedding_model("vggish", weights=str(checkpoint), device="cpu")
    assert model.model_id.startswith("vggish:dcase2023-act0-raw@")
    assert model.model_id != default.model_id  # the embedding cache keeps them apart
    # Audio at another rate is brought to 22,050 Hz first, as the task required of clips.
    emb = model.embed(make_signal(4.0, 44100)[None].astype(np.float32), 44100)
    assert emb.shape == (1, 10, 128)
    # Shorter than one window: padded with silence to one example rather than dropped.
    assert model.embed(np.zeros((2, 5000), dtype=np.float32), 22050).shape == (2, 1, 128)
    for options in ({"postprocess": True}, {"activation": True}, {"hop_size": 0.5}):
        with pytest.raises(ValueError, match="fixes its pipeline"):
            vggish.load_model("random", preset="dcase2023", **options)
    with pytest.raises(ValueError, match="presets are dcase2023"):
        vggish.load_model("random", preset="dcase2024")
