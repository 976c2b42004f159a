"""OpenL3 (Cramer et al. 2019): the audio sub-network of Look, Listen and Learn, in PyTorch.

Front end as the released models were trained with (kapre 0.1.4, which torchopenl3 reproduces):
1 s windows of 48 kHz audio every `hop_size`, centred (the first window is centred on the first
sample), zero-padded at the end to cover the clip; then per window

- `linear`: 512-point periodic-Hann STFT, hop 242, no padding (257 x 197), magnitude;
- `mel128` / `mel256`: the window zero-padded by 982 samples each side ("same" padding), 2048-point
  STFT, hop 242 (1025 x 199), power, HTK-mel filters 0-24 kHz with kapre 0.1.4's area
  normalisation (`norm=1` of librosa < 0.8, today's `norm="slaney"`), square root;

and in both cases 10 log10(max(x, 1e-10)), minus the window's maximum, floored at -80 dB. The
network is eight 3x3 convolutions (batch norm and ReLU after each but the last) with 2x2 max
pooling after the 2nd, 4th and 6th, then a max pool to 512 or 6144 values flattened in Keras'
height-width-channel order.

Weights: the official Keras files of the `openl3` package (`openl3_audio_<repr>_<content>.h5`,
read with h5py, one file for both embedding sizes) or torchopenl3's state dicts (`.pth`/`.pth.tar`,
parameter names `conv2d_1`... `batch_normalization_1`... `audio_embedding_layer`). The batch norms
are folded into the convolutions at load time: inference only.

torchopenl3 builds its mel filters with whichever librosa is installed; since librosa 0.8 its
`norm=1` means unit-sum filters rather than the area normalisation the models were trained with,
which changes the lowest (narrower than one FFT bin) bands. `mel_norm="l1"` reproduces that.

Everything runs on torch on the model's device: resampling (julius, as torchopenl3's "julian"
sampler), framing, spectrograms and all windows of a batch through the network at once, in
chunks of `batch_frames` windows to bound memory. On CUDA the network runs channels-last under
float16 autocast (`precision`); on the CPU in float32, channels-last (oneDNN's fastest layout
for these convolutions, about 1.3x over the default). `precision="bf16"` is about 2x faster on a
CPU with AVX-512 BF16 and within about 1e-2 of the largest value (tests state the tolerances);
float32 stays the CPU default so that embeddings match the reference implementation.

HEAR module; `load_model` also takes options like the other built-ins.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .base import WeightsMissing, file_digest

NEEDS_WEIGHTS = True
WEIGHTS_HELP = (
    "OpenL3 needs the official Keras weights, which `pip install openl3` puts in the openl3 "
    "package folder (openl3_audio_<input_repr>_<content_type>.h5, e.g. "
    "openl3_audio_mel256_music.h5; also gzipped on the `models` branch of the marl/openl3 "
    "GitHub repository), or torchopenl3's state dict for the same model "
    "(torchopenl3_<input_repr>_<content_type>_<embedding_size>.pth.tar from the "
    "torchopenl3/torchopenl3-models GitHub repository)."
)

SAMPLE_RATE = 48_000
WINDOW = SAMPLE_RATE  # 1 s per embedding
STFT_HOP = 242
AMIN = 1e-10
DYNAMIC_RANGE = 80.0
BN_EPS = 1e-3  # Keras' BatchNormalization default
INPUT_REPRS = ("linear", "mel128", "mel256")
CONTENT_TYPES = ("music", "env")
EMBEDDING_SIZES = (512, 6144)
MEL_NORMS = ("slaney", "l1")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")
# Channels of the eight convolutions; 2x2 max pooling follows the ones marked.
CHANNELS = (64, 64, 128, 128, 256, 256, 512, 512)
POOL_AFTER = (1, 3, 5)
# Final max pool per representation and size (the maps are 32x24 or 16x24 by then).
POOLING = {
    "linear": {512: (32, 24), 6144: (8, 8)},
    "mel128": {512: (16, 24), 6144: (4, 8)},
    "mel256": {512: (32, 24), 6144: (8, 8)},
}
CONV_NAMES = (*(f"conv2d_{i}" for i in range(1, 8)), "audio_embedding_layer")
BN_NAMES = tuple(f"batch_normalization_{i}" for i in range(1, 9))


def default_weights_file(input_repr: str = "mel256", content_type: str = "music", **_) -> str:
    return f"openl3_audio_{input_repr}_{content_type}.h5"


# --- front end ---


def mel_filters(n_mels: int, n_fft: int = 2048, norm: str = "slaney") -> np.ndarray:
    """HTK-mel triangles 0 Hz-Nyquist [n_mels, n_fft // 2 + 1] as kapre 0.1.4 built them.

    `norm="slaney"` divides each triangle by half its width in Hz (unit area), what kapre's
    `norm=1` did; `"l1"` makes each filter sum to one, what librosa >= 0.8 does for `norm=1`.
    """

    def hz_to_mel(hz):
        return 2595.0 * np.log10(1.0 + np.asarray(hz, dtype=np.float64) / 700.0)

    def mel_to_hz(mel):
        return 700.0 * (10.0 ** (np.asarray(mel, dtype=np.float64) / 2595.0) - 1.0)

    bins = np.linspace(0.0, SAMPLE_RATE / 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(SAMPLE_RATE / 2), n_mels + 2))
    widths = np.diff(edges)
    ramps = edges[:, None] - bins[None, :]
    rising = -ramps[:-2] / widths[:-1, None]
    falling = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(rising, falling))
    if norm == "slaney":
        weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    elif norm == "l1":
        sums = weights.sum(axis=1, keepdims=True)
        # Empty filters (the lowest bands of mel256 fall between FFT bins) stay empty.
        weights = np.where(sums > np.finfo(np.float32).tiny, weights / np.maximum(sums, 1e-300), 0)
    else:
        raise ValueError(f"mel_norm must be one of {MEL_NORMS}, not {norm!r}")
    return weights


class Spectrogram(nn.Module):
    """Windows [m, 48000] -> normalised dB spectrograms [m, 1, bands, stft frames] (float32)."""

    def __init__(self, input_repr: str, mel_norm: str = "slaney"):
        super().__init__()
        self.input_repr = input_repr
        self.n_fft = 512 if input_repr == "linear" else 2048
        if input_repr == "linear":
            self.pad = (0, 0)
        else:
            # TensorFlow's "same" padding of a 48000-sample input for this kernel and stride.
            rest = WINDOW % STFT_HOP
            total = max(self.n_fft - (rest or STFT_HOP), 0)
            self.pad = (total // 2, total - total // 2)
        self.register_buffer("window", torch.hann_window(self.n_fft, periodic=True))
        if input_repr != "linear":
            n_mels = int(input_repr.removeprefix("mel"))
            self.register_buffer(
                "mel", torch.from_numpy(mel_filters(n_mels, self.n_fft, mel_norm)).float()
            )

    @property
    def shape(self) -> tuple[int, int]:
        frames = 1 + (WINDOW + sum(self.pad) - self.n_fft) // STFT_HOP
        bands = self.n_fft // 2 + 1 if self.input_repr == "linear" else self.mel.shape[0]
        return bands, frames

    def forward(self, windows: torch.Tensor) -> torch.Tensor:
        x = windows.float()
        if any(self.pad):
            x = F.pad(x, self.pad)
        spec = torch.stft(
            x, self.n_fft, STFT_HOP, window=self.window, center=False, return_complex=True
        )
        power = torch.view_as_real(spec).square().sum(-1)  # [m, bins, frames]
        if self.input_repr != "linear":
            power = torch.matmul(self.mel, power)
        # 10 log10 of the magnitude (kapre's "decibel" of an amplitude), via the power.
        db = torch.log10(power.clamp_min(AMIN * AMIN)) * 5.0
        db = db - db.amax(dim=(1, 2), keepdim=True)
        return db.clamp_min(-DYNAMIC_RANGE).unsqueeze(1)


# --- network ---


class OpenL3Net(nn.Module):
    """The audio network on spectrograms [m, 1, bands, frames] -> embeddings [m, size].

    Holds the batch norms folded into the convolutions: `input_scale`/`input_shift` are the first
    batch norm (on the spectrogram, before the zero padding of the first convolution, so it can
    not be folded into it exactly), the others scale and shift the convolution before them.
    """

    def __init__(self, input_repr: str, embedding_size: int):
        super().__init__()
        self.pool = POOLING[input_repr][embedding_size]
        self.register_buffer("input_scale", torch.ones(()))
        self.register_buffer("input_shift", torch.zeros(()))
        convs = []
        channels = 1
        for width in CHANNELS:
            convs.append(nn.Conv2d(channels, width, kernel_size=3, padding=1))
            channels = width
        self.convs = nn.ModuleList(convs)

    def output_size(self, input_shape: tuple[int, int]) -> int:
        """Embedding size for spectrograms of `input_shape` (bands, frames)."""
        height, width = (side // 2 ** len(POOL_AFTER) for side in input_shape)
        return (height // self.pool[0]) * (width // self.pool[1]) * CHANNELS[-1]

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        x = spec * self.input_scale + self.input_shift
        last = len(self.convs) - 1
        for index, conv in enumerate(self.convs):
            x = conv(x)
            # ReLU and max pooling commute: pool first, rectify a quarter of the values.
            if index in POOL_AFTER:
                x = F.max_pool2d(x, 2)
            if index < last:
                x = F.relu_(x)
        x = F.max_pool2d(x, self.pool)
        # Keras flattens height, width, channels.
        return x.permute(0, 2, 3, 1).flatten(1)

    @torch.no_grad()
    def load_folded(self, params: dict[str, torch.Tensor]) -> None:
        """Set the layers from torchopenl3-named parameters, batch norms folded in."""

        def bn(name: str) -> tuple[torch.Tensor, torch.Tensor]:
            scale = params[f"{name}.weight"].double() / torch.sqrt(
                params[f"{name}.running_var"].double() + BN_EPS
            )
            shift = (
                params[f"{name}.bias"].double() - params[f"{name}.running_mean"].double() * scale
            )
            return scale, shift

        scale, shift = bn(BN_NAMES[0])
        self.input_scale.copy_(scale.reshape(()))
        self.input_shift.copy_(shift.reshape(()))
        for index, (conv, name) in enumerate(zip(self.convs, CONV_NAMES, strict=True)):
            weight = params[f"{name}.weight"].double()
            bias = params[f"{name}.bias"].double()
            if index + 1 < len(BN_NAMES):
                scale, shift = bn(BN_NAMES[index + 1])
                weight = weight * scale[:, None, None, None]
                bias = bias * scale + shift
            conv.weight.copy_(weight.float())
            conv.bias.copy_(bias.float())


# --- weights ---


def parameter_shapes() -> dict[str, tuple[int, ...]]:
    """torchopenl3's parameter names and shapes (the front end's buffers aside)."""
    shapes: dict[str, tuple[int, ...]] = {}
    channels = 1
    for bn_name, conv_name, width in zip(BN_NAMES, CONV_NAMES, CHANNELS, strict=True):
        for kind in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{bn_name}.{kind}"] = (channels,)
        shapes[f"{conv_name}.weight"] = (width, channels, 3, 3)
        shapes[f"{conv_name}.bias"] = (width,)
        channels = width
    return shapes


def random_parameters(seed: int = 0) -> dict[str, torch.Tensor]:
    """A fixed He-normal initialisation (Keras' `he_normal`) with identity batch norms."""
    generator = torch.Generator().manual_seed(seed)
    params = {}
    for name, shape in parameter_shapes().items():
        if name.endswith("running_var") or (name.startswith("batch") and name.endswith("weight")):
            params[name] = torch.ones(shape)
        elif len(shape) == 4:
            fan_in = shape[1] * shape[2] * shape[3]
            params[name] = torch.randn(shape, generator=generator) * math.sqrt(2.0 / fan_in)
        else:
            params[name] = torch.zeros(shape)
    return params


def _check(params: dict[str, torch.Tensor], source: Path) -> dict[str, torch.Tensor]:
    out = {}
    for name, shape in parameter_shapes().items():
        if name not in params:
            raise ValueError(f"{source} is not an OpenL3 audio model: it lacks {name}")
        value = torch.as_tensor(
            np.asarray(params[name]) if not torch.is_tensor(params[name]) else params[name]
        )
        if tuple(value.shape) != shape:
            raise ValueError(f"{source}: {name} has shape {tuple(value.shape)}, expected {shape}")
        out[name] = value.float()
    return out


def read_torch(path: Path) -> dict[str, torch.Tensor]:
    """torchopenl3's state dict (possibly nested in a checkpoint or saved from DataParallel)."""
    raw = torch.load(path, map_location="cpu", weights_only=True)
    for key in ("state_dict", "model"):
        if isinstance(raw, dict) and isinstance(raw.get(key), dict):
            raw = raw[key]
    return _check({k.removeprefix("module."): v for k, v in raw.items()}, path)


def read_keras(path: Path) -> dict[str, torch.Tensor]:
    """The openl3 package's Keras weights (HDF5 of `save_weights` or a whole saved model).

    Keras itself matches layers by their order in the file, not by name (the auto-generated
    names differ between Keras versions), so do the same: the layers with batch-norm
    variables and those with a 4-D kernel, in file order, are the eight of each.
    """
    import h5py

    def text(value) -> str:
        return value.decode("utf8") if isinstance(value, bytes) else str(value)

    norms: list[dict[str, np.ndarray]] = []
    convs: list[dict[str, np.ndarray]] = []
    with h5py.File(path, "r") as handle:
        root = handle.get("model_weights", handle)
        if "layer_names" not in root.attrs:
            raise ValueError(f"{path} is not a Keras 2 weights file (no layer_names)")
        for layer in map(text, root.attrs["layer_names"]):
            group = root[layer]
            values = {}
            for weight in map(text, group.attrs.get("weight_names", [])):
                values[weight.rsplit("/", 1)[-1].split(":")[0]] = np.asarray(group[weight])
            if "moving_mean" in values:
                norms.append(values)
            elif values.get("kernel") is not None and values["kernel"].ndim == 4:
                convs.append(values)
    if len(norms) != len(BN_NAMES) or len(convs) != len(CONV_NAMES):
        raise ValueError(
            f"{path} has {len(norms)} batch norms and {len(convs)} convolutions; an OpenL3 "
            f"audio model has {len(BN_NAMES)} of each"
        )
    params: dict[str, torch.Tensor] = {}
    for name, values in zip(BN_NAMES, norms, strict=True):
        size = values["moving_mean"].shape
        params[f"{name}.weight"] = torch.from_numpy(values.get("gamma", np.ones(size)))
        params[f"{name}.bias"] = torch.from_numpy(values.get("beta", np.zeros(size)))
        params[f"{name}.running_mean"] = torch.from_numpy(values["moving_mean"])
        params[f"{name}.running_var"] = torch.from_numpy(values["moving_variance"])
    for name, values in zip(CONV_NAMES, convs, strict=True):
        kernel = values["kernel"]  # [height, width, in, out]
        params[f"{name}.weight"] = torch.from_numpy(
            np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))
        )
        bias = values.get("bias")
        params[f"{name}.bias"] = torch.from_numpy(
            bias if bias is not None else np.zeros(kernel.shape[-1])
        )
    return _check(params, path)


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    with open(path, "rb") as handle:
        is_hdf5 = handle.read(8) == b"\x89HDF\r\n\x1a\n"
    return read_keras(path) if is_hdf5 else read_torch(path)


