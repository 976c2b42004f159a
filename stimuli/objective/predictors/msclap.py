"""Microsoft's CLAP of 2023 (MS-CLAP; Elizalde, Deshmukh and Wang, "Natural Language Supervision
for General-Purpose Audio Representations", ICASSP 2024), the audio-language model PAM prompts.

The release is `CLAP_weights_2023.pth` (Hugging Face, microsoft/msclap; the `msclap` package's
default), a dict whose `model` holds the state dict of the package's `CLAP` module, built here
under the same names so that the file loads as it is:

- `audio_encoder.base.htsat.*`: HTSAT-tiny (96 wide, depths 2-2-6-2), the same network under the
  same names as LAION-CLAP's audio branch, so the platform's (`embeddings/clap.py`) is reused.
  msclap builds it from its config module, not from the file; its width, depths and DFT size
  are read here from the file's tensors (`audio_sizes`), as GPT-2's are, so the released file
  gives HTSAT-tiny and a smaller one in the same layout (the demo's untrained stand-in) loads
  too.
  Its front end is torchlibrosa's as the checkpoint holds it (DFT kernels of 1,024 points, the
  mel matrix `melW`, `bn0`), with a hop of 320 samples. msclap builds HTSAT from its own config
  module rather than from the file's settings, so the mel matrix it wrote is the one for 32 kHz,
  64 bands 50-14,000 Hz, although the audio comes at 44.1 kHz: the checkpoint's matrix is used
  as it is, whatever frequencies its bands then cover.
- `audio_encoder.projection.*` and `caption_encoder.projection.*`: msclap's projection into the
  1,024-d joint space (its size read from the file), LayerNorm(h + linear2(GELU(h))) with
  h = linear1(x), both without bias.
- `caption_encoder.base.*`: GPT-2 under transformers' `GPT2Model` names (`wte`, `wpe`,
  `h.N.ln_1`, `h.N.attn.c_attn`, `h.N.attn.c_proj`, `h.N.ln_2`, `h.N.mlp.c_fc`,
  `h.N.mlp.c_proj`, `ln_f`; the `Conv1D` weights stored [inputs, outputs]); its sizes (layers,
  width, vocabulary, positions) are read from the file, heads of 64 dimensions as GPT-2's 12 of
  768. The causal masks that older transformers releases wrote as buffers (`h.N.attn.bias`,
  `h.N.attn.masked_bias`) may be in the file and are not needed.
- `logit_scale`: the log of the factor on the cosines before the softmax.

A file is checked whole before anything is assigned: every missing key, every key no part of
the model of the sizes the file gives has and every tensor of another shape is named in one
error. A file that carries `untrained_standin` beside `model` (the platform's stand-ins,
standins.py) loads as one, and says so (`MsClap.untrained`).

Text is read as msclap reads it: the prompt and " <|endoftext|>" through GPT-2's byte-level BPE
(`vocab.json` and `merges.txt`, Hugging Face openai-community/gpt2; the special token split off
first, so the space before it is a token of its own), padded to 77 tokens with id 0 ("!", which
msclap makes GPT-2's padding token). The text embedding is the projected last hidden state at
the last token whose id is not 0 (the end-of-text token). An audio window is 7 s at 44.1 kHz;
its embedding is the projected mean of HTSAT's last tokens. Audio at another rate is resampled
as torchaudio's `Resample` does with its defaults (the resampling in PAM's own data loading):
a windowed sinc with a Hann window, 6 zero crossings and a cut-off at 0.99 of the lower
Nyquist frequency, rebuilt here in torch.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..embeddings.clap import HEADS, HTSAT
from ..embeddings.clap_text import BpeTokenizer
from . import UNTRAINED

SAMPLE_RATE = 44_100
WINDOW_SAMPLES = 7 * SAMPLE_RATE
HOP = 320
# HTSAT-tiny, the release's audio encoder: (width, depths of its four stages, DFT points).
HTSAT_TINY = (96, (2, 2, 6, 2), 1024)
JOINT = 1024
AudioSizes = tuple[int, tuple[int, ...], int]
CONTEXT = 77
HEAD_WIDTH = 64
END_OF_TEXT = "<|endoftext|>"
PAD_TOKEN, PAD_ID = "!", 0
# GPT-2 small, the release's text encoder: (vocabulary, positions, width, layers, inner width).
GPT2_SIZES = (50_257, 1024, 768, 12, 3072)
WEIGHTS_FILE = "CLAP_weights_2023.pth"
WEIGHTS_SOURCE = "Hugging Face, microsoft/msclap"
TOKENIZER_SOURCE = "Hugging Face, openai-community/gpt2"
TOKENIZER_HELP = (
    f"MS-CLAP reads text with GPT-2's tokenizer files vocab.json and merges.txt, published on "
    f"{TOKENIZER_SOURCE}, in one folder."
)
# Buffers of older transformers' GPT-2 that the network recomputes: present or not, both load.
_SPARE = re.compile(r"caption_encoder\.base\.h\.\d+\.attn\.(bias|masked_bias)")


class Gpt2Tokenizer(BpeTokenizer):
    """GPT-2's byte-level BPE from its released vocab.json and merges.txt, as msclap calls it."""

    HELP = TOKENIZER_HELP

    def check_vocabulary(self, folder: Path) -> None:
        if self.vocab.get(PAD_TOKEN) != PAD_ID or END_OF_TEXT not in self.vocab:
            raise ValueError(
                f"{folder / 'vocab.json'} is not GPT-2's vocabulary ('!' is not id 0, or it "
                f"has no {END_OF_TEXT}). {TOKENIZER_HELP}"
            )

    def encode(self, text: str) -> list[int]:
        """Token ids, the end-of-text marker taken as one token wherever it stands."""
        out: list[int] = []
        for i, part in enumerate(text.split(END_OF_TEXT)):
            if i:
                out.append(self.vocab[END_OF_TEXT])
            out.extend(self.ids(part))
        return out

    def __call__(self, texts: list[str]) -> torch.Tensor:
        """msclap's input ids [n, 77]: each text closed by ' <|endoftext|>', padded with id 0."""
        rows = [self.encode(f"{text} {END_OF_TEXT}") for text in texts]
        # The release pads to 77 without truncating; a longer prompt keeps all its tokens.
        width = max(CONTEXT, *(len(row) for row in rows))
        return torch.tensor([row + [PAD_ID] * (width - len(row)) for row in rows])


