"""VGGish (Hershey et al. 2017): the embedding behind DCASE 2023 Task 7's published FAD values.

Front end as in Google's `vggish_input` / torchvggish: 16 kHz audio, 25 ms periodic-Hann frames
every 10 ms, 512-point FFT magnitude, 64 HTK-mel bands 125-7500 Hz, log(mel + 0.01), then
patches of 96 frames (0.96 s, without overlap by default) through a VGG-like net to 128 values.

The network is built here; its parameter names follow torchvggish's state dict (`features.*`,
`embeddings.*`), so its released `vggish-10086976.pth` loads as it is. Google's released
TensorFlow checkpoint `vggish_model.ckpt` loads too, read without TensorFlow (`tf_checkpoint`):
its tf_slim variables (`vggish/conv1/weights`...) are renamed and transposed to that layout.
As in the widely used `frechet_audio_distance` package with its defaults, the output is the
last linear layer without the ReLU that torchvggish appends and without the PCA/quantisation
postprocessing; `activation=True` and `postprocess=True` give those back.

Resampling runs on torch (julius' windowed-sinc `resample_frac`, on the model's device) with
its cut-off set to match resampy's `kaiser_best`, which Google's vggish_input and the
`frechet_audio_distance` package use: on white noise resampled from 22.05-48 kHz the log-mel
examples then differ from resampy's by at most 0.04 (log units) in any band, where soxr's HQ
filter and julius' defaults, which keep more of 7.3-7.5 kHz, differ by up to 0.5 in the top band.

HEAR module; `load_model` also takes options like the other built-ins.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from .base import WeightsMissing, file_digest

NEEDS_WEIGHTS = True
WEIGHTS_HELP = (
    "VGGish needs torchvggish's state dict vggish-10086976.pth (from the torchvggish GitHub "
    "releases, v0.1) or Google's released TensorFlow checkpoint vggish_model.ckpt (from "
    "storage.googleapis.com/audioset, with vggish_pca_params.npz beside it for postprocessing)."
)
WEIGHTS_FILE = "vggish-10086976.pth"
PCA_FILES = ("vggish_pca_params-970ea276.pth", "vggish_pca_params.npz")

SAMPLE_RATE = 16_000
WINDOW = 400  # 25 ms
HOP = 160  # 10 ms
N_FFT = 512
N_MELS = 64
MEL_MIN_HZ, MEL_MAX_HZ = 125.0, 7500.0
LOG_OFFSET = 0.01
PATCH = 96  # STFT frames per example: 0.96 s
EMBEDDING_SIZE = 128
# julius' windowed sinc with these settings tracks resampy's kaiser_best (module docstring).
RESAMPLE_ZEROS, RESAMPLE_ROLLOFF = 24, 0.92
# Postprocessing as released with AudioSet: PCA, clip to [-2, 2], 8-bit quantisation.
QUANT_MIN, QUANT_MAX = -2.0, 2.0


def default_weights_file(**options) -> str:
    return WEIGHTS_FILE


def mel_matrix(
    n_fft: int = N_FFT,
    n_mels: int = N_MELS,
    sample_rate: int = SAMPLE_RATE,
    fmin: float = MEL_MIN_HZ,
    fmax: float = MEL_MAX_HZ,
) -> np.ndarray:
    """Mel weights [n_fft // 2 + 1, n_mels] as Google's mel_features builds them.

    The triangles are linear in mel (HTK scale, natural log), not in Hz, and the DC bin gets no
    weight; both differ from librosa's defaults.
    """

    def hz_to_mel(hz):
        return 1127.0 * np.log(1.0 + np.asarray(hz, dtype=np.float64) / 700.0)

    bins_mel = hz_to_mel(np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1))
    edges = np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2)
    lower, centre, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (bins_mel[:, None] - lower) / (centre - lower)
    falling = (upper - bins_mel[:, None]) / (upper - centre)
    weights = np.maximum(0.0, np.minimum(rising, falling))
    weights[0, :] = 0.0
    return weights


class LogMel(nn.Module):
    """Batched log-mel front end: audio [n, samples] at 16 kHz -> [n, stft frames, 64]."""

    def __init__(self):
        super().__init__()
        self.register_buffer("window", torch.hann_window(WINDOW, periodic=True))
        self.register_buffer("mel", torch.from_numpy(mel_matrix()).float())

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        # Frames start at sample 0 with no centring and are zero-padded at the end to the FFT
        # size, as in mel_features.stft_magnitude; torch.stft would centre a short window in
        # the FFT frame and count frames differently.
        frames = audio.float().unfold(-1, WINDOW, HOP) * self.window
        magnitude = torch.fft.rfft(frames, n=N_FFT).abs()
        return torch.log(magnitude @ self.mel + LOG_OFFSET)


def patches(logmel: torch.Tensor, hop_frames: int) -> torch.Tensor:
    """Examples [n, patches, 96, 64] of a log-mel batch [n, frames, 64] (no padding)."""
    return logmel.unfold(1, PATCH, hop_frames).transpose(-1, -2)


class VGGishNet(nn.Module):
    """VGGish's network on log-mel patches [m, 96, 64] -> [m, 128]."""

    def __init__(self, activation: bool = False):
        super().__init__()
        layers: list[nn.Module] = []
        channels = 1
        for width in (64, "pool", 128, "pool", 256, 256, "pool", 512, 512, "pool"):
            if width == "pool":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [nn.Conv2d(channels, width, kernel_size=3, padding=1), nn.ReLU()]
                channels = width
        self.features = nn.Sequential(*layers)
        head: list[nn.Module] = [
            nn.Linear(512 * 6 * 4, 4096),
            nn.ReLU(),
            nn.Linear(4096, 4096),
            nn.ReLU(),
            nn.Linear(4096, EMBEDDING_SIZE),
        ]
        if activation:
            head.append(nn.ReLU())
        # A ReLU has no parameters, so the state dict keys are the same either way.
        self.embeddings = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x.unsqueeze(1))  # [m, 512, 6, 4]
        # The released weights flatten in TensorFlow's channels-last order.
        x = x.permute(0, 2, 3, 1).flatten(1)
        return self.embeddings(x)


