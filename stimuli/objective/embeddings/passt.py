"""PaSST (Koutini et al., "Efficient Training of Audio Transformers with Patchout", 2022).

DCASE 2024 Task 7 evaluated Foley systems with FAD on PaSST beside PANNs and OpenL3. The model
is the one of the authors' HEAR 2021 package `hear21passt` (`passt_s_swa_p16_128_ap476`):
a ViT of 12 blocks, 768 wide, 12 heads, on 16 x 16 patches every 10 bins and 10 frames of a
128-band log-mel spectrogram at 32 kHz, with a class and a distillation token; trained on
AudioSet (mAP 0.476, stochastic weight averaging). The network is built here under the
parameter names of the authors' code, so their released checkpoint
`passt-s-f128-p16-s10-ap.476-swa.pt` loads as it is (a bare state dict, or nested under
`model`/`state_dict`).

The front end has no parameters in the checkpoint; it is the release's, rebuilt: pre-emphasis
(y[t] = x[t+1] - 0.97 x[t]), an STFT of 1,024 points over an 800-sample symmetric Hann window
every 320 samples (centred, reflect padding), power through 128 triangular mel bands on
Kaldi's mel scale from 0 to 15 kHz (the 1,024-point transform's 513th bin unused), then
(log(mel + 1e-5) + 4.5) / 5.

Embeddings, as the release computes them: the mean of the class and distillation tokens after
the last block's layer norm, 768-d. By default one per clip (the release's scene embedding:
the whole clip in one pass up to 10 s; longer clips in 10 s windows every 2.5 s over the clip
padded by 5 s each side, averaged). `frames=True` gives the release's timestamp embeddings
instead: each 160 ms window, every 50 ms, through the network. `logits=True` puts the 527
AudioSet logits before the embedding (1,295-d, the release's `mode="all"` of its HEAR entry).
Audio at other rates is resampled on torch (julius). HEAR module; `load_model` takes options.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import WeightsMissing, file_digest

NEEDS_WEIGHTS = True
SAMPLE_RATE = 32_000
EMBEDDING_SIZE = 768
CLASSES = 527  # AudioSet
WEIGHTS_FILE = "passt-s-f128-p16-s10-ap.476-swa.pt"
WEIGHTS_HELP = (
    "PaSST needs the authors' released checkpoint passt-s-f128-p16-s10-ap.476-swa.pt (the model "
    "passt_s_swa_p16_128_ap476 of the hear21passt package), published on GitHub in the "
    "kkoutini/PaSST repository's release v0.0.1-audioset."
)
# The release's front end and windows (hear21passt.base.get_basic_model and its wrapper).
N_FFT, WIN, HOP, MELS, FMAX = 1024, 800, 320, 128, 15_000.0
MAX_WINDOW, SCENE_HOP = 10 * SAMPLE_RATE, SAMPLE_RATE * 5 // 2
STAMP_WINDOW, STAMP_HOP = SAMPLE_RATE * 160 // 1000, SAMPLE_RATE * 50 // 1000
# The network: patches, strides, and the grid of the 998 frames it was trained on.
WIDTH, DEPTH, HEADS, PATCH, STRIDE, GRID = 768, 12, 12, 16, 10, (12, 99)


def default_weights_file(**options) -> str:
    return WEIGHTS_FILE


def kaldi_mel_banks(bands: int, n_fft: int, rate: float, fmin: float, fmax: float) -> torch.Tensor:
    """Triangular bands [bands, n_fft // 2] equally spaced on Kaldi's mel scale, 1127 ln(1 + f/700)."""

    def mel(f):
        return 1127.0 * (torch.log1p(f / 700.0) if torch.is_tensor(f) else math.log1p(f / 700.0))

    low, high = mel(fmin), mel(fmax)
    delta = (high - low) / (bands + 1)
    index = torch.arange(bands, dtype=torch.float32)[:, None]
    left, centre, right = low + index * delta, low + (index + 1) * delta, low + (index + 2) * delta
    bins = mel(rate / n_fft * torch.arange(n_fft // 2, dtype=torch.float32))[None, :]
    rising, falling = (bins - left) / (centre - left), (right - bins) / (right - centre)
    return torch.clamp(torch.minimum(rising, falling), min=0.0)


class MelFrontEnd(nn.Module):
    """Audio [n, samples] at 32 kHz -> normalised log-mel [n, 128, frames], as the release's."""

    def __init__(self):
        super().__init__()
        banks = F.pad(kaldi_mel_banks(MELS, N_FFT, SAMPLE_RATE, 0.0, FMAX), (0, 1))
        self.register_buffer("banks", banks, persistent=False)
        self.register_buffer("window", torch.hann_window(WIN, periodic=False), persistent=False)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        x = audio[:, 1:] - 0.97 * audio[:, :-1]
        spec = torch.stft(
            x, N_FFT, hop_length=HOP, win_length=WIN, window=self.window, center=True,
            pad_mode="reflect", return_complex=True,
        )  # fmt: skip
        power = spec.real**2 + spec.imag**2
        return (torch.log(self.banks @ power + 1e-5) + 4.5) / 5.0


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(1, WIDTH, PATCH, stride=STRIDE)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, tokens, width = x.shape
        q, k, v = self.qkv(x).reshape(n, tokens, 3, HEADS, width // HEADS).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(n, tokens, width))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, 4 * WIDTH)
        self.fc2 = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH, eps=1e-6)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(WIDTH, eps=1e-6)
        self.mlp = Mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PaSST(nn.Module):
    """The transformer by the released names: log-mel [n, 1, 128, frames] -> (logits, embedding)."""

    def __init__(self):
        super().__init__()
        self.patch_embed = PatchEmbed()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, WIDTH))
        self.dist_token = nn.Parameter(torch.zeros(1, 1, WIDTH))
        self.new_pos_embed = nn.Parameter(torch.zeros(1, 2, WIDTH))
        self.freq_new_pos_embed = nn.Parameter(torch.zeros(1, WIDTH, GRID[0], 1))
        self.time_new_pos_embed = nn.Parameter(torch.zeros(1, WIDTH, 1, GRID[1]))
        self.blocks = nn.Sequential(*(Block() for _ in range(DEPTH)))
        self.norm = nn.LayerNorm(WIDTH, eps=1e-6)
        self.head = nn.Sequential(nn.LayerNorm(WIDTH), nn.Linear(WIDTH, CLASSES))
        self.head_dist = nn.Linear(WIDTH, CLASSES)

    def forward(self, mel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.patch_embed.proj(mel)  # [n, 768, 12, patches in time]
        if x.shape[-1] > GRID[1]:
            raise ValueError(f"PaSST takes at most 10 s at once, got {x.shape[-1]} time patches")
        x = x + self.time_new_pos_embed[..., : x.shape[-1]] + self.freq_new_pos_embed
        x = x.flatten(2).transpose(1, 2)
        n = x.shape[0]
        tokens = (
            self.cls_token.expand(n, -1, -1) + self.new_pos_embed[:, :1],
            self.dist_token.expand(n, -1, -1) + self.new_pos_embed[:, 1:],
        )
        x = self.norm(self.blocks(torch.cat((*tokens, x), dim=1)))
        embedding = (x[:, 0] + x[:, 1]) / 2
        return self.head(embedding), embedding


def _windows(audio: torch.Tensor, window: int, hop: int) -> torch.Tensor:
    """[n, samples] -> [n, windows, window]: reflect-padded by half a window, as the release."""
    pad = window // 2
    padded = F.pad(audio[:, None, :], (pad, pad), mode="reflect")[:, 0]
    return padded.unfold(1, window, hop)


class PasstModel(nn.Module):
    def __init__(self, net: PaSST, *, frames: bool, logits: bool, weights_id: str, device=None):
        super().__init__()
        self.mel = MelFrontEnd()
        self.net = net.eval()
        self.sample_rate = SAMPLE_RATE
        self.frames, self.logits = bool(frames), bool(logits)
        size = EMBEDDING_SIZE + (CLASSES if logits else 0)
        self.timestamp_embedding_size = self.scene_embedding_size = size
        self.options_id = f"{'frames' if frames else 'clip'}{'-logits' if logits else ''}"
        self.weights_id = weights_id
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.to(self.device)

    def embed_audio(self, audio: torch.Tensor) -> torch.Tensor:
        """[n, samples] of at most 10 s -> [n, size]."""
        logits, embedding = self.net(self.mel(audio)[:, None])
        return torch.cat((logits, embedding), dim=1) if self.logits else embedding

    def _stamped(self, audio: torch.Tensor, window: int, hop: int):
        segments = _windows(audio, window, hop)
        n, count, _ = segments.shape
        emb = self.embed_audio(segments.reshape(n * count, window)).reshape(n, count, -1)
        stamps = torch.arange(count, device=audio.device, dtype=torch.float32) * hop
        return emb, (stamps * 1000.0 / SAMPLE_RATE).expand(n, -1)

    def scene(self, audio: torch.Tensor) -> torch.Tensor:
        if audio.shape[1] <= MAX_WINDOW:
            return self.embed_audio(audio)
        return self._stamped(audio, MAX_WINDOW, SCENE_HOP)[0].mean(dim=1)

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        audio = audio.float().to(self.device)
        if self.frames:
            return self._stamped(audio, STAMP_WINDOW, STAMP_HOP)
        middle = audio.shape[1] / SAMPLE_RATE * 500.0
        stamps = torch.full((audio.shape[0], 1), middle, device=audio.device)
        return self.scene(audio)[:, None, :], stamps


def load_model(
    model_file_path: str = "",
    *,
    device: str | None = None,
    frames: bool = False,
    logits: bool = False,
) -> PasstModel:
    """PaSST from its released checkpoint; `"random"` gives a fixed random init."""
    from .released import load_released, random_init, read_state_dict

    if model_file_path == "random":
        net = random_init(PaSST)
        return PasstModel(net, frames=frames, logits=logits, weights_id="random", device=device)
    if not model_file_path:
        raise WeightsMissing(f"PaSST needs its checkpoint. {WEIGHTS_HELP}")
    net = load_released(
        PaSST, read_state_dict(model_file_path), source=model_file_path,
        label="PaSST passt_s_swa_p16_128_ap476", hint=WEIGHTS_HELP,
    )  # fmt: skip
    weights_id = file_digest(model_file_path)
    return PasstModel(net, frames=frames, logits=logits, weights_id=weights_id, device=device)


def get_timestamp_embeddings(
    audio: torch.Tensor, model: PasstModel
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode():
        return model(audio)


def get_scene_embeddings(audio: torch.Tensor, model: PasstModel) -> torch.Tensor:
    with torch.inference_mode():
        return model.scene(audio.float().to(model.device))


def embed_batch(audio, input_rate: int, model: PasstModel):
    """Embeddings [n, frames, size] of float32 audio [n, samples] at any rate."""
    import numpy as np

    from .vggish import resample

    x = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(audio), dtype=np.float32))
    with torch.inference_mode():
        x = resample(x.to(model.device), input_rate, SAMPLE_RATE)
        emb, _ = model(x)
    return emb.float().cpu().numpy()