def resample(audio: torch.Tensor, rate: int, new_rate: int) -> torch.Tensor:
    """[..., samples] at `rate` to `new_rate`, as torchaudio's `Resample` with its defaults."""
    if rate == new_rate:
        return audio
    gcd = math.gcd(rate, new_rate)
    up, down = new_rate // gcd, rate // gcd
    cutoff = min(up, down) * 0.99
    zeros = 6
    width = math.ceil(zeros * down / cutoff)
    # Phase j of the output reads the inputs around j * down / up; torchaudio forms that offset
    # in float32 and the taps in float64, then stores the kernel in float32: so is it here.
    taps = torch.arange(-width, width + down, dtype=torch.float64)[None, None] / down
    t = (torch.arange(0, -up, -1)[:, None, None] / up + taps) * cutoff
    t = t.clamp(-zeros, zeros)
    window = torch.cos(t * math.pi / zeros / 2) ** 2
    t = t * math.pi
    sinc = torch.where(t == 0, torch.ones_like(t), t.sin() / t)
    kernel = (sinc * window * cutoff / down).float().to(audio.device)
    shape = audio.shape
    x = F.pad(audio.reshape(-1, shape[-1]).float(), (width, width + down))
    y = F.conv1d(x[:, None], kernel, stride=down).transpose(1, 2).reshape(x.shape[0], -1)
    return y[:, : math.ceil(up * shape[-1] / down)].reshape(*shape[:-1], -1)