class VGGishModel(nn.Module):
    def __init__(
        self,
        net: VGGishNet,
        *,
        device: str | torch.device | None,
        hop_size: float,
        batch_frames: int,
        pca: tuple[torch.Tensor, torch.Tensor] | None,
        weights_id: str,
        options_id: str,
    ):
        super().__init__()
        self.sample_rate = SAMPLE_RATE
        self.scene_embedding_size = self.timestamp_embedding_size = EMBEDDING_SIZE
        self.hop_frames = max(1, round(float(hop_size) * SAMPLE_RATE / HOP))
        self.batch_frames = max(1, int(batch_frames))
        self.frontend = LogMel()
        self.net = net.eval()
        self.postprocess = pca is not None
        if pca is not None:
            self.register_buffer("pca_matrix", pca[0].float())
            self.register_buffer("pca_means", pca[1].float().reshape(1, -1))
        self.weights_id = weights_id
        self.options_id = options_id
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.to(self.device)

    def examples(self, audio: torch.Tensor) -> torch.Tensor:
        """Log-mel examples [n, patches, 96, 64] of audio [n, samples] at 16 kHz."""
        # Google's framing drops a clip shorter than one example (0.975 s); padding it with
        # silence to one example keeps every clip in the evaluation.
        shortest = (PATCH - 1) * HOP + WINDOW
        if audio.shape[-1] < shortest:
            audio = nn.functional.pad(audio, (0, shortest - audio.shape[-1]))
        return patches(self.frontend(audio), self.hop_frames)

    def embed_examples(self, examples: torch.Tensor) -> torch.Tensor:
        """Embeddings [m, 128] of examples [m, 96, 64], in chunks of `batch_frames`."""
        out = [self.net(chunk) for chunk in torch.split(examples, self.batch_frames)]
        emb = torch.cat(out) if out else examples.new_zeros((0, EMBEDDING_SIZE))
        if self.postprocess:
            pca = (emb - self.pca_means) @ self.pca_matrix.T
            clipped = pca.clamp(QUANT_MIN, QUANT_MAX)
            emb = torch.round((clipped - QUANT_MIN) * (255.0 / (QUANT_MAX - QUANT_MIN)))
        return emb

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if audio.ndim != 2:
            raise ValueError("audio must be a 2-D tensor [n_sounds, n_samples]")
        ex = self.examples(audio.to(self.device))
        n, count = ex.shape[:2]
        emb = self.embed_examples(ex.reshape(n * count, PATCH, N_MELS))
        emb = emb.reshape(n, count, EMBEDDING_SIZE)
        # Centre of each example: its first frame's start plus half the span it covers.
        span = (PATCH - 1) * HOP + WINDOW
        starts = torch.arange(count, device=emb.device, dtype=torch.float32) * self.hop_frames
        stamps = (starts * HOP + span / 2) * 1000.0 / SAMPLE_RATE
        return emb, stamps.expand(n, -1)


