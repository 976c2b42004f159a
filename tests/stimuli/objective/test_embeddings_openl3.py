"""The built-in OpenL3 model against torchopenl3, and its Keras/.pth weights, framing and errors.

No released weights are available to the tests: torchopenl3's network with random weights (and
random batch-norm statistics, so that folding them into the convolutions is exercised) stands in
for them, saved as torchopenl3's state dict and, from the same numbers, as the openl3 package's
Keras HDF5 layout. Clips are short and the hop long, to keep the network's ~10 GMAC per 1 s
window affordable on a CPU.

torchopenl3 builds its mel filters with the installed librosa, whose `norm=1` has meant unit-sum
filters since librosa 0.8; the models were trained with kapre 0.1.4's area-normalised ones. Our
default is the latter, so torchopenl3 is compared with its filters swapped for those, and
unchanged against `mel_norm="l1"`.
"""

from __future__ import annotations

import hashlib
import warnings

import h5py
import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import WeightsMissing, load_embedding_model, openl3

with warnings.catch_warnings():
    # librosa warns about the empty lowest mel256 filters when torchopenl3 builds them.
    warnings.simplefilter("ignore")
    import librosa
    import torchopenl3
    from torchopenl3.core import _get_num_windows
    from torchopenl3.models import PytorchOpenl3
    from torchopenl3.utils import preprocess_audio_batch

pytestmark = pytest.mark.filterwarnings("ignore:Empty filters detected:UserWarning")

# Largest embedding difference allowed, relative to the largest embedding value. At 48 kHz
# (float32 throughout, an FFT here and a DFT-as-convolution there, batch norms folded here) the
# measured differences were at most 3e-6 for linear, mel128 and mel256 alike.
EMBEDDING_RTOL = 2e-5
# From 22,050 Hz the bins above 11 kHz hold only rounding noise, and kapre's scale (10 log10 of
# the magnitude, 80 dB deep) reaches down to 1e-8 of the peak magnitude, below float32's
# resolution: both implementations' noise shows there. Measured for mel128/mel256: up to 7e-5
# (linear, with no mel bands to average the noise: 4e-4), whether torchopenl3 resamples in
# float64 or float32.
RESAMPLED_RTOL = 2e-4
# dB spectrograms in [-80, 0]: measured up to 3e-3 dB (mean 4e-6 dB), in weak bins.
SPECTROGRAM_ATOL_DB = 2e-2
INPUT_RATE = 22_050
HOP = 0.5  # s: two windows per 0.9 s clip


def make_clips(rate: int = INPUT_RATE, seconds: float = 0.9, count: int = 2) -> np.ndarray:
    """Chirps across the spectrum, a tone and noise, different per clip: every band has energy."""
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(7)
    clips = [
        0.3 * np.sin(2 * np.pi * ((60 + 40 * k) * t + (4000 + 2000 * k) * t**2))
        + 0.2 * np.sin(2 * np.pi * (110 * (k + 1)) * t)
        + 0.03 * rng.standard_normal(t.size)
        for k in range(count)
    ]
    return np.stack(clips).astype(np.float32)


def kapre_mel_basis(n_mels: int) -> torch.Tensor:
    """kapre 0.1.4's filters: HTK mel, area-normalised (librosa's `norm="slaney"` today)."""
    basis = librosa.filters.mel(
        sr=48000, n_fft=2048, n_mels=n_mels, fmin=0, fmax=24000, htk=True, norm="slaney"
    )
    return torch.from_numpy(basis).float()


def saved_reference(path, input_repr: str, embedding_size: int = 512) -> PytorchOpenl3:
    """torchopenl3's network from a saved state dict, mel filters as saved (librosa's own)."""
    net = PytorchOpenl3(input_repr=input_repr, embedding_size=embedding_size, content_type="music")
    net.load_state_dict(torch.load(path, weights_only=True))
    return net.eval()


def random_reference(input_repr: str, embedding_size: int = 512, seed: int = 0) -> PytorchOpenl3:
    torch.manual_seed(seed)
    net = PytorchOpenl3(input_repr=input_repr, embedding_size=embedding_size, content_type="music")
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
                if module.num_features == 1:  # the input one sees dB values in [-80, 0]
                    module.running_mean.fill_(-40.0)
                    module.running_var.fill_(300.0)
    return net.eval()


def reference_embeddings(net: PytorchOpenl3, clips: np.ndarray, rate: int) -> np.ndarray:
    emb, _ = torchopenl3.get_audio_embedding(
        clips.astype(np.float64), rate, model=net, hop_size=HOP, sampler="julian", verbose=False
    )
    return emb.numpy()