class Projection(nn.Module):
    """msclap's projection: LayerNorm(h + linear2(GELU(h))), h = linear1(x), no biases."""

    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.linear1 = nn.Linear(inputs, outputs, bias=False)
        self.linear2 = nn.Linear(outputs, outputs, bias=False)
        self.layer_norm = nn.LayerNorm(outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear1(x)
        return self.layer_norm(h + self.linear2(F.gelu(h)))


class _Conv1D(nn.Module):
    """transformers' `Conv1D`: a linear layer whose weight is stored [inputs, outputs]."""

    def __init__(self, inputs: int, outputs: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(inputs, outputs))
        self.bias = nn.Parameter(torch.empty(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(
            *x.shape[:-1], -1
        )


class _Attention(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.c_attn = _Conv1D(width, 3 * width)
        self.c_proj = _Conv1D(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, tokens, width = x.shape
        heads = max(1, width // HEAD_WIDTH)
        q, k, v = self.c_attn(x).view(n, tokens, 3, heads, -1).permute(2, 0, 3, 1, 4)
        # Causal attention alone: the padding follows the text, so no token that is read ever
        # attends to it, and the release's attention mask changes nothing that is read.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(n, tokens, width))


class _Mlp(nn.Module):
    def __init__(self, width: int, inner: int):
        super().__init__()
        self.c_fc = _Conv1D(width, inner)
        self.c_proj = _Conv1D(inner, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))  # GPT-2's "gelu_new"


class _Block(nn.Module):
    def __init__(self, width: int, inner: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width, eps=1e-5)
        self.attn = _Attention(width)
        self.ln_2 = nn.LayerNorm(width, eps=1e-5)
        self.mlp = _Mlp(width, inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Gpt2(nn.Module):
    """GPT-2 by transformers' `GPT2Model` names: ids [n, tokens] -> last hidden states."""

    def __init__(self, vocab: int, positions: int, width: int, layers: int, inner: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(positions, width)
        self.h = nn.ModuleList(_Block(width, inner) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width, eps=1e-5)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(positions)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class TextEncoder(nn.Module):
    """`caption_encoder`: GPT-2 and the projection of the last token's state."""

    def __init__(
        self, vocab: int, positions: int, width: int, layers: int, inner: int, joint: int = JOINT
    ):
        super().__init__()
        self.base = Gpt2(vocab, positions, width, layers, inner)
        self.projection = Projection(width, joint)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.base(ids)
        # msclap counts the ids other than 0 ('!', the padding): the last is the end of text.
        last = ids.ne(PAD_ID).sum(dim=-1) - 1
        return self.projection(hidden[torch.arange(ids.shape[0], device=ids.device), last])


class _HtsatHolder(nn.Module):
    """msclap's `HTSATWrapper`, which holds the network as `htsat`."""

    def __init__(self, width: int, depths: tuple[int, ...], n_fft: int):
        super().__init__()
        self.htsat = HTSAT(width, depths, n_fft)
        # LAION-CLAP's HTSAT steps 480 samples at 48 kHz; msclap's config steps 320.
        self.htsat.spectrogram_extractor.hop = HOP


class AudioEncoder(nn.Module):
    """`audio_encoder`: HTSAT and the projection of its pooled tokens."""

    def __init__(self, audio: AudioSizes = HTSAT_TINY, joint: int = JOINT):
        super().__init__()
        width, depths, n_fft = audio
        self.base = _HtsatHolder(width, depths, n_fft)
        self.projection = Projection(width * 2 ** (len(depths) - 1), joint)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        """7 s windows at 44.1 kHz [n, 308700] -> embeddings [n, joint], not normalised."""
        return self.projection(self.base.htsat(audio))


class MsClap(nn.Module):
    """msclap's `CLAP` (GPT-2 text encoder) by the released names; `untrained` where the file
    is a stand-in's."""

    def __init__(
        self,
        text_sizes: tuple[int, ...] = GPT2_SIZES,
        audio: AudioSizes = HTSAT_TINY,
        joint: int = JOINT,
    ):
        super().__init__()
        self.audio_encoder = AudioEncoder(audio, joint)
        self.caption_encoder = TextEncoder(*text_sizes, joint)
        self.logit_scale = nn.Parameter(torch.zeros(()))
        self.untrained = False


class WrongCheckpoint(ValueError):
    """A file that is not the released model: every mismatch, named at once."""

    def __init__(self, source: str, missing: list[str], unexpected: list[str], wrong: list[str]):
        self.missing, self.unexpected, self.wrong = missing, unexpected, wrong
        problems = []
        if missing:
            problems.append(f"missing {len(missing)}: {', '.join(missing)}")
        if unexpected:
            problems.append(f"unexpected {len(unexpected)}: {', '.join(unexpected)}")
        if wrong:
            problems.append(f"wrong shape {len(wrong)}: {', '.join(wrong)}")
        super().__init__(
            f"{source} is not an MS-CLAP 2023 checkpoint ({WEIGHTS_FILE}, {WEIGHTS_SOURCE}): "
            + "; ".join(problems)
        )


def text_sizes(params: dict[str, torch.Tensor]) -> tuple[int, ...]:
    """(vocabulary, positions, width, layers, inner width) of the file's GPT-2; GPT-2 small's
    where the file lacks the tensor that tells (the check then names what is missing)."""
    vocab, positions, width, layers, inner = GPT2_SIZES
    prefix = "caption_encoder.base."
    if (words := params.get(prefix + "wte.weight")) is not None and words.dim() == 2:
        vocab, width = words.shape
    if (where := params.get(prefix + "wpe.weight")) is not None and where.dim() == 2:
        positions = where.shape[0]
    if (fc := params.get(prefix + "h.0.mlp.c_fc.weight")) is not None and fc.dim() == 2:
        inner = fc.shape[1]
    pattern = re.compile(re.escape(prefix) + r"h\.(\d+)\.")
    found = [int(m.group(1)) for k in params if (m := pattern.match(k))]
    return vocab, positions, width, 1 + max(found) if found else layers, inner


def check_state(net: nn.Module, params: dict[str, torch.Tensor], source: str) -> None:
    """WrongCheckpoint naming every key `net` needs and `params` lacks, every key of `params`
    that no part of `net` takes, and every tensor whose shape is not `net`'s."""
    wanted = net.state_dict()
    missing = [k for k in wanted if k not in params]
    unexpected = [k for k in params if k not in wanted and not _SPARE.fullmatch(k)]
    wrong = [
        f"{k} is {tuple(params[k].shape)}, not {tuple(wanted[k].shape)}"
        for k in wanted
        if k in params and tuple(params[k].shape) != tuple(wanted[k].shape)
    ]
    if missing or unexpected or wrong:
        raise WrongCheckpoint(source, missing, unexpected, wrong)


_HTSAT = "audio_encoder.base.htsat."
_STAGE = re.compile(re.escape(_HTSAT) + r"layers\.(\d+)\.blocks\.(\d+)\.")


def audio_sizes(params: dict[str, torch.Tensor]) -> tuple[AudioSizes, int]:
    """((width, depths, DFT points), joint size) of the file's HTSAT and projections;
    HTSAT-tiny's and 1,024 where the tensor that tells is absent (the check then names what is
    missing)."""
    width, depths, n_fft = HTSAT_TINY
    if (patch := params.get(_HTSAT + "patch_embed.proj.weight")) is not None and patch.dim():
        width = int(patch.shape[0])
    dft = params.get(_HTSAT + "spectrogram_extractor.stft.conv_real.weight")
    if dft is not None and dft.dim() == 3:
        n_fft = int(dft.shape[2])
    blocks: dict[int, int] = {}
    for key in params:
        if m := _STAGE.match(key):
            stage, block = int(m.group(1)), int(m.group(2))
            blocks[stage] = max(blocks.get(stage, 0), block + 1)
    if blocks:
        depths = tuple(blocks.get(i, 0) for i in range(1 + max(blocks)))
    joint = JOINT
    if (first := params.get("audio_encoder.projection.linear1.weight")) is not None:
        joint = int(first.shape[0]) if first.dim() else joint
    return (width, depths, n_fft), joint


def impossible_audio(width: int, depths: tuple[int, ...], n_fft: int) -> list[str]:
    """Why no HTSAT has these sizes (its heads per stage fixed, the 64 x 64 patches halved at
    each of up to four stages): nothing to build the file's network from."""
    problems = []
    if not 1 <= len(depths) <= len(HEADS) or 0 in depths:
        problems.append(f"HTSAT's stages hold {list(depths)} blocks, not 1 to 4 stages of some")
    if width < HEADS[0] or width % HEADS[0]:
        problems.append(f"HTSAT's width {width} is not divided among its {HEADS[0]} heads")
    if n_fft < 2 or n_fft % 2:
        problems.append(f"HTSAT's DFT kernels of {n_fft} points are not an even number of them")
    return problems


def read_release(path: str | Path) -> tuple[dict[str, torch.Tensor], bool]:
    """The file's parameters, and whether it says it is an untrained stand-in."""
    from ..embeddings.vggish import _state_dict, _torch_load

    raw = _torch_load(Path(path))
    if not isinstance(raw, dict):
        raise ValueError(f"{path} holds no state dict (a {type(raw).__name__})")
    return _state_dict(raw), bool(raw.get(UNTRAINED))


def load_msclap(path: str | Path) -> MsClap:
    """The released model from its file, checked whole, on the CPU in eval mode."""
    source = str(path)
    params, untrained = read_release(path)
    audio, joint = audio_sizes(params)
    if problems := impossible_audio(*audio):
        raise ValueError(
            f"{source} is not an MS-CLAP 2023 checkpoint ({WEIGHTS_FILE}, {WEIGHTS_SOURCE}): "
            + "; ".join(problems)
        )
    with torch.device("meta"):
        net = MsClap(text_sizes(params), audio, joint)
    check_state(net, params, source)
    wanted = net.state_dict()
    net.load_state_dict(
        {k: params[k].float() if params[k].is_floating_point() else params[k] for k in wanted},
        assign=True,
    )
    net.untrained = untrained
    return net.eval()


def text_embeddings(
    encoder: TextEncoder, tokenizer: Gpt2Tokenizer, texts: list[str]
) -> torch.Tensor:
    """The projected embeddings [n, joint] of texts, not normalised, as msclap's."""
    device = next(encoder.parameters()).device
    with torch.inference_mode():
        return encoder(tokenizer(texts).to(device))