def _torch_load(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        # torchvggish's PCA file pickles numpy arrays; allow exactly what those need.
        import pickle

        if not isinstance(exc, pickle.UnpicklingError):
            raise
        core = getattr(np, "_core", None) or np.core
        reconstruct = core.multiarray._reconstruct
        allowed = [
            (reconstruct, "numpy.core.multiarray._reconstruct"),
            (reconstruct, "numpy._core.multiarray._reconstruct"),
            np.ndarray,
            np.dtype,
            type(np.dtype(np.float64)),
            type(np.dtype(np.float32)),
        ]
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True)


# tf_slim's scopes in Google's VGGish definition -> torchvggish's layers.
TF_LAYERS = {
    "vggish/conv1": "features.0",
    "vggish/conv2": "features.3",
    "vggish/conv3/conv3_1": "features.6",
    "vggish/conv3/conv3_2": "features.8",
    "vggish/conv4/conv4_1": "features.11",
    "vggish/conv4/conv4_2": "features.13",
    "vggish/fc1/fc1_1": "embeddings.0",
    "vggish/fc1/fc1_2": "embeddings.2",
    "vggish/fc2": "embeddings.4",
}


def state_dict_from_tf(variables: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """torchvggish's parameters from the variables of Google's VGGish checkpoint.

    TensorFlow keeps convolution kernels as [height, width, in, out] and dense weights as
    [in, out]; PyTorch as [out, in, height, width] and [out, in]. Variables of other scopes
    (a fine-tuning run's classifier or optimizer slots) are ignored.
    """
    params: dict[str, torch.Tensor] = {}
    for scope, layer in TF_LAYERS.items():
        weights, biases = variables.get(f"{scope}/weights"), variables.get(f"{scope}/biases")
        if weights is None or biases is None:
            continue  # reported as missing by the caller, with the other absent layers
        weights = np.asarray(weights, dtype=np.float32)
        axes = (3, 2, 0, 1) if weights.ndim == 4 else (1, 0)
        params[f"{layer}.weight"] = torch.from_numpy(np.ascontiguousarray(weights.transpose(axes)))
        params[f"{layer}.bias"] = torch.from_numpy(np.asarray(biases, dtype=np.float32).copy())
    return params


def _read_weights(path: Path) -> dict:
    """A state dict from torchvggish's .pth (or a checkpoint nesting one) or Google's .ckpt."""
    from .tf_checkpoint import is_checkpoint, read_checkpoint

    if is_checkpoint(path):
        return state_dict_from_tf(read_checkpoint(path))
    return _state_dict(_torch_load(path))


def _state_dict(raw: dict) -> dict:
    # A whole-model pickle or a training checkpoint nest the parameters one level down.
    for key in ("state_dict", "model"):
        if isinstance(raw.get(key), dict):
            raw = raw[key]
    return {k.removeprefix("module."): v for k, v in raw.items()}


def _pca_from(params: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
    for prefix in ("", "pproc.", "pproc._"):
        matrix = params.get(f"{prefix}pca_eigen_vectors", params.get(f"{prefix}pca_matrix"))
        means = params.get(f"{prefix}pca_means")
        if matrix is not None and means is not None:
            matrix = torch.as_tensor(np.asarray(matrix), dtype=torch.float32)
            means = torch.as_tensor(np.asarray(means), dtype=torch.float32).reshape(-1)
            if matrix.shape != (EMBEDDING_SIZE, EMBEDDING_SIZE) or means.numel() != 128:
                raise ValueError(f"PCA parameters have shapes {matrix.shape}, {means.shape}")
            return matrix, means
    return None


def _load_pca(weights: Path | None, params: dict, pca_file: str) -> tuple:
    """PCA parameters: from the weights file, the `pca_file` option, or next to the weights."""
    found = _pca_from(params)
    if found is not None and not pca_file:
        return found, "in-weights"
    candidates = [Path(pca_file)] if pca_file else []
    if not pca_file and weights is not None:
        candidates = [weights.parent / name for name in PCA_FILES]
    for path in candidates:
        if path.is_file():
            if path.suffix == ".npz":
                with np.load(path) as npz:
                    raw = {k: npz[k] for k in npz.files}
            else:
                raw = _torch_load(path)
            found = _pca_from(raw)
            if found is None:
                raise ValueError(f"{path} holds no pca_eigen_vectors / pca_means")
            return found, file_digest(path, 8)
    raise WeightsMissing(
        f"VGGish postprocessing needs PCA parameters: none in the weights and no file "
        f"{' or '.join(str(p) for p in candidates) or PCA_FILES[0]}. Take "
        f"{PCA_FILES[0]} from the torchvggish releases or {PCA_FILES[1]} from Google's "
        "AudioSet release, or set pca_file."
    )


def load_model(
    model_file_path: str = "",
    *,
    device: str | None = None,
    postprocess: bool = False,
    activation: bool = False,
    hop_size: float = 0.96,
    batch_frames: int = 128,
    pca_file: str = "",
) -> VGGishModel:
    """VGGish from torchvggish's state dict or Google's TensorFlow checkpoint; `"random"` gives
    a fixed random init (tests)."""
    params: dict = {}
    weights: Path | None = None
    if model_file_path == "random":
        # A fixed seed so that "random" always names the same network.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net = VGGishNet(activation=bool(activation))
        weights_id = "random"
    else:
        weights = Path(model_file_path) if model_file_path else None
        # A TensorFlow V2 checkpoint is named by its prefix; its .index file identifies it.
        if (
            weights is not None
            and not weights.is_file()
            and weights.with_name(weights.name + ".index").is_file()
        ):
            weights = weights.with_name(weights.name + ".index")
        if weights is None or not weights.is_file():
            raise WeightsMissing(
                f"VGGish weights file {model_file_path or WEIGHTS_FILE!s} does not exist. "
                f"{WEIGHTS_HELP}"
            )
        params = _read_weights(weights)
        # Built without memory or initialisation (about a second on a CPU): the file's
        # tensors become the parameters.
        with torch.device("meta"):
            net = VGGishNet(activation=bool(activation))
        wanted = net.state_dict().keys()
        missing = [k for k in wanted if k not in params]
        if missing:
            raise ValueError(
                f"{weights} holds no complete VGGish: it lacks {', '.join(missing[:4])}"
            )
        net.load_state_dict({k: params[k].float() for k in wanted}, assign=True)
        weights_id = file_digest(weights)
    pca, pca_id = (None, "")
    if postprocess:
        pca, pca_id = _load_pca(weights, params, pca_file)
    hop_frames = max(1, round(float(hop_size) * SAMPLE_RATE / HOP))
    options_id = f"hop{hop_frames * HOP / SAMPLE_RATE:g}-act{int(bool(activation))}"
    options_id += f"-pca{pca_id}" if postprocess else "-raw"
    return VGGishModel(
        net,
        device=device,
        hop_size=hop_size,
        batch_frames=batch_frames,
        pca=pca,
        weights_id=weights_id,
        options_id=options_id,
    )


def get_timestamp_embeddings(
    audio: torch.Tensor, model: VGGishModel
) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings [n, patches, 128] and patch-centre times [n, patches] in ms."""
    with torch.inference_mode():
        return model(audio)


def get_scene_embeddings(audio: torch.Tensor, model: VGGishModel) -> torch.Tensor:
    emb, _ = get_timestamp_embeddings(audio, model)
    return emb.mean(dim=1)


def resample(audio: torch.Tensor, input_rate: int) -> torch.Tensor:
    """Audio [n, samples] at `input_rate` -> [n, samples'] at 16 kHz, on the audio's device."""
    if int(input_rate) == SAMPLE_RATE:
        return audio
    import julius

    return julius.resample_frac(
        audio, int(input_rate), SAMPLE_RATE, zeros=RESAMPLE_ZEROS, rolloff=RESAMPLE_ROLLOFF
    )


def embed_batch(audio: np.ndarray, input_rate: int, model: VGGishModel) -> np.ndarray:
    """Frame embeddings [n, patches, 128] of float32 audio [n, samples] at any rate."""
    x = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(audio), dtype=np.float32))
    with torch.inference_mode():
        x = resample(x.to(model.device), input_rate)
    emb, _ = get_timestamp_embeddings(x, model)
    return emb.float().cpu().numpy()