def assert_close(ours: np.ndarray, ref: np.ndarray, rtol: float = EMBEDDING_RTOL) -> None:
    assert ours.shape == ref.shape
    scale = np.abs(ref).max()
    assert scale > 0
    error = np.abs(ours - ref).max()
    assert error <= rtol * scale, f"max abs diff {error:.3g} of max {scale:.3g}"


def keras_weights_file(path, state: dict[str, torch.Tensor], with_frontend: bool) -> None:
    """The openl3 package's layout: Keras 2 `save_weights`, layers in model order.

    v0.4 files have no spectrogram layer; v0.2-v0.3 ones carry kapre's with its DFT and mel
    weights, which a loader must skip. Names carry Keras' auto-numbering, which differs between
    Keras versions, so they are offset here on purpose.
    """

    def dataset(group, layer: str, name: str, value: np.ndarray) -> bytes:
        full = f"{layer}/{name}:0"
        group.create_dataset(full, data=value.astype(np.float32))
        return full.encode()

    layers: list[tuple[str, list[tuple[str, np.ndarray]]]] = [("input_3", [])]
    if with_frontend:
        layers.append(
            (
                "melspectrogram_3",
                [("real_kernels", np.ones((2048, 1, 1, 1025))), ("freq2mel", np.ones((1025, 128)))],
            )
        )
    for index in range(8):
        bn = openl3.BN_NAMES[index]
        layers.append(
            (
                f"batch_normalization_{index + 20}",
                [
                    ("gamma", state[f"{bn}.weight"].numpy()),
                    ("beta", state[f"{bn}.bias"].numpy()),
                    ("moving_mean", state[f"{bn}.running_mean"].numpy()),
                    ("moving_variance", state[f"{bn}.running_var"].numpy()),
                ],
            )
        )
        conv = openl3.CONV_NAMES[index]
        kernel = state[f"{conv}.weight"].permute(2, 3, 1, 0).numpy()  # -> [kh, kw, in, out]
        name = conv if conv == "audio_embedding_layer" else f"conv2d_{index + 30}"
        layers.append((name, [("kernel", kernel), ("bias", state[f"{conv}.bias"].numpy())]))
        if index < 7:
            layers.append((f"activation_{index + 40}", []))
        if index in (1, 3, 5):
            layers.append((f"max_pooling2d_{index + 50}", []))
    with h5py.File(path, "w") as handle:
        handle.attrs["backend"] = b"tensorflow"
        handle.attrs["keras_version"] = b"2.2.4"
        handle.attrs["layer_names"] = [name.encode() for name, _ in layers]
        for name, weights in layers:
            group = handle.create_group(name)
            group.attrs["weight_names"] = [dataset(group, name, w, v) for w, v in weights]


# --- front end and framing (no network) ---


