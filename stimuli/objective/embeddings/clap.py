"""The LAION-CLAP audio encoder (Wu, Chen et al., "Large-scale Contrastive Language-Audio
Pretraining with Feature Fusion and Keyword-to-Caption Augmentation", ICASSP 2023).

CLAP places audio and text in one 512-d space, so FAD on it measures what a sound is about
beside how it sounds, and the text-prompt study can score a clip against its prompt. The audio
branch is HTSAT (a Swin transformer over the log-mel spectrogram folded into a 256 x 256
image) and a two-layer projection to the joint space. It is built here under the parameter
names of the authors' `laion_clap` checkpoints, so their released files load as they are (a
training dict whose `state_dict` holds `module.audio_branch.*`, `module.audio_projection.*`,
the text branch and the rest, of which the audio parts are taken):

- `630k-audioset-best.pt`: HTSAT-tiny (96 wide, depths 2-2-6-2), trained on LAION-Audio-630K
  and AudioSet, general sounds (`variant="htsat-tiny"`, the default);
- `music_audioset_epoch_15_esc_90.14.pt`: HTSAT-base (128 wide, depths 2-2-12-2), trained with
  music added (`variant="htsat-base"`).

The fusion checkpoints (`*-fusion-best.pt`) embed long audio through another path and are
refused. Input at 48 kHz, as the release's `get_audio_embedding_from_data` takes numpy audio:
quantised to 16 bits, clips shorter than 10 s repeated whole and zero-padded to 10 s, a
torchlibrosa log-mel (1,024-point windows every 480 samples, 64 bands 50-14,000 Hz, the
checkpoint's own DFT kernels and mel matrix), the checkpoint's batch norm over bands, the
1,001 frames stretched to 1,024 (bicubic) and cut into four 256-frame strips stacked along
frequency. The embedding: the mean of HTSAT's last tokens, projected, L2-normalised; 512-d.
Clips longer than 10 s are embedded in 10 s windows (the last one ending with the clip) instead
of the release's random 10 s crop, so an embedding never depends on a draw: one frame per
window. Audio at other rates is resampled on torch (julius). HEAR module.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import WeightsMissing, file_digest
from .panns import LogmelFilterBank, Spectrogram

NEEDS_WEIGHTS = True
SAMPLE_RATE = 48_000
EMBEDDING_SIZE = 512
CLASSES = 527  # AudioSet
CLIP_SAMPLES = 10 * SAMPLE_RATE
N_FFT, HOP, MELS, FMIN, FMAX = 1024, 480, 64, 50, 14_000
SPEC, FREQ_RATIO, PATCH, WINDOW = 256, 4, 4, 8
# variant -> (width, depths, released file)
VARIANTS = {
    "htsat-tiny": (96, (2, 2, 6, 2), "630k-audioset-best.pt"),
    "htsat-base": (128, (2, 2, 12, 2), "music_audioset_epoch_15_esc_90.14.pt"),
}
HEADS = (4, 8, 16, 32)
WEIGHTS_HELP = (
    "CLAP needs a LAION-CLAP checkpoint without feature fusion: 630k-audioset-best.pt "
    "(variant htsat-tiny) or music_audioset_epoch_15_esc_90.14.pt (variant htsat-base), "
    "published on Hugging Face in the lukewys/laion_clap repository (LAION-AI/CLAP on GitHub)."
)


def default_weights_file(variant: str = "htsat-tiny", **options) -> str:
    return _variant(variant)[2]


def _variant(name: str) -> tuple:
    if name not in VARIANTS:
        raise ValueError(f"CLAP variant {name!r}: the variants are {', '.join(VARIANTS)}")
    return VARIANTS[name]


def _windows_of(x: torch.Tensor, size: int) -> torch.Tensor:
    """[n, H, W, C] -> [n * windows, size * size, C], windows in row-major order."""
    n, h, w, c = x.shape
    x = x.view(n, h // size, size, w // size, size, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, size * size, c)


def _from_windows(x: torch.Tensor, size: int, h: int, w: int) -> torch.Tensor:
    c = x.shape[-1]
    x = x.view(-1, h // size, w // size, size, size, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, h, w, c)


def relative_position_index(size: int) -> torch.Tensor:
    """Index into the (2 size - 1)^2 bias table of each pair of positions in a window."""
    coords = torch.stack(torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij"))
    coords = coords.flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (size - 1)
    return rel[..., 0] * (2 * size - 1) + rel[..., 1]


def shifted_window_mask(resolution: int, size: int, shift: int) -> torch.Tensor:
    """-100 between positions that the cyclic shift brought from different regions, else 0."""
    regions = torch.zeros(1, resolution, resolution, 1)
    cuts = (slice(0, -size), slice(-size, -shift), slice(-shift, None))
    label = 0
    for rows in cuts:
        for cols in cuts:
            regions[:, rows, cols, :] = label
            label += 1
    windows = _windows_of(regions, size)[..., 0]
    differ = windows[:, None, :] - windows[:, :, None]
    return torch.where(differ != 0, -100.0, 0.0)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, heads: int, size: int):
        super().__init__()
        self.heads = heads
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * size - 1) ** 2, heads))
        self.register_buffer("relative_position_index", relative_position_index(size))
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        windows, tokens, dim = x.shape
        q, k, v = self.qkv(x).reshape(windows, tokens, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        bias = self.relative_position_bias_table[self.relative_position_index.view(-1)]
        bias = bias.view(tokens, tokens, -1).permute(2, 0, 1)[None]
        if mask is not None:
            per_image = mask.shape[0]
            bias = (bias[:, None] + mask[None, :, None]).expand(
                windows // per_image, -1, -1, -1, -1
            )
            bias = bias.reshape(windows, self.heads, tokens, tokens)
        x = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.proj(x.transpose(1, 2).reshape(windows, tokens, dim))


class Mlp(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, resolution: int, shifted: bool):
        super().__init__()
        self.resolution = resolution
        # A window as large as the map cannot shift; it covers the map whole.
        self.size = min(WINDOW, resolution)
        self.shift = WINDOW // 2 if shifted and resolution > WINDOW else 0
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, self.size)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim)
        if self.shift:
            self.register_buffer(
                "attn_mask", shifted_window_mask(resolution, self.size, self.shift)
            )
        else:
            self.attn_mask = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, tokens, dim = x.shape
        side = self.resolution
        y = self.norm1(x).view(n, side, side, dim)
        if self.shift:
            y = torch.roll(y, shifts=(-self.shift, -self.shift), dims=(1, 2))
        y = self.attn(_windows_of(y, self.size), self.attn_mask)
        y = _from_windows(y, self.size, side, side)
        if self.shift:
            y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + y.reshape(n, tokens, dim)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim: int, resolution: int):
        super().__init__()
        self.resolution = resolution
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, dim = x.shape
        x = x.view(n, self.resolution, self.resolution, dim)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.reduction(self.norm(x.reshape(n, -1, 4 * dim)))


class BasicLayer(nn.Module):
    def __init__(self, dim: int, depth: int, heads: int, resolution: int, merge: bool):
        super().__init__()
        self.blocks = nn.ModuleList(
            SwinBlock(dim, heads, resolution, shifted=i % 2 == 1) for i in range(depth)
        )
        self.downsample = PatchMerging(dim, resolution) if merge else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.downsample(x) if self.downsample is not None else x


class PatchEmbed(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Conv2d(1, width, PATCH, stride=PATCH)
        self.norm = nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x).flatten(2).transpose(1, 2))


class HTSAT(nn.Module):
    """HTSAT by the released names: 10 s at 48 kHz [n, 480000] -> pooled tokens [n, 8 width].
    `n_fft`: the points of its DFT kernels (1,024 in every release; a smaller stand-in's may
    have fewer)."""

    def __init__(self, width: int, depths: tuple[int, ...], n_fft: int = N_FFT):
        super().__init__()
        self.spectrogram_extractor = Spectrogram(n_fft, HOP)
        self.logmel_extractor = LogmelFilterBank(n_fft // 2 + 1, MELS)
        self.bn0 = nn.BatchNorm2d(MELS)
        self.patch_embed = PatchEmbed(width)
        side = SPEC // PATCH
        self.layers = nn.ModuleList(
            BasicLayer(width * 2**i, depth, HEADS[i], side // 2**i, merge=i < len(depths) - 1)
            for i, depth in enumerate(depths)
        )
        features = width * 2 ** (len(depths) - 1)
        self.norm = nn.LayerNorm(features)
        # AudioSet heads, kept so the checkpoint loads whole; the embedding does not use them.
        self.tscam_conv = nn.Conv2d(features, CLASSES, (2, 3), padding=(0, 1))
        self.head = nn.Linear(CLASSES, CLASSES)

    def image(self, audio: torch.Tensor) -> torch.Tensor:
        """The batch-normalised log-mel folded into the 256 x 256 image HTSAT takes."""
        x = self.logmel_extractor(self.spectrogram_extractor(audio))  # [n, 1, frames, 64]
        x = self.bn0(x.transpose(1, 3)).transpose(1, 3)
        frames = SPEC * FREQ_RATIO
        if x.shape[2] < frames:
            x = F.interpolate(x, (frames, MELS), mode="bicubic", align_corners=True)
        x = x.transpose(2, 3)  # [n, 1, 64, 1024]
        x = x.reshape(x.shape[0], 1, MELS, FREQ_RATIO, frames // FREQ_RATIO).transpose(2, 3)
        return x.reshape(x.shape[0], 1, SPEC, SPEC)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(self.image(audio))
        for layer in self.layers:
            x = layer(x)
        return self.norm(x).mean(dim=1)


class ClapAudio(nn.Module):
    """The audio side of the released CLAP model: `audio_branch` and `audio_projection`."""

    def __init__(self, variant: str = "htsat-tiny"):
        super().__init__()
        width, depths, _ = _variant(variant)
        self.audio_branch = HTSAT(width, depths)
        features = width * 2 ** (len(depths) - 1)
        self.audio_projection = nn.Sequential(
            nn.Linear(features, EMBEDDING_SIZE),
            nn.ReLU(),
            nn.Linear(EMBEDDING_SIZE, EMBEDDING_SIZE),
        )

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """10 s windows [n, 480000] -> unit-length embeddings [n, 512]."""
        return F.normalize(self.audio_projection(self.audio_branch(audio)), dim=-1)


def quantise(audio: torch.Tensor) -> torch.Tensor:
    """The 16-bit round trip the release applies to numpy audio before embedding it."""
    return (torch.clamp(audio, -1.0, 1.0) * 32767.0).to(torch.int16).float() / 32767.0


def clip_windows(audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[n, samples] -> ([n, windows, 480000], window centres in ms): short clips repeated."""
    n, length = audio.shape
    if length <= CLIP_SAMPLES:
        repeated = audio.repeat(1, CLIP_SAMPLES // length)
        padded = F.pad(repeated, (0, CLIP_SAMPLES - repeated.shape[1]))
        return padded[:, None], torch.full((n, 1), length / SAMPLE_RATE * 500.0)
    count = -(-length // CLIP_SAMPLES)
    starts = [min(i * CLIP_SAMPLES, length - CLIP_SAMPLES) for i in range(count)]
    windows = torch.stack([audio[:, s : s + CLIP_SAMPLES] for s in starts], dim=1)
    centres = torch.tensor([(s + CLIP_SAMPLES / 2) * 1000.0 / SAMPLE_RATE for s in starts])
    return windows, centres.expand(n, -1)


class ClapModel(nn.Module):
    def __init__(self, net: ClapAudio, variant: str, *, weights_id: str, device=None):
        super().__init__()
        self.net = net.eval()
        self.sample_rate = SAMPLE_RATE
        self.timestamp_embedding_size = self.scene_embedding_size = EMBEDDING_SIZE
        self.options_id = variant
        self.weights_id = weights_id
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.to(self.device)

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        windows, stamps = clip_windows(quantise(audio.float().to(self.device)))
        n, count, _ = windows.shape
        emb = self.net(windows.reshape(n * count, CLIP_SAMPLES)).reshape(n, count, -1)
        return emb, stamps.to(emb.device)


def fusion_refusal(params: dict, source: str) -> None:
    if any(".fusion_model." in k or k.startswith("audio_branch.mel_conv") for k in params):
        raise ValueError(
            f"{source} is a CLAP checkpoint with feature fusion, which this platform does not "
            f"embed with. {WEIGHTS_HELP}"
        )


def load_audio_net(path: str, variant: str) -> ClapAudio:
    from .released import load_released, read_state_dict

    params = read_state_dict(path)
    fusion_refusal(params, path)
    return load_released(
        lambda: ClapAudio(variant), params, source=path, label=f"CLAP {variant}",
        hint=f"is it another variant? {WEIGHTS_HELP}",
    )  # fmt: skip


def random_audio_net(variant: str) -> ClapAudio:
    """A fixed random init whose front end is a true STFT and mel filter bank."""
    from .released import random_init

    net = random_init(lambda: ClapAudio(variant))
    fill_front_end(net.audio_branch.spectrogram_extractor, net.audio_branch.logmel_extractor)
    return net


def fill_front_end(spectrogram: Spectrogram, logmel: LogmelFilterBank) -> None:
    """torchlibrosa's kernels: DFT rows times a periodic Hann window; librosa's Slaney mel."""
    import librosa
    import numpy as np

    window = np.hanning(N_FFT + 1)[:-1]
    angle = 2 * np.pi * np.arange(N_FFT // 2 + 1)[:, None] * np.arange(N_FFT)[None, :] / N_FFT
    with torch.no_grad():
        real = torch.tensor(np.cos(angle) * window, dtype=torch.float32)[:, None, :]
        imag = torch.tensor(-np.sin(angle) * window, dtype=torch.float32)[:, None, :]
        spectrogram.stft.conv_real.weight.copy_(real)
        spectrogram.stft.conv_imag.weight.copy_(imag)
        mel = librosa.filters.mel(sr=SAMPLE_RATE, n_fft=N_FFT, n_mels=MELS, fmin=FMIN, fmax=FMAX)
        logmel.melW.copy_(torch.tensor(mel.T, dtype=torch.float32))


def load_model(
    model_file_path: str = "", *, device: str | None = None, variant: str = "htsat-tiny"
) -> ClapModel:
    """The CLAP audio encoder from a released checkpoint; `"random"` gives a fixed random init."""
    _variant(variant)
    if model_file_path == "random":
        return ClapModel(random_audio_net(variant), variant, weights_id="random", device=device)
    if not model_file_path:
        raise WeightsMissing(f"CLAP {variant} needs its checkpoint. {WEIGHTS_HELP}")
    net = load_audio_net(model_file_path, variant)
    weights_id = file_digest(model_file_path)
    return ClapModel(net, variant, weights_id=weights_id, device=device)


def get_timestamp_embeddings(
    audio: torch.Tensor, model: ClapModel
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode():
        return model(audio)


def get_scene_embeddings(audio: torch.Tensor, model: ClapModel) -> torch.Tensor:
    with torch.inference_mode():
        return F.normalize(model(audio)[0].mean(dim=1), dim=-1)


def embed_batch(audio, input_rate: int, model: ClapModel):
    """Embeddings [n, windows, 512] of float32 audio [n, samples] at any rate."""
    import numpy as np

    from .vggish import resample

    x = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(audio), dtype=np.float32))
    with torch.inference_mode():
        x = resample(x.to(model.device), input_rate, SAMPLE_RATE)
        emb, _ = model(x)
    return emb.float().cpu().numpy()
