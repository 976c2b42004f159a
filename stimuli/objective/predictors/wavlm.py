"""The WavLM Base encoder (Chen et al., "WavLM: Large-Scale Self-Supervised Pre-Training for Full
Stack Speech Processing", IEEE JSTSP 2022) as Audiobox Aesthetics releases it, under its parameter
names (`wavlm_model.*` in the released checkpoint, without that prefix here).

Audio at 16 kHz goes through seven convolutions (512 channels, kernels 10-3-3-3-3-2-2, strides
5-2-2-2-2-2-2: one frame per 320 samples, 499 frames per 10 s; a group norm after the first),
a layer norm, a projection to 768, a grouped positional convolution (128 taps, 16 groups, its
weight stored as direction `weight_v` and per-tap magnitude `weight_g`) and twelve post-norm
transformer layers of 12 heads. Those sizes are WavLM Base's, which the release builds from its
code's defaults and does not write down; they are read here from the checkpoint's tensors
(`sizes_of`), so the released file gives WavLM Base and a smaller network in the same layout
(the demo's untrained stand-in) loads as what it is. The convolutions' kernels and strides,
which no tensor holds in full, are always WavLM Base's. Positions enter the attention as WavLM's gated relative bias:
one table of 320 log-spaced buckets (160 a side, exact up to 80 frames, up to 800 frames apart),
held by the first layer and shared by all, each layer scaling it per query and head by a gate
computed from the layer's input. Frames that hold only padding are zeroed before the positional
convolution and never attended to. The encoder returns the input to the first layer and every
layer's output, 13 in all, for the predictor's weighted sum. The release's dropout, layer drop
and span masking act only in training; the pre-training's mask token (`mask_emb`) is kept so the
checkpoint loads whole.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# (kernel, stride) of the convolutional front end: WavLM Base's, which the release builds from
# its code and does not store (a weight holds its kernel, no tensor its stride).
CONV_SHAPES = ((10, 5),) + ((3, 2),) * 4 + ((2, 2),) * 2
BUCKETS, MAX_DISTANCE = 320, 800
GATES = 8  # the gate's projection: two gates of four summed features per head


@dataclass(frozen=True)
class WavLMSizes:
    """The sizes of a WavLM encoder: the front end's channels, the transformer's width, inner
    width, heads and layers, the positional convolution's taps and groups."""

    features: int = 512
    width: int = 768
    ffn: int = 3072
    heads: int = 12
    layers: int = 12
    pos_kernel: int = 128
    pos_groups: int = 16

    @property
    def head_width(self) -> int:
        return self.width // self.heads


# WavLM Base, the encoder of Audiobox Aesthetics' released checkpoint.
WAVLM_BASE = WavLMSizes()
_LAYER = re.compile(r"encoder\.layers\.(\d+)\.")


def _dim(params: Mapping[str, object], name: str, axis: int) -> int | None:
    tensor = params.get(name)
    if isinstance(tensor, torch.Tensor) and tensor.dim() > axis:
        return int(tensor.shape[axis])
    return None


def sizes_of(params: Mapping[str, object], problems: list[str]) -> WavLMSizes:
    """The encoder's sizes as the tensors of `params` (names without `wavlm_model.`) give them;
    WavLM Base's where the tensor that tells is absent (the check then names it missing).
    Sizes no network could have (a width the heads do not divide) go to `problems`."""
    base = WAVLM_BASE
    found = [int(m.group(1)) for k in params if (m := _LAYER.match(k))]
    width = _dim(params, "post_extract_proj.weight", 0) or base.width
    heads = _dim(params, "encoder.layers.0.self_attn.relative_attention_bias.weight", 1)
    per_group = _dim(params, "encoder.pos_conv.0.weight_v", 1)
    sizes = WavLMSizes(
        features=_dim(params, "feature_extractor.conv_layers.0.0.weight", 0) or base.features,
        width=width,
        ffn=_dim(params, "encoder.layers.0.fc1.weight", 0) or base.ffn,
        heads=heads or base.heads,
        layers=1 + max(found) if found else base.layers,
        pos_kernel=_dim(params, "encoder.pos_conv.0.weight_v", 2) or base.pos_kernel,
        pos_groups=width // per_group if per_group else base.pos_groups,
    )
    if sizes.width % sizes.heads:
        problems.append(f"a width of {sizes.width} is not divided among {sizes.heads} heads")
    if per_group and width % per_group:
        problems.append(f"a width of {width} is not made of groups of {per_group} channels")
    return sizes


