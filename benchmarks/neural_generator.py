"""A neural generator for the generation benchmark: what a team's torch system asks of a worker.

It follows the generator API (`load_model`, `generate`) like the procedural baseline, but its
clips come from a network the size of a HiFi-GAN V1 vocoder (upsampling transposed convolutions
with multi-receptive-field residual blocks, about 14 M parameters) fed with a per-category
embedding and seeded noise at 86 frames/s. The weights are a fixed random initialisation: the
benchmark measures the work, not the sound. It runs where `FOLEY_DEVICE` says (`cuda` on a GPU
worker), in float32.
"""

from __future__ import annotations

import os
import zlib

import numpy as np
import torch
from torch import nn

# Categories by a hash of their name: a generator sees only its own file, not the platform.
CATEGORY_SLOTS = 8
UPSAMPLE = (8, 8, 2, 2)  # 256 samples per frame: 86 frames/s at 22,050 Hz
KERNELS = (16, 16, 4, 4)
RESBLOCK_KERNELS = (3, 7, 11)
DILATIONS = (1, 3, 5)
CHANNELS = 512
LATENT = 80


class ResBlock(nn.Module):
    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, dilation=d, padding=d * (kernel - 1) // 2)
            for d in DILATIONS
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv in self.convs:
            x = x + conv(nn.functional.leaky_relu(x, 0.1))
        return x


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.category = nn.Embedding(CATEGORY_SLOTS, LATENT)
        self.pre = nn.Conv1d(LATENT, CHANNELS, 7, padding=3)
        self.ups = nn.ModuleList()
        self.blocks = nn.ModuleList()
        channels = CHANNELS
        for factor, kernel in zip(UPSAMPLE, KERNELS, strict=True):
            self.ups.append(
                nn.ConvTranspose1d(
                    channels, channels // 2, kernel, factor, padding=(kernel - factor) // 2
                )
            )
            channels //= 2
            self.blocks.append(nn.ModuleList(ResBlock(channels, k) for k in RESBLOCK_KERNELS))
        self.post = nn.Conv1d(channels, 1, 7, padding=3)

    def forward(self, category: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        x = self.pre(noise + self.category(category)[:, :, None])
        for up, blocks in zip(self.ups, self.blocks, strict=True):
            x = up(nn.functional.leaky_relu(x, 0.1))
            x = sum(block(x) for block in blocks) / len(blocks)
        return torch.tanh(self.post(nn.functional.leaky_relu(x)))[:, 0]


class Model:
    def __init__(self, device: str):
        self.device = device
        self.sample_rate = int(os.environ.get("FOLEY_SAMPLE_RATE", 22050))
        self.frames = round(float(os.environ.get("FOLEY_CLIP_DURATION_S", 4.0)) * self.sample_rate)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            self.net = Decoder().eval().to(device)


def load_model(path: str | None = None) -> Model:
    return Model(os.environ.get("FOLEY_DEVICE", "cpu"))


def generate(model: Model, category: str, n: int, seed: int) -> np.ndarray:
    """`n` clips of `category` as float32 [n, samples]; clip k depends on (seed, k) alone."""
    steps = -(-model.frames // int(np.prod(UPSAMPLE)))
    noise = np.stack(
        [
            np.random.default_rng([int(seed) & 0xFFFFFFFF, k]).standard_normal((LATENT, steps))
            for k in range(n)
        ]
    ).astype(np.float32)
    index = zlib.crc32(category.encode()) % CATEGORY_SLOTS
    labels = torch.full((n,), index, dtype=torch.long, device=model.device)
    with torch.inference_mode():
        audio = model.net(labels, torch.from_numpy(noise).to(model.device))
    return (0.5 * audio[:, : model.frames]).float().cpu().numpy()
