"""LAION-CLAP's text side, for the CLAP score: the cosine between a prompt and a clip.

The released checkpoints hold the text branch beside the audio branch: RoBERTa-base
(`text_branch.*`, the Hugging Face parameter names) and a two-layer projection
(`text_projection.*`) into the 512-d space the audio encoder projects to. The branch is built
here under those names, its sizes read from the checkpoint (layers, width, vocabulary; heads
of 64 dimensions, as RoBERTa-base's 12 of 768), and the prompt's embedding is the release's:
RoBERTa's pooler output (tanh of a dense layer on the first token), projected, L2-normalised.

Prompts are tokenised as the release does with `RobertaTokenizer('roberta-base')`: byte-level
BPE from RoBERTa's released `vocab.json` and `merges.txt` (Hugging Face, FacebookAI/roberta-base),
`<s>` ... `</s>`, at most 77 tokens, padded with `<pad>`. The split into words is GPT-2's pattern;
without the `regex` package, letters and digits are Python's Unicode word classes, which agree
with it on every prompt of letters, digits, punctuation and spaces.
"""

from __future__ import annotations

import json
import re
from functools import cache
from itertools import pairwise
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .base import WeightsMissing
from .clap import EMBEDDING_SIZE, WEIGHTS_HELP, ClapAudio, fusion_refusal

CONTEXT = 77
BOS, PAD, EOS = "<s>", "<pad>", "</s>"
TOKENIZER_FILES = ("vocab.json", "merges.txt")
TOKENIZER_HELP = (
    "The CLAP score needs RoBERTa-base's tokenizer files vocab.json and merges.txt, published "
    "on Hugging Face in the FacebookAI/roberta-base repository, in one folder."
)
# GPT-2's split: contractions, letters, digits, other symbols, each with one leading space.
_WORDS = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


@cache
def _byte_chars() -> dict[int, str]:
    """GPT-2's reversible map of bytes to printable characters."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    kept += range(ord("®"), ord("ÿ") + 1)
    chars = {b: chr(b) for b in kept}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


class BpeTokenizer:
    """RoBERTa's byte-level BPE from its released vocab.json and merges.txt (GPT-2's BPE too:
    only the special tokens differ, which `check_vocabulary` checks)."""

    HELP = TOKENIZER_HELP  # where the files are published, for an error naming them

    def __init__(self, folder: str | Path):
        folder = Path(folder)
        missing = [name for name in TOKENIZER_FILES if not (folder / name).is_file()]
        if missing:
            raise WeightsMissing(f"{', '.join(missing)} missing in {folder}. {self.HELP}")
        self.vocab: dict[str, int] = json.loads((folder / "vocab.json").read_text("utf-8"))
        lines = (folder / "merges.txt").read_text("utf-8").splitlines()
        pairs = [tuple(line.split()) for line in lines if line and not line.startswith("#")]
        self.ranks = {pair: rank for rank, pair in enumerate(pairs) if len(pair) == 2}
        self.check_vocabulary(folder)
        self._words: dict[str, list[str]] = {}

    def check_vocabulary(self, folder: Path) -> None:
        for token in (BOS, PAD, EOS):
            if token not in self.vocab:
                raise ValueError(
                    f"{folder / 'vocab.json'} has no {token}: not RoBERTa's vocabulary"
                )

    def _bpe(self, word: str) -> list[str]:
        if word in self._words:
            return self._words[word]
        parts = list(word)
        while len(parts) > 1:
            never = len(self.ranks)
            rank, i = min(
                (self.ranks.get(pair, never), i) for i, pair in enumerate(pairwise(parts))
            )
            if rank == never:
                break
            first, second = parts[i], parts[i + 1]
            merged, j = [], 0
            while j < len(parts):
                if j < len(parts) - 1 and parts[j] == first and parts[j + 1] == second:
                    merged.append(first + second)
                    j += 2
                else:
                    merged.append(parts[j])
                    j += 1
            parts = merged
        self._words[word] = parts
        return parts

    def ids(self, text: str) -> list[int]:
        chars = _byte_chars()
        out = []
        for word in _WORDS.findall(text):
            mapped = "".join(chars[b] for b in word.encode("utf-8"))
            out.extend(self.vocab[piece] for piece in self._bpe(mapped) if piece in self.vocab)
        return out

    def __call__(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(input ids, attention mask), [n, 77] each, as the release pads and truncates."""
        rows = []
        for text in texts:
            ids = [self.vocab[BOS], *self.ids(text)[: CONTEXT - 2], self.vocab[EOS]]
            rows.append(ids + [self.vocab[PAD]] * (CONTEXT - len(ids)))
        ids = torch.tensor(rows, dtype=torch.long)
        return ids, (ids != self.vocab[PAD]).long()


class _Dense(nn.Module):
    def __init__(self, inputs: int, outputs: int, norm: bool):
        super().__init__()
        self.dense = nn.Linear(inputs, outputs)
        if norm:
            self.LayerNorm = nn.LayerNorm(outputs, eps=1e-5)


class _SelfAttention(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)