def frame_count(samples: int) -> int:
    """How many frames the front end makes of `samples` samples (499 for 10 s)."""
    for kernel, stride in CONV_SHAPES:
        samples = (samples - kernel) // stride + 1
    return samples


def frame_padding(valid: torch.Tensor, samples: int, frames: int) -> torch.Tensor:
    """[n, frames], True where a frame holds only padding, as the release marks frames.

    The release cuts the per-sample mask (less its remainder) into `frames` equal runs and
    takes a frame for padding when all of its run is; the clip's samples come first, so that is
    when the run starts at or after them.
    """
    run = (samples - samples % frames) // frames
    starts = torch.arange(frames, device=valid.device) * run
    return starts[None, :] >= valid[:, None]


def relative_buckets(length: int, device: torch.device) -> torch.Tensor:
    """[length, length]: the bucket of each (query, key) pair's offset, key minus query."""
    positions = torch.arange(length, device=device)
    offset = positions[None, :] - positions[:, None]
    half = BUCKETS // 2
    exact = half // 2
    distance = offset.abs()
    # In float32 and truncated, as the release computes it, so the boundaries fall where its do;
    # the clamp only keeps log(0) out of the near offsets, which take their exact bucket.
    ratio = distance.clamp(min=1).float() / exact
    far = exact + (torch.log(ratio) / math.log(MAX_DISTANCE / exact) * (half - exact)).long()
    far = far.clamp(max=half - 1)
    return (offset > 0).long() * half + torch.where(distance < exact, distance, far)


def conv_block(n_in: int, n_out: int, kernel: int, stride: int, norm: bool) -> nn.Sequential:
    # Index 1 is the release's dropout, which holds nothing; its group norm sits at index 2.
    parts: list[nn.Module] = [nn.Conv1d(n_in, n_out, kernel, stride=stride, bias=False)]
    parts.append(nn.Identity())
    if norm:
        parts.append(nn.GroupNorm(n_out, n_out))
    return nn.Sequential(*parts, nn.GELU())


