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

Preset `dcase2023`: DCASE 2023 Task 7's own FAD pipeline. The challenge's published FADs and
its evaluation-set statistics (`mu`/`sigma` of 1,000 embeddings per category: 100 clips x 10)
come from the task's evaluation code (github.com/DCASE2023-Task7-Foley-Sound-Synthesis/
dcase2023_task7_eval_fad, commit 1a2bb03, April 2023), which runs the Beam pipeline of
google-research's `frechet_audio_distance` unchanged in what matters here. It does not prepare
audio as `vggish_input` does, and its statistics are only comparable with embeddings made the
same way, so FAD against the official statistics must use this preset (model id
`vggish:dcase2023-act0-raw@<weights>`; the statistics import declares it). What it does:

- Reading (`create_embeddings_beam.py` `ReadWavFiles`, l. 296-303): `scipy.io.wavfile.read`
  keeps the samples and drops the sample rate; nothing resamples, so the 22,050 Hz clips the
  challenge requires (`FADWrapper.py` `sanity_check`, l. 91-105) are read as 16 kHz audio: the
  1,451 Hz of the log-mel is 2 kHz in the file, and the mel range 125-7500 Hz covers 172-10,336
  Hz of it. 16-bit samples stay integers (no division by 32768).
- Loudness (`audioset_model.py` `extract_features`, l. 85-87, normalize=True): the whole clip is
  divided by max(0.1, its largest sample) - the signed maximum, not the absolute peak, so the
  positive peak becomes 1.0. In 16-bit units the 0.1 floor only matters for a clip with no
  positive sample; here audio is float full scale, so the floor is 0.1 / 32768. (A float WAV read
  by scipy would meet the floor at 0.1 full scale; the challenge's clips are 16-bit.)
- Windows (l. 88-92, with `step_size=8000` from `create_embeddings_main.py` l. 34-37): 16,000
  samples every 8,000, complete windows only: 10 per 4 s clip (88,200 samples; the last 200
  are dropped). A clip shorter than one window gives none there; here it is zero-padded to
  one window so that every clip counts, as the default pipeline does with short clips.
- Front end (l. 96-111): `mel_features.log_mel_spectrogram` on each window at 16 kHz - the
  same STFT, mel and log as above - and `mel_features.frame` in 96 frames: 98 frames per
  window give one example, frames 0-95 (the window's first 15,600 samples).
- Network (`vggish_slim.py` l. 104-106 and `vggish_params.OUTPUT_TENSOR_NAME`): Google's
  `vggish_model.ckpt`, output `vggish/embedding`, the last linear layer without activation; no
  PCA or quantisation (`BatchedInference` feeds `process_batch`'s output straight to the
  statistics, l. 243-250).
Clips at other rates are first resampled to 22,050 Hz (as the challenge required of
submissions) and then read the same way. Timestamps count the samples as 16 kHz audio, as the
pipeline reads them.

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

# DCASE 2023 Task 7's FAD pipeline (module docstring): 22,050 Hz clips read as 16 kHz audio,
# divided by their largest sample, in windows of 16,000 samples every 8,000, one example each.
DCASE2023 = "dcase2023"
PRESETS = ("", DCASE2023)
DCASE_RATE = 22_050
DCASE_WINDOW = 16_000
DCASE_STEP = 8_000
DCASE_PEAK_FLOOR = 0.1 / 32768  # the pipeline's 0.1, in 16-bit sample units
DCASE_OPTIONS_ID = "dcase2023-act0-raw"


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
        preset: str = "",
    ):
        super().__init__()
        self.sample_rate = SAMPLE_RATE
        self.preset = preset
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

    def prepare(self, audio: torch.Tensor, input_rate: int) -> torch.Tensor:
        """Audio [n, samples] at `input_rate` as the model reads it, on the model's device: at
        16 kHz, or for `dcase2023` at 22,050 Hz, whose samples the model takes for 16 kHz."""
        target = DCASE_RATE if self.preset == DCASE2023 else SAMPLE_RATE
        return resample(audio.to(self.device), input_rate, target)

    def examples(self, audio: torch.Tensor) -> torch.Tensor:
        """Log-mel examples [n, patches, 96, 64] of audio [n, samples] at 16 kHz."""
        if self.preset == DCASE2023:
            return self.dcase_examples(audio)
        # Google's framing drops a clip shorter than one example (0.975 s); padding it with
        # silence to one example keeps every clip in the evaluation.
        shortest = (PATCH - 1) * HOP + WINDOW
        if audio.shape[-1] < shortest:
            audio = nn.functional.pad(audio, (0, shortest - audio.shape[-1]))
        return patches(self.frontend(audio), self.hop_frames)

    def dcase_examples(self, audio: torch.Tensor) -> torch.Tensor:
        """DCASE 2023 Task 7's examples [n, windows, 96, 64]: one per 16,000-sample window."""
        audio = audio.float()
        audio = audio / audio.amax(dim=-1, keepdim=True).clamp_min(DCASE_PEAK_FLOOR)
        if audio.shape[-1] < DCASE_WINDOW:
            audio = nn.functional.pad(audio, (0, DCASE_WINDOW - audio.shape[-1]))
        # Of each window's 98 STFT frames the example takes the first 96, which read only its
        # first 15,600 samples: the rest is not transformed at all.
        used = (PATCH - 1) * HOP + WINDOW
        windows = audio.unfold(-1, DCASE_WINDOW, DCASE_STEP)[..., :used]
        n, count = windows.shape[:2]
        logmel = self.frontend(windows.reshape(n * count, used))
        return logmel.reshape(n, count, PATCH, N_MELS)

    def example_starts(self, count: int) -> torch.Tensor:
        """First sample of each of `count` examples (float32), in the audio the model reads."""
        step = DCASE_STEP if self.preset == DCASE2023 else self.hop_frames * HOP
        return torch.arange(count, device=self.device, dtype=torch.float32) * step

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
        stamps = (self.example_starts(count) + span / 2) * 1000.0 / SAMPLE_RATE
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
    preset: str = "",
) -> VGGishModel:
    """VGGish from torchvggish's state dict or Google's TensorFlow checkpoint; `"random"` gives
    a fixed random init (tests). `preset="dcase2023"`: DCASE 2023 Task 7's FAD pipeline (module
    docstring), which fixes the other options to its own (no PCA, no final ReLU)."""
    preset = str(preset or "").strip().lower()
    if preset not in PRESETS:
        raise ValueError(f"VGGish preset {preset!r}: the presets are {', '.join(PRESETS[1:])}")
    if preset and (postprocess or activation or abs(float(hop_size) - 0.96) > 1e-9):
        raise ValueError(
            f"the VGGish preset {preset} fixes its pipeline: it takes no postprocess, "
            "activation or hop_size"
        )
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
    if preset == DCASE2023:
        options_id = DCASE_OPTIONS_ID
    return VGGishModel(
        net,
        device=device,
        hop_size=hop_size,
        batch_frames=batch_frames,
        pca=pca,
        weights_id=weights_id,
        options_id=options_id,
        preset=preset,
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


def resample(audio: torch.Tensor, input_rate: int, rate: int = SAMPLE_RATE) -> torch.Tensor:
    """Audio [n, samples] at `input_rate` -> [n, samples'] at `rate`, on the audio's device."""
    if int(input_rate) == int(rate):
        return audio
    import julius

    return julius.resample_frac(
        audio, int(input_rate), int(rate), zeros=RESAMPLE_ZEROS, rolloff=RESAMPLE_ROLLOFF
    )


def embed_batch(audio: np.ndarray, input_rate: int, model: VGGishModel) -> np.ndarray:
    """Frame embeddings [n, patches, 128] of float32 audio [n, samples] at any rate."""
    x = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(audio), dtype=np.float32))
    with torch.inference_mode():
        x = model.prepare(x, input_rate)
    emb, _ = get_timestamp_embeddings(x, model)
    return emb.float().cpu().numpy()