class _Attention(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.self = _SelfAttention(width)
        self.output = _Dense(width, width, norm=True)


class _Layer(nn.Module):
    def __init__(self, width: int, inner: int):
        super().__init__()
        self.attention = _Attention(width)
        self.intermediate = _Dense(width, inner, norm=False)
        self.output = _Dense(inner, width, norm=True)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n, tokens, width = x.shape
        heads = max(1, width // 64)
        att = self.attention.self

        def split(layer: nn.Linear) -> torch.Tensor:
            return layer(x).view(n, tokens, heads, -1).transpose(1, 2)

        y = F.scaled_dot_product_attention(
            split(att.query), split(att.key), split(att.value), attn_mask=bias
        )
        y = self.attention.output.dense(y.transpose(1, 2).reshape(n, tokens, width))
        x = self.attention.output.LayerNorm(x + y)
        y = self.output.dense(F.gelu(self.intermediate.dense(x)))
        return self.output.LayerNorm(x + y)


class _Embeddings(nn.Module):
    def __init__(self, vocab: int, positions: int, width: int):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, width)
        self.position_embeddings = nn.Embedding(positions, width)
        self.token_type_embeddings = nn.Embedding(1, width)
        self.LayerNorm = nn.LayerNorm(width, eps=1e-5)


class _Encoder(nn.Module):
    def __init__(self, layers: int, width: int, inner: int):
        super().__init__()
        self.layer = nn.ModuleList(_Layer(width, inner) for _ in range(layers))


class _Pooler(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.dense = nn.Linear(width, width)


class Roberta(nn.Module):
    """RoBERTa by the Hugging Face names: (ids, mask) [n, tokens] -> pooler output [n, width]."""

    PADDING_INDEX = 1  # positions count from 2: RoBERTa reserves 0 and its padding id 1

    def __init__(self, vocab: int, positions: int, width: int, layers: int, inner: int):
        super().__init__()
        self.embeddings = _Embeddings(vocab, positions, width)
        self.encoder = _Encoder(layers, width, inner)
        self.pooler = _Pooler(width)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        emb = self.embeddings
        positions = torch.cumsum(mask, dim=1) * mask + self.PADDING_INDEX
        x = emb.word_embeddings(ids) + emb.position_embeddings(positions)
        x = emb.LayerNorm(x + emb.token_type_embeddings.weight[0])
        bias = torch.zeros(mask.shape, dtype=x.dtype, device=x.device)
        bias = bias.masked_fill(mask == 0, torch.finfo(x.dtype).min)[:, None, None, :]
        for layer in self.encoder.layer:
            x = layer(x, bias)
        return torch.tanh(self.pooler.dense(x[:, 0]))


class ClapText(nn.Module):
    """The text side of the released CLAP model: `text_branch` and `text_projection`."""

    def __init__(self, vocab: int, positions: int, width: int, layers: int, inner: int):
        super().__init__()
        self.text_branch = Roberta(vocab, positions, width, layers, inner)
        self.text_projection = nn.Sequential(
            nn.Linear(width, EMBEDDING_SIZE), nn.ReLU(), nn.Linear(EMBEDDING_SIZE, EMBEDDING_SIZE)
        )

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text_projection(self.text_branch(ids, mask)), dim=-1)


def text_sizes(params: dict[str, torch.Tensor], source: str) -> tuple[int, ...]:
    """(vocabulary, positions, width, layers, inner width) of the checkpoint's text branch."""
    words = params.get("text_branch.embeddings.word_embeddings.weight")
    positions = params.get("text_branch.embeddings.position_embeddings.weight")
    inner = params.get("text_branch.encoder.layer.0.intermediate.dense.weight")
    if words is None or positions is None or inner is None:
        raise ValueError(
            f"{source} holds no RoBERTa text branch (text_branch.embeddings.word_embeddings"
            f".weight, ...): the CLAP score needs a checkpoint of both branches. {WEIGHTS_HELP}"
        )
    pattern = re.compile(r"text_branch\.encoder\.layer\.(\d+)\.")
    layers = 1 + max(int(m.group(1)) for k in params if (m := pattern.match(k)))
    return words.shape[0], positions.shape[0], words.shape[1], layers, inner.shape[0]


class ClapScorer:
    """Both CLAP branches from one released checkpoint, and the tokenizer, on one device."""

    def __init__(self, checkpoint: str | Path, tokenizer: str | Path, variant: str, device=None):
        from .clap import ClapModel
        from .released import load_released, read_state_dict

        source = str(checkpoint)
        params = read_state_dict(checkpoint)
        fusion_refusal(params, source)
        sizes = text_sizes(params, source)
        hint = f"is it another variant? {WEIGHTS_HELP}"
        audio = load_released(
            lambda: ClapAudio(variant), params, source=source, label=f"CLAP {variant}", hint=hint
        )
        text = load_released(
            lambda: ClapText(*sizes), params, source=source, label="CLAP text", hint=WEIGHTS_HELP
        )
        self.tokenizer = BpeTokenizer(tokenizer)
        self.audio = ClapModel(audio, variant, weights_id="", device=device)
        self.device = self.audio.device
        self.text = text.eval().to(self.device)

    def text_embeddings(self, prompts: list[str]) -> torch.Tensor:
        ids, mask = self.tokenizer(prompts)
        with torch.inference_mode():
            return self.text(ids.to(self.device), mask.to(self.device))

    def audio_embeddings(self, audio, input_rate: int) -> torch.Tensor:
        """One unit vector per clip [n, 512]: the mean of its windows' embeddings, renormalised."""
        from .clap import embed_batch

        emb = torch.from_numpy(embed_batch(audio, input_rate, self.audio))
        return F.normalize(emb.mean(dim=1), dim=-1)


def cosine(audio: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
    """The CLAP score of each pair: the cosine of its (unit-length) audio and text embeddings."""
    return (F.normalize(audio, dim=-1) * F.normalize(text, dim=-1)).sum(dim=-1)