class FeatureExtractor(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        inputs = [1] + [channels] * (len(CONV_SHAPES) - 1)
        self.conv_layers = nn.ModuleList(
            conv_block(n_in, channels, kernel, stride, norm=i == 0)
            for i, (n_in, (kernel, stride)) in enumerate(zip(inputs, CONV_SHAPES, strict=True))
        )

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """[n, samples] -> [n, channels, frames]."""
        x = audio[:, None]
        for block in self.conv_layers:
            x = block(x)
        return x


class PositionalConv(nn.Module):
    """The grouped convolution over frames that gives the encoder its sense of position.

    Its weight is stored as torch's weight norm over the taps keeps it: the direction `weight_v`
    and one magnitude per tap `weight_g`, the weight being `weight_g * weight_v / |weight_v|`
    with the norm taken over output and input channels.
    """

    def __init__(self, sizes: WavLMSizes):
        super().__init__()
        width, kernel, self.groups = sizes.width, sizes.pos_kernel, sizes.pos_groups
        self.weight_g = nn.Parameter(torch.empty(1, 1, kernel))
        self.weight_v = nn.Parameter(torch.empty(width, width // self.groups, kernel))
        self.bias = nn.Parameter(torch.empty(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[n, width, frames] -> [n, width, frames]."""
        weight = self.weight_v * (self.weight_g / self.weight_v.norm(dim=(0, 1), keepdim=True))
        kernel = weight.shape[-1]
        y = F.conv1d(x, weight, self.bias, padding=kernel // 2, groups=self.groups)
        # An even kernel padded on both sides makes one frame too many: the last one goes.
        return F.gelu(y[..., :-1] if kernel % 2 == 0 else y)


class SelfAttention(nn.Module):
    def __init__(self, sizes: WavLMSizes, holds_bias_table: bool):
        super().__init__()
        width, self.heads = sizes.width, sizes.heads
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)
        self.grep_linear = nn.Linear(sizes.head_width, GATES)
        self.grep_a = nn.Parameter(torch.empty(1, self.heads, 1, 1))
        if holds_bias_table:
            self.relative_attention_bias = nn.Embedding(BUCKETS, self.heads)

    def position_bias(self, length: int) -> torch.Tensor:
        """[1, heads, length, length]: the table's bias of each pair (first layer only)."""
        buckets = relative_buckets(length, self.relative_attention_bias.weight.device)
        return self.relative_attention_bias(buckets).permute(2, 0, 1)[None]

    def forward(
        self, x: torch.Tensor, position_bias: torch.Tensor, padding: torch.Tensor
    ) -> torch.Tensor:
        """x [n, frames, width], the shared bias, padding [n, frames] -> [n, frames, width]."""
        n, length, width = x.shape
        heads = self.heads
        by_head = x.view(n, length, heads, -1).transpose(1, 2)  # the input itself, not q
        gates = torch.sigmoid(self.grep_linear(by_head).view(n, heads, length, 2, -1).sum(-1))
        gate_a, gate_b = gates[..., :1], gates[..., 1:]
        scale = gate_a * (gate_b * self.grep_a - 1.0) + 2.0  # [n, heads, frames, 1]
        bias = (scale * position_bias).masked_fill(padding[:, None, None, :], float("-inf"))
        q, k, v = (
            proj(x).view(n, length, heads, -1).transpose(1, 2)
            for proj in (self.q_proj, self.k_proj, self.v_proj)
        )
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.out_proj(y.transpose(1, 2).reshape(n, length, width))


class EncoderLayer(nn.Module):
    def __init__(self, sizes: WavLMSizes, first: bool):
        super().__init__()
        self.self_attn = SelfAttention(sizes, holds_bias_table=first)
        self.self_attn_layer_norm = nn.LayerNorm(sizes.width)
        self.fc1 = nn.Linear(sizes.width, sizes.ffn)
        self.fc2 = nn.Linear(sizes.ffn, sizes.width)
        self.final_layer_norm = nn.LayerNorm(sizes.width)

    def forward(
        self, x: torch.Tensor, position_bias: torch.Tensor, padding: torch.Tensor
    ) -> torch.Tensor:
        x = self.self_attn_layer_norm(x + self.self_attn(x, position_bias, padding))
        return self.final_layer_norm(x + self.fc2(F.gelu(self.fc1(x))))


class Encoder(nn.Module):
    def __init__(self, sizes: WavLMSizes):
        super().__init__()
        # A Sequential in the release, whose trim and GELU (done in PositionalConv) hold nothing.
        self.pos_conv = nn.Sequential(PositionalConv(sizes))
        self.layers = nn.ModuleList(EncoderLayer(sizes, first=i == 0) for i in range(sizes.layers))
        self.layer_norm = nn.LayerNorm(sizes.width)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> list[torch.Tensor]:
        """x [n, frames, width] -> the first layer's input and each layer's output."""
        x = x.masked_fill(padding[..., None], 0.0)
        x = self.layer_norm(x + self.pos_conv(x.transpose(1, 2)).transpose(1, 2))
        position_bias = self.layers[0].self_attn.position_bias(x.shape[1])
        outputs = [x]
        for layer in self.layers:
            x = layer(x, position_bias, padding)
            outputs.append(x)
        return outputs


class WavLM(nn.Module):
    def __init__(self, sizes: WavLMSizes = WAVLM_BASE):
        super().__init__()
        self.sizes = sizes
        self.feature_extractor = FeatureExtractor(sizes.features)
        self.layer_norm = nn.LayerNorm(sizes.features)
        self.post_extract_proj = nn.Linear(sizes.features, sizes.width)
        self.mask_emb = nn.Parameter(torch.empty(sizes.width))  # pre-training's mask token: unused
        self.encoder = Encoder(sizes)

    def forward(
        self, audio: torch.Tensor, valid: torch.Tensor
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """Audio [n, samples] at 16 kHz, the first `valid[i]` samples of row i the clip's, the
        rest padding -> (layers + 1 hidden states [n, frames, width], frame padding [n, frames])."""
        features = self.layer_norm(self.feature_extractor(audio).transpose(1, 2))
        padding = frame_padding(valid, audio.shape[1], features.shape[1])
        return self.encoder(self.post_extract_proj(features), padding), padding