@pytest.mark.parametrize("n_mels", [128, 256])
def test_mel_filters_are_kapre_0_1_4_and_librosa_l1(n_mels):
    np.testing.assert_allclose(
        openl3.mel_filters(n_mels, norm="slaney"),
        kapre_mel_basis(n_mels).double(),
        rtol=1e-5,
        atol=1e-9,
    )
    current = librosa.filters.mel(
        sr=48000, n_fft=2048, n_mels=n_mels, fmin=0, fmax=24000, htk=True, norm=1
    )
    np.testing.assert_allclose(openl3.mel_filters(n_mels, norm="l1"), current, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize(
    ("input_repr", "shape"),
    [("linear", (257, 197)), ("mel128", (128, 199)), ("mel256", (256, 199))],
)
def test_spectrogram_matches_torchopenl3(input_repr, shape):
    reference = random_reference(input_repr).speclayer
    ours = openl3.Spectrogram(input_repr)
    if input_repr != "linear":
        reference.mel_basis = kapre_mel_basis(shape[0])
    clips = make_clips(rate=48000, seconds=1.0)
    clips[1, :20000] = 0.0  # silence reaches the -80 dB floor
    windows = torch.from_numpy(clips)
    with torch.no_grad():
        expected = reference(windows.unsqueeze(1)).squeeze(-1)
        got = ours(windows).squeeze(1)
    assert ours.shape == shape
    assert tuple(got.shape) == (2, *shape)
    torch.testing.assert_close(got, expected, rtol=0, atol=SPECTROGRAM_ATOL_DB)


@pytest.mark.parametrize("hop_size", [0.1, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("center", [True, False])
def test_windows_as_torchopenl3_frames_them(hop_size, center):
    hop = int(hop_size * 48000)
    for samples in (1, 10_000, 24_000, 48_000, 48_001, 72_000, 100_003):
        audio = torch.randn(2, samples, dtype=torch.float64)
        expected = preprocess_audio_batch(audio, 48000, center=center, hop_size=hop_size)
        got = openl3.frame_windows(audio, hop, center)
        count = _get_num_windows(samples, 48000, hop, center)
        assert openl3.frame_count(samples, hop, center) == count == got.shape[1]
        torch.testing.assert_close(got.reshape(-1, 48000), expected.squeeze(1), rtol=0, atol=0)


# --- embeddings against torchopenl3 ---


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Per representation: a random torchopenl3 network's state dict, saved as a .pth."""
    folder = tmp_path_factory.mktemp("openl3")
    made = {}
    for seed, input_repr in enumerate(openl3.INPUT_REPRS):
        path = folder / f"torchopenl3_{input_repr}_music_512.pth.tar"
        torch.save(random_reference(input_repr, seed=seed).state_dict(), path)
        made[input_repr] = path
    return made


@pytest.mark.parametrize("input_repr", openl3.INPUT_REPRS)
def test_embeddings_match_torchopenl3(references, input_repr):
    path = references[input_repr]
    net = saved_reference(path, input_repr)
    if input_repr != "linear":
        net.speclayer.mel_basis = kapre_mel_basis(net.speclayer.mel_basis.shape[0])
    clips = make_clips(rate=48000)
    expected = reference_embeddings(net, clips, 48000)
    # Three windows per chunk: chunks straddle the two clips.
    model = openl3.load_model(
        str(path), device="cpu", input_repr=input_repr, hop_size=HOP, batch_frames=3
    )
    got = openl3.embed_batch(clips, 48000, model)
    assert got.dtype == np.float32 and got.shape == (2, 2, 512)
    assert_close(got, expected)


def test_resampling_is_julius():
    import julius

    model = openl3.load_model("random", device="cpu")
    clips = make_clips(seconds=0.5)
    got = model.resample(torch.from_numpy(clips), INPUT_RATE)
    expected = julius.resample_frac(torch.from_numpy(clips).double(), INPUT_RATE, 48000)
    assert got.dtype == torch.float32 and got.shape == expected.shape == (2, 24000)
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-6)
    assert model.resample(expected, 48000) is expected


def test_mel_norm_l1_matches_torchopenl3_as_installed(references):
    """End to end from 22,050 Hz, resampled by julius as torchopenl3's "julian" sampler."""
    path = references["mel256"]
    net = saved_reference(path, "mel256")
    clips = make_clips(count=1)
    expected = reference_embeddings(net, clips, INPUT_RATE)
    model = openl3.load_model(str(path), device="cpu", hop_size=HOP, mel_norm="l1")
    assert model.options_id == "mel256-music-512-hop0.5-l1mel"
    assert_close(openl3.embed_batch(clips, INPUT_RATE, model), expected, RESAMPLED_RTOL)
    # The filters matter: kapre's filters give embeddings further apart than the tolerance.
    default = openl3.load_model(str(path), device="cpu", hop_size=HOP)
    with pytest.raises(AssertionError):
        assert_close(openl3.embed_batch(clips, INPUT_RATE, default), expected, RESAMPLED_RTOL)


def test_6144_flattens_like_torchopenl3(references):
    path = references["mel128"]
    net = saved_reference(path, "mel128", embedding_size=6144)
    net.speclayer.mel_basis = kapre_mel_basis(128)
    clips = make_clips(rate=48000, count=1)
    expected = reference_embeddings(net, clips, 48000)
    model = openl3.load_model(
        str(path), device="cpu", input_repr="mel128", embedding_size=6144, hop_size=HOP
    )
    assert model.timestamp_embedding_size == model.scene_embedding_size == 6144
    assert_close(openl3.embed_batch(clips, 48000, model), expected)


# --- Keras weights, HEAR functions, the spec's loader ---


@pytest.mark.parametrize("with_frontend", [False, True])
def test_keras_h5_gives_the_same_embeddings(references, tmp_path, settings, with_frontend):
    pth = references["mel128"]
    h5 = tmp_path / "openl3_audio_mel128_music.h5"
    keras_weights_file(h5, torch.load(pth, weights_only=True), with_frontend)
    options = {"input_repr": "mel128", "hop_size": HOP}
    from_pth = openl3.load_model(str(pth), device="cpu", **options)
    # Through the evaluation's loader, from the model folder by the default file name.
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    loaded = load_embedding_model("openl3", options, device="cpu")
    from_h5 = loaded.model
    for name, value in from_pth.net.state_dict().items():
        torch.testing.assert_close(from_h5.net.state_dict()[name], value, rtol=0, atol=0)
    assert from_h5.weights_id == hashlib.sha256(h5.read_bytes()).hexdigest()[:12]
    assert loaded.model_id == f"openl3:mel128-music-512-hop0.5@{from_h5.weights_id}"

    audio = make_clips(rate=48000, seconds=1.3, count=1)
    emb = loaded.embed(audio, 48000)
    stamps_emb, stamps = openl3.get_timestamp_embeddings(torch.from_numpy(audio), from_pth)
    assert emb.shape == (1, 3, 512)
    np.testing.assert_array_equal(emb, stamps_emb.numpy())
    np.testing.assert_allclose(stamps.numpy(), [[0.0, 500.0, 1000.0]])
    scene = openl3.get_scene_embeddings(torch.from_numpy(audio), from_h5)
    np.testing.assert_allclose(scene.numpy(), emb.mean(axis=1), rtol=1e-6, atol=1e-7)


def test_wrong_files_are_rejected(tmp_path):
    torch.save({"conv2d_1.weight": torch.zeros(64, 1, 3, 3)}, tmp_path / "partial.pth")
    with pytest.raises(ValueError, match="lacks"):
        openl3.load_model(str(tmp_path / "partial.pth"), device="cpu")
    with h5py.File(tmp_path / "other.h5", "w") as handle:
        handle.attrs["layer_names"] = [b"dense_1"]
        handle.create_group("dense_1").attrs["weight_names"] = []
    with pytest.raises(ValueError, match="0 batch norms and 0 convolutions"):
        openl3.load_model(str(tmp_path / "other.h5"), device="cpu")
    with pytest.raises(ValueError, match="input_repr"):
        openl3.load_model("random", input_repr="mel64")


def test_missing_weights_say_where_to_get_them(tmp_path, settings):
    missing = tmp_path / "openl3_audio_linear_env.h5"
    with pytest.raises(WeightsMissing, match=r"openl3_audio_linear_env\.h5") as info:
        openl3.load_model(str(missing), device="cpu", input_repr="linear", content_type="env")
    assert "pip install openl3" in str(info.value)
    assert "torchopenl3" in str(info.value)
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    with pytest.raises(WeightsMissing, match=r"openl3_audio_mel256_music\.h5.*pip install openl3"):
        load_embedding_model("openl3", {}, device="cpu")
    assert openl3.default_weights_file(input_repr="mel128", content_type="env") == (
        "openl3_audio_mel128_env.h5"
    )


def test_random_model_is_fixed():
    first = openl3.load_model("random", device="cpu")
    second = openl3.load_model("random", device="cpu")
    assert first.weights_id == "random" and first.options_id == "mel256-music-512-hop0.1"
    assert first.sample_rate == 48000 and str(first.device) == "cpu"
    for name, value in first.state_dict().items():
        torch.testing.assert_close(second.state_dict()[name], value, rtol=0, atol=0)


def test_bfloat16_is_close_to_float32(references):
    """The reduced precision a GPU worker may use, checked where it runs here: bf16 autocast on
    the CPU (float32 accumulation, as on tensor cores). Tolerance 3e-2 of the largest value;
    measured 4e-3 here and 1e-2 with the fixed random init (bf16 keeps 8 significant bits)."""
    path = references["mel256"]
    clips = make_clips()
    full = openl3.load_model(str(path), device="cpu", hop_size=HOP)
    reduced = openl3.load_model(str(path), device="cpu", hop_size=HOP, precision="bf16")
    assert reduced.autocast_dtype == torch.bfloat16
    assert reduced.options_id == full.options_id
    expected = openl3.embed_batch(clips, INPUT_RATE, full)
    got = openl3.embed_batch(clips, INPUT_RATE, reduced)
    assert got.dtype == np.float32 and got.shape == expected.shape
    scale = np.abs(expected).max()
    error = np.abs(got - expected).max()
    assert 0 < error <= 3e-2 * scale


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_half_precision_is_close(references):
    path = references["mel256"]
    clips = make_clips()
    cpu = openl3.load_model(str(path), device="cpu", hop_size=HOP)
    cuda = openl3.load_model(str(path), device="cuda", hop_size=HOP)
    assert cuda.precision == "fp16"
    expected = openl3.embed_batch(clips, INPUT_RATE, cpu)
    got = openl3.embed_batch(clips, INPUT_RATE, cuda)
    scale = np.abs(expected).max()
    assert np.abs(got - expected).max() <= 2e-2 * scale
