"""Untrained stand-ins for the predictors' released files, for the tests and the demo.

They are random weights written in the released layouts (parameter names, shapes, the files'
dicts and folders), so that `aesthetics.load` and `pam.load` read them as they read the released
files and the whole pipeline runs without them: loading, preparing audio, scoring, storing. The
scores they give are meaningless; only the released checkpoints (docs/objective.md) predict
anything. Each file carries `untrained_standin: True` beside the released entries (which the
released code ignores), so what the loaders make of it says it is a stand-in, and so do the
values' model ids and the results that show them.

The loaders read the networks' sizes from the files' tensors (WavLM's channels, width, inner
width, heads, layers and positional taps; HTSAT's width and depths; the joint space; GPT-2's
sizes). By default (RELEASED_SIZES) the stand-ins have the released networks' sizes, WavLM Base
with heads of five layers and HTSAT-tiny, so scoring takes as long as with the released files;
only GPT-2 is small (2 layers, 128 wide). DEMO_SIZES writes the same layouts with a few layers
and small widths, for the demo, whose thousands of clips would otherwise take an hour of CPU.

- Audiobox Aesthetics: `write_aesthetics(path)`, a `checkpoint.pt` as released: a dict of
  `state_dict` (names prefixed `model.`), `model_cfg` (heads of five linear layers with layer
  norms, as the published configuration describes them) and `target_transform`.
- PAM: `write_pam(folder)`, MS-CLAP's `CLAP_weights_2023.pth` (a dict whose `model` holds the
  state dict: HTSAT-tiny whole, a small GPT-2 over GPT-2's 50,257 tokens) and a part of GPT-2's
  tokenizer files in `gpt2/`: its 256 byte tokens and the merges that PAM's prompts and
  "Hello world" go through, in GPT-2's order, all under GPT-2's own ids.
- `write_standins(model_dir, sizes)`: both, where the settings look by default under
  FOLEY_MODEL_DIR.

Random values are drawn from seeded generators: the same files from the same seed. Only numpy
and torch are needed (the mel matrices are computed here, as librosa computes them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import UNTRAINED
from .msclap import HTSAT_TINY
from .wavlm import WAVLM_BASE, WavLMSizes

# --- Audiobox Aesthetics ----------------------------------------------------------------------

AESTHETICS_FILE = "audiobox-aesthetics/checkpoint.pt"  # under FOLEY_MODEL_DIR
MODEL_CFG = {
    "proj_num_layer": 5, "proj_ln": True, "proj_act_fn": "gelu", "proj_dropout": 0.0,
    "nth_layer": 13, "use_weighted_layer_sum": True, "precision": "32",
    "normalize_embed": True, "output_dim": 1,
}  # fmt: skip
TARGETS = {
    "CE": {"mean": 5.1, "std": 1.9}, "CU": {"mean": 5.7, "std": 1.8},
    "PC": {"mean": 3.2, "std": 1.9}, "PQ": {"mean": 6.6, "std": 1.5},
}  # fmt: skip


def aesthetics_shapes(sizes: WavLMSizes = WAVLM_BASE, heads: int = 5) -> dict[str, tuple[int, ...]]:
    """Every parameter of the released model and its shape, as the release's code builds it
    (WavLM Base and heads of five linear layers with layer norms), or in the same layout with
    an encoder of other `sizes` and heads of `heads` linear layers."""
    c, w, f = sizes.features, sizes.width, sizes.ffn
    shapes: dict[str, tuple[int, ...]] = {}
    inputs = 1
    for i, (kernel, _stride) in enumerate([(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2):
        shapes[f"wavlm_model.feature_extractor.conv_layers.{i}.0.weight"] = (c, inputs, kernel)
        inputs = c
    for name in ("feature_extractor.conv_layers.0.2", "layer_norm"):
        shapes[f"wavlm_model.{name}.weight"] = shapes[f"wavlm_model.{name}.bias"] = (c,)
    shapes["wavlm_model.post_extract_proj.weight"] = (w, c)
    shapes["wavlm_model.post_extract_proj.bias"] = (w,)
    shapes["wavlm_model.mask_emb"] = (w,)
    shapes["wavlm_model.encoder.pos_conv.0.weight_g"] = (1, 1, sizes.pos_kernel)
    shapes["wavlm_model.encoder.pos_conv.0.weight_v"] = (
        w, w // sizes.pos_groups, sizes.pos_kernel
    )  # fmt: skip
    shapes["wavlm_model.encoder.pos_conv.0.bias"] = (w,)
    shapes["wavlm_model.encoder.layer_norm.weight"] = (w,)
    shapes["wavlm_model.encoder.layer_norm.bias"] = (w,)
    bias_table = "wavlm_model.encoder.layers.0.self_attn.relative_attention_bias.weight"
    shapes[bias_table] = (320, sizes.heads)
    for i in range(sizes.layers):
        p = f"wavlm_model.encoder.layers.{i}."
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            shapes[f"{p}self_attn.{proj}.weight"] = (w, w)
            shapes[f"{p}self_attn.{proj}.bias"] = (w,)
        shapes[f"{p}self_attn.grep_linear.weight"] = (8, w // sizes.heads)
        shapes[f"{p}self_attn.grep_linear.bias"] = (8,)
        shapes[f"{p}self_attn.grep_a"] = (1, sizes.heads, 1, 1)
        shapes[f"{p}fc1.weight"], shapes[f"{p}fc1.bias"] = (f, w), (f,)
        shapes[f"{p}fc2.weight"], shapes[f"{p}fc2.bias"] = (w, f), (w,)
        for norm in ("self_attn_layer_norm", "final_layer_norm"):
            shapes[f"{p}{norm}.weight"] = shapes[f"{p}{norm}.bias"] = (w,)
    for axis in ("CE", "CU", "PC", "PQ"):
        shapes[f"layer_weights.{axis}"] = (sizes.layers + 1,)
        # Linear, LayerNorm, GELU per hidden layer, then the output layer: the released five
        # layers at indices 0-3-6-9 (their norms 1-4-7-10) and 12.
        for i in range(0, 3 * (heads - 1), 3):
            shapes[f"proj_layer.{axis}.{i}.weight"] = (w, w)
            shapes[f"proj_layer.{axis}.{i}.bias"] = (w,)
            shapes[f"proj_layer.{axis}.{i + 1}.weight"] = (w,)
            shapes[f"proj_layer.{axis}.{i + 1}.bias"] = (w,)
        shapes[f"proj_layer.{axis}.{3 * (heads - 1)}.weight"] = (1, w)
        shapes[f"proj_layer.{axis}.{3 * (heads - 1)}.bias"] = (1,)
    return shapes


def aesthetics_state(
    seed: int = 0, sizes: WavLMSizes = WAVLM_BASE, heads: int = 5
) -> dict[str, torch.Tensor]:
    """Random parameters of the released names and shapes (or of `sizes` and `heads` in the
    same layout), scaled to keep activations sane."""
    rng = torch.Generator().manual_seed(seed)
    state = {}
    for name, shape in aesthetics_shapes(sizes, heads).items():
        if name.endswith(("norm.weight", "conv_layers.0.2.weight", "layer_norm.weight")):
            value = 1.0 + 0.1 * torch.randn(shape, generator=rng)
        elif name.endswith("weight_g"):
            value = 1.0 + 0.1 * torch.rand(shape, generator=rng)
        elif name.startswith("layer_weights") or name.endswith("grep_a"):
            value = torch.randn(shape, generator=rng)
        elif "conv_layers" in name and len(shape) == 3:
            value = torch.randn(shape, generator=rng) / np.sqrt(shape[1] * shape[2])
        elif name.endswith("weight") and len(shape) == 2:
            value = torch.randn(shape, generator=rng) / np.sqrt(shape[1])
        else:
            value = 0.05 * torch.randn(shape, generator=rng)
        state[f"model.{name}"] = value
    return state


def aesthetics_cheap_state() -> dict[str, torch.Tensor]:
    """The released names and shapes, each a view of one zero: a file of a few kilobytes, for
    what only loads (all zeros do not rate: the positional convolution's weight norm is 0/0)."""
    return {f"model.{k}": torch.zeros(()).expand(v) for k, v in aesthetics_shapes().items()}


def write_aesthetics(path, state=None, model_cfg=None, targets=None) -> Path:
    """A `checkpoint.pt` in the released form (random parameters from seed 0 by default),
    marked as an untrained stand-in."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "state_dict": aesthetics_state() if state is None else state,
            "model_cfg": MODEL_CFG if model_cfg is None else model_cfg,
            "target_transform": TARGETS if targets is None else targets,
            UNTRAINED: True,
        },
        path,
    )
    return path


# --- HTSAT (MS-CLAP's and LAION-CLAP's audio encoder) ------------------------------------------

HTSAT_SIZES = {"htsat-tiny": (96, (2, 2, 6, 2)), "htsat-base": (128, (2, 2, 12, 2))}


def slaney_mel(rate: int, n_fft: int, bands: int, fmin: float, fmax: float) -> np.ndarray:
    """Mel triangles [bands, n_fft // 2 + 1] on Slaney's scale with Slaney's area norm, as
    `librosa.filters.mel` makes them by default (float32)."""
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp

    def to_mel(hz: float) -> float:
        return min_log_mel + np.log(hz / min_log_hz) / logstep if hz >= min_log_hz else hz / f_sp

    mels = np.linspace(to_mel(fmin), to_mel(fmax), bands + 2)
    edges = np.where(
        mels >= min_log_mel, min_log_hz * np.exp(logstep * (mels - min_log_mel)), f_sp * mels
    )
    ramps = np.subtract.outer(edges, np.fft.rfftfreq(n=n_fft, d=1.0 / rate))
    widths = np.diff(edges)
    weights = np.zeros((bands, n_fft // 2 + 1), dtype=np.float32)
    for i in range(bands):
        weights[i] = np.maximum(0, np.minimum(-ramps[i] / widths[i], ramps[i + 2] / widths[i + 1]))
    weights *= (2.0 / (edges[2 : bands + 2] - edges[:bands]))[:, None]
    return weights


def swin_buffers(resolution: int, shifted: bool) -> dict[str, torch.Tensor]:
    """The index and mask buffers the release stores for a block (8 x 8 windows, shift 4)."""
    size = min(8, resolution)
    pos = [(r, c) for r in range(size) for c in range(size)]
    index = torch.tensor(
        [[(a[0] - b[0] + size - 1) * (2 * size - 1) + a[1] - b[1] + size - 1 for b in pos]
         for a in pos]
    )  # fmt: skip
    buffers = {"attn.relative_position_index": index}
    if shifted and resolution > 8:
        region = np.zeros((resolution, resolution))
        for i, rows in enumerate((slice(0, -8), slice(-8, -4), slice(-4, None))):
            for j, cols in enumerate((slice(0, -8), slice(-8, -4), slice(-4, None))):
                region[rows, cols] = 3 * i + j
        windows = region.reshape(resolution // 8, 8, resolution // 8, 8).transpose(0, 2, 1, 3)
        windows = windows.reshape(-1, 64)
        mask = np.where(windows[:, None, :] != windows[:, :, None], -100.0, 0.0)
        buffers["attn_mask"] = torch.tensor(mask, dtype=torch.float32)
    return buffers


def htsat_state(
    variant: str | tuple[int, tuple[int, ...], int], seed: int = 0, mel_rate: int = 48000
) -> dict[str, torch.Tensor]:
    """HTSAT's parameters and buffers under the released names, unprefixed, random but for the
    front end (torchlibrosa's DFT kernels; the mel matrix for `mel_rate`, 64 bands 50-14,000
    Hz: LAION-CLAP's at 48 kHz, msclap's at 32 kHz). `variant` names released sizes (DFTs of
    1,024 points), or gives (width, depths, DFT points) for a network of other sizes in the same
    layout."""
    width, depths, n_fft = (*HTSAT_SIZES[variant], 1024) if isinstance(variant, str) else variant
    heads = (4, 8, 16, 32)
    rng = torch.Generator().manual_seed(seed)
    shapes: dict[str, tuple] = {
        "patch_embed.proj.weight": (width, 1, 4, 4), "patch_embed.proj.bias": (width,),
        "patch_embed.norm.weight": (width,), "patch_embed.norm.bias": (width,),
        "norm.weight": (8 * width,), "norm.bias": (8 * width,),
        "tscam_conv.weight": (527, 8 * width, 2, 3), "tscam_conv.bias": (527,),
        "head.weight": (527, 527), "head.bias": (527,),
    }  # fmt: skip
    buffers: dict[str, torch.Tensor] = {}
    for i, depth in enumerate(depths):
        dim, resolution = width * 2**i, 64 // 2**i
        for j in range(depth):
            prefix = f"layers.{i}.blocks.{j}."
            for norm in ("norm1", "norm2"):
                shapes[prefix + norm + ".weight"] = shapes[prefix + norm + ".bias"] = (dim,)
            shapes[prefix + "attn.relative_position_bias_table"] = (225, heads[i])
            shapes[prefix + "attn.qkv.weight"] = (3 * dim, dim)
            shapes[prefix + "attn.qkv.bias"] = (3 * dim,)
            shapes[prefix + "attn.proj.weight"] = (dim, dim)
            shapes[prefix + "attn.proj.bias"] = (dim,)
            shapes[prefix + "mlp.fc1.weight"] = (4 * dim, dim)
            shapes[prefix + "mlp.fc1.bias"] = (4 * dim,)
            shapes[prefix + "mlp.fc2.weight"] = (dim, 4 * dim)
            shapes[prefix + "mlp.fc2.bias"] = (dim,)
            for name, value in swin_buffers(resolution, j % 2 == 1).items():
                buffers[prefix + name] = value
        if i < len(depths) - 1:
            shapes[f"layers.{i}.downsample.norm.weight"] = (4 * dim,)
            shapes[f"layers.{i}.downsample.norm.bias"] = (4 * dim,)
            shapes[f"layers.{i}.downsample.reduction.weight"] = (2 * dim, 4 * dim)
    state = {}
    for name, shape in shapes.items():
        if "norm" in name and name.endswith("weight"):
            state[name] = 1.0 + 0.1 * torch.randn(shape, generator=rng)
        else:
            state[name] = 0.05 * torch.randn(shape, generator=rng)
    state.update(buffers)
    state["bn0.weight"] = 1.0 + 0.1 * torch.randn(64, generator=rng)
    state["bn0.bias"] = 0.1 * torch.randn(64, generator=rng)
    state["bn0.running_mean"] = -20.0 + torch.randn(64, generator=rng)
    state["bn0.running_var"] = 50.0 + torch.rand(64, generator=rng)
    state["bn0.num_batches_tracked"] = torch.tensor(0)
    window = np.hanning(n_fft + 1)[:-1]
    angle = 2 * np.pi * np.arange(n_fft // 2 + 1)[:, None] * np.arange(n_fft)[None, :] / n_fft
    state["spectrogram_extractor.stft.conv_real.weight"] = torch.tensor(
        (np.cos(angle) * window)[:, None, :], dtype=torch.float32
    )
    state["spectrogram_extractor.stft.conv_imag.weight"] = torch.tensor(
        (-np.sin(angle) * window)[:, None, :], dtype=torch.float32
    )
    mel = slaney_mel(mel_rate, n_fft, 64, 50, 14000).T
    state["logmel_extractor.melW"] = torch.tensor(mel, dtype=torch.float32)
    return state


# --- PAM (MS-CLAP 2023 and GPT-2's tokenizer) ---------------------------------------------------

PAM_FILE = "CLAP_weights_2023.pth"  # under FOLEY_MODEL_DIR
TOKENIZER_FOLDER = "gpt2"  # under FOLEY_MODEL_DIR
# The small GPT-2: vocabulary (GPT-2's, so its ids hold), positions, width, layers, inner width.
VOCAB, POSITIONS, WIDTH, LAYERS, INNER = 50257, 80, 128, 2, 256
# GPT-2's merges that its tokenisation of PAM's prompts and "Hello world" applies, in its order.
MERGES = """Ġ a|h e|Ġ s|Ġ w|Ġ c|i t|i s|a n|o r|o u|Ġa n|a r|Ġan d|l e|l l|Ġ n|c t|Ġ is|l d|it h
Ġw ith|n d|i f|Ġw or|a ct|Ġa r|ou nd|Ġn o|e ll|Ġwor ld|t he|Ġc le|Ġar t|Ġcle ar|Ġs ound|Ġcle an
act s|ell o|is y|Ġart if|H ello|Ġartif acts|Ġno isy"""
# Their tokens' ids in GPT-2's vocab.json (public: openai-community/gpt2 on Hugging Face).
TOKENS = {
    "Ġa": 257, "he": 258, "Ġs": 264, "Ġw": 266, "Ġc": 269, "it": 270, "is": 271, "an": 272,
    "or": 273, "ou": 280, "Ġan": 281, "ar": 283, "Ġand": 290, "le": 293, "ll": 297, "Ġn": 299,
    "ct": 310, "Ġis": 318, "ld": 335, "ith": 342, "Ġwith": 351, "nd": 358, "if": 361,
    "Ġwor": 476, "act": 529, "Ġar": 610, "ound": 633, "Ġno": 645, "ell": 695, "Ġworld": 995,
    "the": 1169, "Ġcle": 1190, "Ġart": 1242, "Ġclear": 1598, "Ġsound": 2128, "Ġclean": 3424,
    "acts": 8656, "ello": 11109, "isy": 13560, "Ġartif": 14077, "Hello": 15496,
    "Ġartifacts": 20316, "Ġnoisy": 31210, "<|endoftext|>": 50256,
}  # fmt: skip


def gpt2_byte_tokens() -> list[str]:
    """GPT-2's byte tokens in id order: printable bytes as themselves, then the rest shifted."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    rest = [b for b in range(256) if b not in kept]
    return [chr(b) for b in kept] + [chr(256 + i) for i in range(len(rest))]


def tokenizer_files(folder) -> Path:
    """GPT-2's `vocab.json` and `merges.txt`, the part of them PAM's prompts need."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: i for i, token in enumerate(gpt2_byte_tokens())}
    vocab.update(TOKENS)
    (folder / "vocab.json").write_text(json.dumps(vocab), "utf-8")
    merges = "#version: 0.2\n" + MERGES.replace("|", "\n").replace("\n\n", "\n") + "\n"
    (folder / "merges.txt").write_text(merges, "utf-8")
    return folder


@dataclass(frozen=True)
class MsClapSizes:
    """The sizes of an MS-CLAP stand-in: HTSAT's (width, depths, DFT points), the joint space's
    and GPT-2's (vocabulary, positions, width, layers, inner width)."""

    audio: tuple[int, tuple[int, ...], int] = HTSAT_TINY
    joint: int = 1024
    text: tuple[int, int, int, int, int] = (VOCAB, POSITIONS, WIDTH, LAYERS, INNER)


def msclap_state(seed: int = 0, sizes: MsClapSizes = MsClapSizes()) -> dict[str, torch.Tensor]:
    """msclap's CLAP state dict in the released names, random but for the audio front end:
    HTSAT-tiny and the small GPT-2 by default, or other `sizes` in the same layout."""
    rng = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 0.05, mean: float = 0.0) -> torch.Tensor:
        return mean + scale * torch.randn(shape, generator=rng)

    vocab, positions, width, layers, inner = sizes.text
    joint = sizes.joint
    # msclap's HTSAT config builds the mel matrix for 32 kHz, 50-14,000 Hz.
    audio = htsat_state(sizes.audio, seed, mel_rate=32000)
    state = {f"audio_encoder.base.htsat.{k}": v for k, v in audio.items()}
    pooled = sizes.audio[0] * 2 ** (len(sizes.audio[1]) - 1)
    for branch, inputs in (("audio_encoder", pooled), ("caption_encoder", width)):
        state[f"{branch}.projection.linear1.weight"] = rand(joint, inputs, scale=0.1)
        state[f"{branch}.projection.linear2.weight"] = rand(joint, joint, scale=0.03)
        state[f"{branch}.projection.layer_norm.weight"] = rand(joint, scale=0.1, mean=1.0)
        state[f"{branch}.projection.layer_norm.bias"] = rand(joint)
    text = {"wte.weight": rand(vocab, width, scale=0.1), "wpe.weight": rand(positions, width)}
    for i in range(layers):
        shapes = {
            "attn.c_attn.weight": (width, 3 * width), "attn.c_attn.bias": (3 * width,),
            "attn.c_proj.weight": (width, width), "attn.c_proj.bias": (width,),
            "mlp.c_fc.weight": (width, inner), "mlp.c_fc.bias": (inner,),
            "mlp.c_proj.weight": (inner, width), "mlp.c_proj.bias": (width,),
        }  # fmt: skip
        text.update({f"h.{i}.{k}": rand(*shape, scale=0.1) for k, shape in shapes.items()})
        for norm in ("ln_1", "ln_2"):
            text[f"h.{i}.{norm}.weight"] = rand(width, scale=0.1, mean=1.0)
            text[f"h.{i}.{norm}.bias"] = rand(width)
        # The causal-mask buffers older transformers saved with GPT-2.
        causal = torch.tril(torch.ones(positions, positions, dtype=torch.bool))
        text[f"h.{i}.attn.bias"] = causal.view(1, 1, positions, positions)
        text[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    text["ln_f.weight"], text["ln_f.bias"] = rand(width, scale=0.1, mean=1.0), rand(width)
    state.update({f"caption_encoder.base.{k}": v for k, v in text.items()})
    state["logit_scale"] = torch.tensor(float(np.log(1 / 0.07)))
    return state


def write_pam(folder, seed: int = 0, sizes: MsClapSizes = MsClapSizes()) -> tuple[Path, Path]:
    """`CLAP_weights_2023.pth` (marked as an untrained stand-in) and the tokenizer folder
    `gpt2/` in `folder`; their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"model": msclap_state(seed, sizes), UNTRAINED: True}, folder / PAM_FILE)
    return folder / PAM_FILE, tokenizer_files(folder / TOKENIZER_FOLDER)


# --- Both -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StandinSizes:
    """The networks' sizes in a set of stand-ins: WavLM's, the number of linear layers in each
    Aesthetics head, and MS-CLAP's."""

    wavlm: WavLMSizes = WAVLM_BASE
    heads: int = MODEL_CFG["proj_num_layer"]
    msclap: MsClapSizes = MsClapSizes()


# The released networks' sizes (WavLM Base, heads of five layers, HTSAT-tiny), GPT-2 small as the
# tests have it: what the released files hold, seconds a clip on the CPU.
RELEASED_SIZES = StandinSizes()
# The demo's: one layer or block per stage, small widths, DFTs of 128 points, in the same
# layouts: about 35 ms a 4 s clip for both on one thread (resampling included) where the released
# sizes take seconds, so the demo's thousands of clips take a minute or two. A window of 16 kHz audio
# (WavLM's strides), HTSAT's 64 mel bands, 64 x 64 patches and four stages stay as they are.
DEMO_SIZES = StandinSizes(
    wavlm=WavLMSizes(features=8, width=32, ffn=64, heads=2, layers=1, pos_kernel=8, pos_groups=2),
    heads=2,
    msclap=MsClapSizes(audio=(8, (1, 1, 1, 1), 128), joint=32, text=(VOCAB, POSITIONS, 32, 1, 64)),
)


def write_standins(model_dir, sizes: StandinSizes = RELEASED_SIZES) -> dict[str, Path]:
    """Both predictors' stand-ins where the settings look by default under FOLEY_MODEL_DIR:
    `audiobox-aesthetics/checkpoint.pt`, `CLAP_weights_2023.pth` and `gpt2/`; the released
    networks' sizes by default, or `sizes` (DEMO_SIZES: the demo's) in the same layouts."""
    model_dir = Path(model_dir)
    weights, tokenizer = write_pam(model_dir, sizes=sizes.msclap)
    config = {**MODEL_CFG, "proj_num_layer": sizes.heads, "nth_layer": sizes.wavlm.layers + 1}
    state = aesthetics_state(sizes=sizes.wavlm, heads=sizes.heads)
    return {
        "aesthetics": write_aesthetics(model_dir / AESTHETICS_FILE, state, config),
        "pam": weights,
        "pam_tokenizer": tokenizer,
    }