# --- the model ---


def frame_count(samples: int, hop: int, center: bool = True) -> int:
    """Windows per clip as openl3 counts them: enough to cover every sample, at least one."""
    length = samples + (WINDOW // 2 if center else 0)
    if length <= WINDOW:
        return 1
    return 1 + -(-(length - WINDOW) // hop)


def frame_windows(audio: torch.Tensor, hop: int, center: bool = True) -> torch.Tensor:
    """Overlapping view [n, windows, 48000] of 48 kHz audio [n, samples] (padded, so a copy)."""
    count = frame_count(audio.shape[-1], hop, center)
    left = WINDOW // 2 if center else 0
    right = (count - 1) * hop + WINDOW - left - audio.shape[-1]
    padded = F.pad(audio, (left, max(right, 0)))
    return padded.unfold(-1, WINDOW, hop)[:, :count]


class OpenL3Model(nn.Module):
    def __init__(
        self,
        net: OpenL3Net,
        frontend: Spectrogram,
        *,
        device: str | torch.device | None,
        hop_size: float,
        center: bool,
        batch_frames: int | None,
        precision: str,
        weights_id: str,
        options_id: str,
    ):
        super().__init__()
        self.sample_rate = SAMPLE_RATE
        self.frontend = frontend
        self.net = net.eval()
        # openl3 truncates, so that e.g. hop 0.3 s is 14399 samples there too.
        self.hop = max(1, int(float(hop_size) * SAMPLE_RATE))
        self.center = bool(center)
        self.weights_id = weights_id
        self.options_id = options_id
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if precision == "auto":
            precision = "fp16" if self.device.type == "cuda" else "fp32"
        self.precision = precision
        self.autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
        if batch_frames is None:
            # A few windows keep a CPU's caches warm (on 2 cores 2-4 windows per chunk were
            # 10% faster than 16); a GPU needs many to fill it. Each window needs about 30 MB
            # in float32, half that in float16.
            batch_frames = 128 if self.device.type == "cuda" else 4
        self.batch_frames = max(1, int(batch_frames))
        self._resamplers: dict[int, nn.Module] = {}
        self.to(self.device)
        self.net.to(memory_format=torch.channels_last)
        if self.device.type == "cuda":
            # Every chunk but the last has the same shape: cuDNN times its convolution
            # algorithms once per shape and keeps the fastest.
            torch.backends.cudnn.benchmark = True
        self.scene_embedding_size = self.timestamp_embedding_size = net.output_size(frontend.shape)

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def embed_windows(self, windows: torch.Tensor) -> torch.Tensor:
        """Embeddings [n, frames, d] of windows [n, frames, 48000], `batch_frames` at a time."""
        n, count = windows.shape[:2]
        total = n * count
        out = torch.empty(total, self.timestamp_embedding_size, device=self.device)
        flat = torch.arange(total, device=windows.device)
        for start in range(0, total, self.batch_frames):
            index = flat[start : start + self.batch_frames]
            # Gathering from the overlapping view copies only this chunk's windows.
            chunk = windows[index // count, index % count]
            spec = self.frontend(chunk).contiguous(memory_format=torch.channels_last)
            with self.autocast():
                out[start : start + len(index)] = self.net(spec).float()
        return out.reshape(n, count, -1)

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if audio.ndim != 2:
            raise ValueError("audio must be a 2-D tensor [n_sounds, n_samples]")
        audio = audio.to(self.device, torch.float32)
        emb = self.embed_windows(frame_windows(audio, self.hop, self.center))
        count = emb.shape[1]
        # Centred windows: window i is centred on sample i * hop of the clip.
        starts = torch.arange(count, device=emb.device, dtype=torch.float64) * self.hop
        centres = starts if self.center else starts + WINDOW / 2
        stamps = (centres * 1000.0 / SAMPLE_RATE).float()
        return emb, stamps.expand(audio.shape[0], -1)

    def resample(self, audio: torch.Tensor, input_rate: int) -> torch.Tensor:
        """Audio [n, samples] at `input_rate` -> 48 kHz on the model's device (julius)."""
        if int(input_rate) == SAMPLE_RATE:
            return audio
        if input_rate not in self._resamplers:
            import julius

            self._resamplers[input_rate] = julius.ResampleFrac(int(input_rate), SAMPLE_RATE).to(
                self.device
            )
        return self._resamplers[input_rate](audio)


def load_model(
    model_file_path: str = "",
    *,
    device: str | None = None,
    input_repr: str = "mel256",
    content_type: str = "music",
    embedding_size: int = 512,
    hop_size: float = 0.1,
    center: bool = True,
    batch_frames: int | None = None,
    mel_norm: str = "slaney",
    precision: str = "auto",
) -> OpenL3Model:
    """OpenL3 from a Keras .h5 or torchopenl3 .pth file; `"random"` gives a fixed random init."""
    if input_repr not in INPUT_REPRS:
        raise ValueError(f"input_repr must be one of {INPUT_REPRS}, not {input_repr!r}")
    if content_type not in CONTENT_TYPES:
        raise ValueError(f"content_type must be one of {CONTENT_TYPES}, not {content_type!r}")
    embedding_size = int(embedding_size)
    if embedding_size not in EMBEDDING_SIZES:
        raise ValueError(f"embedding_size must be one of {EMBEDDING_SIZES}, not {embedding_size}")
    if mel_norm not in MEL_NORMS:
        raise ValueError(f"mel_norm must be one of {MEL_NORMS}, not {mel_norm!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, not {precision!r}")
    if not float(hop_size) > 0:
        raise ValueError(f"hop_size must be positive, not {hop_size}")
    if model_file_path == "random":
        params = random_parameters()
        weights_id = "random"
    else:
        path = Path(model_file_path or default_weights_file(input_repr, content_type))
        if not path.is_file():
            raise WeightsMissing(f"OpenL3 weights file {path} does not exist. {WEIGHTS_HELP}")
        params = read_weights(path)
        weights_id = file_digest(path)
    net = OpenL3Net(input_repr, embedding_size)
    net.load_folded(params)
    hop = max(1, int(float(hop_size) * SAMPLE_RATE))
    options_id = f"{input_repr}-{content_type}-{embedding_size}-hop{hop / SAMPLE_RATE:g}"
    if not center:
        options_id += "-uncentred"
    if mel_norm != "slaney" and input_repr != "linear":
        options_id += f"-{mel_norm}mel"
    return OpenL3Model(
        net,
        Spectrogram(input_repr, mel_norm),
        device=device,
        hop_size=hop_size,
        center=center,
        batch_frames=batch_frames,
        precision=precision,
        weights_id=weights_id,
        options_id=options_id,
    )


def get_timestamp_embeddings(
    audio: torch.Tensor, model: OpenL3Model
) -> tuple[torch.Tensor, torch.Tensor]:
    """Embeddings [n, frames, d] and window-centre times [n, frames] in ms of 48 kHz audio."""
    with torch.inference_mode():
        return model(audio)


def get_scene_embeddings(audio: torch.Tensor, model: OpenL3Model) -> torch.Tensor:
    emb, _ = get_timestamp_embeddings(audio, model)
    return emb.mean(dim=1)


def embed_batch(audio: np.ndarray, input_rate: int, model: OpenL3Model) -> np.ndarray:
    """Frame embeddings [n, frames, d] (float32) of clips [n, samples] at `input_rate`."""
    x = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(audio), dtype=np.float32))
    with torch.inference_mode():
        x = model.resample(x.to(model.device), input_rate)
        emb, _ = model(x)
    return emb.cpu().numpy()
