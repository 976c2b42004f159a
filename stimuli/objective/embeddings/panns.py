"""PANNs (Kong et al. 2020): CNN14 at 32 kHz and 16 kHz, and Wavegram-Logmel-CNN14.

A study of the DCASE 2023 Task 7 ratings (arXiv 2403.17508) found FAD on PANNs' embeddings,
Wavegram-Logmel's above all, agreeing with the listeners far better than VGGish; DCASE 2024
Task 7 evaluated with PANNs too. The networks are built here with the parameter names of the
authors' `audioset_tagging_cnn` / `panns_inference` code, so their released checkpoints load as
they are (a dict whose `model` holds the state dict):

- `Cnn14_mAP=0.431.pth`: CNN14, 32 kHz, 1,024-point windows every 320 samples, 64 mel bands
  50-14,000 Hz (`variant="cnn14"`);
- `Cnn14_16k_mAP=0.438.pth`: CNN14, 16 kHz, 512 every 160, 64 bands 50-8,000 Hz
  (`variant="cnn14-16k"`);
- `Wavegram_Logmel_Cnn14_mAP=0.439.pth`: the log-mel CNN14 beside a learnt front end on the
  waveform (the wavegram), 32 kHz (`variant="wavegram-logmel"`).

The front end is torchlibrosa's as the checkpoints hold it: the STFT is a convolution with the
checkpoint's own `conv_real`/`conv_imag` kernels (a Hann window folded in) on reflect-padded
audio, power through the checkpoint's mel matrix `melW`, then 10 log10 (clamped at 1e-10).

Embeddings: by default each clip's 2,048-d `embedding` (the fc1 layer after max + mean pooling
over time, as fadtk and kadtk take it): one per clip. `frames=True` gives the 2,048 channels of
the last convolutional block per time step (about 0.32 s each) instead, for frame-level FAD.
Audio at other rates is resampled on torch (julius). HEAR module; `load_model` takes options.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import WeightsMissing, file_digest

NEEDS_WEIGHTS = True
EMBEDDING_SIZE = 2048
CLASSES = 527  # AudioSet
# variant -> (sample rate, window, hop, mel bins, fmin, fmax, released file)
VARIANTS = {
    "cnn14": (32_000, 1024, 320, 64, 50, 14_000, "Cnn14_mAP=0.431.pth"),
    "cnn14-16k": (16_000, 512, 160, 64, 50, 8_000, "Cnn14_16k_mAP=0.438.pth"),
    "wavegram-logmel": (32_000, 1024, 320, 64, 50, 14_000, "Wavegram_Logmel_Cnn14_mAP=0.439.pth"),
}
WEIGHTS_HELP = (
    "PANNs need the authors' released checkpoint of the variant: Cnn14_mAP=0.431.pth, "
    "Cnn14_16k_mAP=0.438.pth or Wavegram_Logmel_Cnn14_mAP=0.439.pth, published on Zenodo "
    "(record 3987831, 'PANNs: Large-Scale Pretrained Audio Neural Networks')."
)


def default_weights_file(variant: str = "cnn14", **options) -> str:
    return _variant(variant)[6]


def _variant(name: str) -> tuple:
    if name not in VARIANTS:
        raise ValueError(f"PANNs variant {name!r}: the variants are {', '.join(VARIANTS)}")
    return VARIANTS[name]


class ConvBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor, pool: tuple[int, int] = (2, 2)) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return F.avg_pool2d(x, kernel_size=pool)


class ConvPreWavBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = nn.Conv1d(in_channels, out_channels, 3, padding=1, bias=False)
        self.conv2 = nn.Conv1d(out_channels, out_channels, 3, dilation=2, padding=2, bias=False)
        self.bn1 = nn.BatchNorm1d(out_channels)
        self.bn2 = nn.BatchNorm1d(out_channels)

    def forward(self, x: torch.Tensor, pool: int) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        return F.max_pool1d(x, kernel_size=pool)


class _Conv1dKernel(nn.Module):
    """Holds an STFT kernel under the name torchlibrosa gives it (`conv_real.weight`)."""

    def __init__(self, bins: int, n_fft: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(bins, 1, n_fft), requires_grad=False)


class _Stft(nn.Module):
    def __init__(self, n_fft: int):
        super().__init__()
        self.conv_real = _Conv1dKernel(n_fft // 2 + 1, n_fft)
        self.conv_imag = _Conv1dKernel(n_fft // 2 + 1, n_fft)


class Spectrogram(nn.Module):
    """Power spectrogram [n, 1, frames, bins] by the checkpoint's DFT kernels, centred frames."""

    def __init__(self, n_fft: int, hop: int):
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.stft = _Stft(n_fft)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        x = F.pad(audio[:, None, :], (self.n_fft // 2, self.n_fft // 2), mode="reflect")
        real = F.conv1d(x, self.stft.conv_real.weight, stride=self.hop)
        imag = F.conv1d(x, self.stft.conv_imag.weight, stride=self.hop)
        return (real**2 + imag**2)[:, None].transpose(2, 3)


class LogmelFilterBank(nn.Module):
    def __init__(self, bins: int, mels: int):
        super().__init__()
        self.melW = nn.Parameter(torch.zeros(bins, mels), requires_grad=False)

    def forward(self, power: torch.Tensor) -> torch.Tensor:
        return 10.0 * torch.log10(torch.clamp(power @ self.melW, min=1e-10))


class Cnn14(nn.Module):
    """CNN14, and with `wavegram` its Wavegram-Logmel form, by the released parameter names."""

    def __init__(self, n_fft: int, hop: int, mels: int, *, wavegram: bool = False):
        super().__init__()
        self.wavegram = wavegram
        if wavegram:
            self.pre_conv0 = nn.Conv1d(1, 64, 11, stride=5, padding=5, bias=False)
            self.pre_bn0 = nn.BatchNorm1d(64)
            self.pre_block1 = ConvPreWavBlock(64, 64)
            self.pre_block2 = ConvPreWavBlock(64, 128)
            self.pre_block3 = ConvPreWavBlock(128, 128)
            self.pre_block4 = ConvBlock(4, 64)
        self.spectrogram_extractor = Spectrogram(n_fft, hop)
        self.logmel_extractor = LogmelFilterBank(n_fft // 2 + 1, mels)
        self.bn0 = nn.BatchNorm2d(mels)
        widths = [1, 64, 128, 256, 512, 1024, 2048]
        for i in range(1, 7):
            inputs = 128 if wavegram and i == 2 else widths[i - 1]
            setattr(self, f"conv_block{i}", ConvBlock(inputs, widths[i]))
        self.fc1 = nn.Linear(2048, 2048)
        self.fc_audioset = nn.Linear(2048, CLASSES)

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Audio [n, samples] -> (frame features [n, frames, 2048], embedding [n, 2048])."""
        x = self.logmel_extractor(self.spectrogram_extractor(audio))
        x = self.bn0(x.transpose(1, 3)).transpose(1, 3)
        x = self.conv_block1(x)
        if self.wavegram:
            a = F.relu(self.pre_bn0(self.pre_conv0(audio[:, None, :])))
            a = self.pre_block3(self.pre_block2(self.pre_block1(a, 4), 4), 4)
            a = a.reshape(a.shape[0], -1, 32, a.shape[-1]).transpose(2, 3)
            a = self.pre_block4(a, (2, 1))
            # Lengths that are not whole hops can leave the two paths a frame apart.
            frames = min(x.shape[2], a.shape[2])
            x = torch.cat((x[:, :, :frames], a[:, :, :frames]), dim=1)
        for i in range(2, 6):
            x = getattr(self, f"conv_block{i}")(x)
        x = self.conv_block6(x, (1, 1))
        x = x.mean(dim=3)  # [n, 2048, frames]
        pooled = x.max(dim=2).values + x.mean(dim=2)
        return x.transpose(1, 2), F.relu(self.fc1(pooled))


class PannsModel(nn.Module):
    def __init__(self, net: Cnn14, variant: str, *, frames: bool, weights_id: str, device=None):
        super().__init__()
        rate, _, hop, *_ = _variant(variant)
        self.net = net.eval()
        self.sample_rate = rate
        self.hop = hop
        self.frames = bool(frames)
        self.timestamp_embedding_size = self.scene_embedding_size = EMBEDDING_SIZE
        self.options_id = f"{variant}-{'frames' if frames else 'clip'}"
        self.weights_id = weights_id
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.to(self.device)

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        audio = audio.float().to(self.device)
        frames, clip = self.net(audio)
        if not self.frames:
            middle = audio.shape[1] / self.sample_rate * 500.0
            return clip[:, None, :], torch.full((audio.shape[0], 1), middle, device=audio.device)
        # Each frame after five 2x poolings spans 32 hops of the STFT.
        step = 32 * self.hop / self.sample_rate * 1000.0
        stamps = (torch.arange(frames.shape[1], device=audio.device) + 0.5) * step
        return frames, stamps.expand(audio.shape[0], -1)


def load_model(
    model_file_path: str = "",
    *,
    device: str | None = None,
    variant: str = "cnn14",
    frames: bool = False,
) -> PannsModel:
    """A PANNs variant from its released checkpoint; `"random"` gives a fixed random init."""
    _, n_fft, hop, mels, *_ = _variant(variant)
    if model_file_path == "random":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net = Cnn14(n_fft, hop, mels, wavegram=variant == "wavegram-logmel")
        return PannsModel(net, variant, frames=frames, weights_id="random", device=device)
    from .vggish import _state_dict, _torch_load

    if not model_file_path:
        raise WeightsMissing(f"PANNs {variant} needs its checkpoint. {WEIGHTS_HELP}")
    params = _state_dict(_torch_load(model_file_path))
    with torch.device("meta"):
        net = Cnn14(n_fft, hop, mels, wavegram=variant == "wavegram-logmel")
    wanted = net.state_dict()
    missing = [k for k in wanted if k not in params]
    wrong = [k for k in wanted if k in params and tuple(params[k].shape) != wanted[k].shape]
    if missing or wrong:
        problems = [f"lacks {', '.join(missing[:4])}"] if missing else []
        problems += [f"{k} is {tuple(params[k].shape)}" for k in wrong[:4]]
        raise ValueError(
            f"{model_file_path} holds no PANNs {variant} checkpoint: {'; '.join(problems)} "
            f"(is it another variant? {WEIGHTS_HELP})"
        )
    net.load_state_dict(
        {k: params[k].float() if params[k].is_floating_point() else params[k] for k in wanted},
        assign=True,
    )
    weights_id = file_digest(model_file_path)
    return PannsModel(net, variant, frames=frames, weights_id=weights_id, device=device)


def get_timestamp_embeddings(
    audio: torch.Tensor, model: PannsModel
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode():
        return model(audio)


def get_scene_embeddings(audio: torch.Tensor, model: PannsModel) -> torch.Tensor:
    with torch.inference_mode():
        return model.net(audio.float().to(model.device))[1]


def embed_batch(audio, input_rate: int, model: PannsModel):
    """Embeddings [n, frames, 2048] of float32 audio [n, samples] at any rate."""
    import numpy as np

    from .vggish import resample

    x = torch.from_numpy(np.ascontiguousarray(np.atleast_2d(audio), dtype=np.float32))
    with torch.inference_mode():
        x = resample(x.to(model.device), input_rate, model.sample_rate)
        emb, _ = model(x)
    return emb.float().cpu().numpy()
