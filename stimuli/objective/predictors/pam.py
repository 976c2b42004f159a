"""PAM (Deshmukh et al., "PAM: Prompting Audio-Language Models for Audio Quality Assessment",
Interspeech 2024, arXiv 2402.00282): a clip's quality as the chance that MS-CLAP gives the
prompt of clean sound over its opposite.

The authors' code (soham97/PAM) asks MS-CLAP 2023 (`msclap.py` beside this module) about two
prompts, "the sound is clear and clean." and "the sound is noisy and with artifacts.": the
cosines of a 7 s window's audio embedding with both prompts' text embeddings, times the
model's `exp(logit_scale)`, go through a softmax, and the first prompt's share is the window's
score, in [0, 1]. A clip's score is the mean over its windows. It needs no reference audio and
no prompt of the clip's own; the paper found it following listeners' ratings of overall quality
for text-to-audio and text-to-music systems.

The clip is prepared as PAM's data loading does: one channel, resampled to 44.1 kHz (as
torchaudio's `Resample` does), then
- a clip of at most 7 s is repeated as often as it takes to fill 7 s and cut there: one window;
- a longer clip gives its whole 7 s windows from the start and, where samples remain, one more
  window of its last 7 s (the default of PAM's `run.py`); `first_only=True` keeps its first 7 s
  only, as PAM's `pcc.py` did for the paper's correlations.

Files: MS-CLAP's `CLAP_weights_2023.pth` (Hugging Face, microsoft/msclap) in FOLEY_MODEL_DIR or
where FOLEY_PAM_WEIGHTS names it, and GPT-2's `vocab.json` and `merges.txt` (Hugging Face,
openai-community/gpt2) in FOLEY_MODEL_DIR/gpt2 or the folder FOLEY_PAM_TOKENIZER names. Both
prompts are embedded once, when the model is loaded; the text encoder is then let go.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ..embeddings.base import WeightsMissing
from .msclap import (
    SAMPLE_RATE,
    TOKENIZER_SOURCE,
    WEIGHTS_FILE,
    WEIGHTS_SOURCE,
    WINDOW_SAMPLES,
    AudioEncoder,
    Gpt2Tokenizer,
    load_msclap,
    resample,
    text_embeddings,
)

# PAM's prompts, the first the quality scored.
PROMPTS = ("the sound is clear and clean.", "the sound is noisy and with artifacts.")
WEIGHTS_SETTING, TOKENIZER_SETTING = "FOLEY_PAM_WEIGHTS", "FOLEY_PAM_TOKENIZER"
TOKENIZER_FOLDER = "gpt2"
# Windows embedded at once: a few hundred MB of HTSAT's activations on the CPU.
BATCH = 8


class Pam:
    """MS-CLAP's audio encoder on a device, PAM's prompts embedded and normalised, and whether
    the file was an untrained stand-in (standins.py: its scores mean nothing)."""

    def __init__(
        self,
        audio: AudioEncoder,
        prompts: torch.Tensor,
        scale: float,
        device: str | torch.device | None = None,
        untrained: bool = False,
    ):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.audio = audio.eval().to(self.device)
        self.prompts = F.normalize(prompts.float(), dim=-1).to(self.device)
        self.scale = float(scale)
        self.untrained = untrained

    def window_scores(self, windows: torch.Tensor) -> torch.Tensor:
        """PAM's score [n] of 7 s windows at 44.1 kHz [n, 308700]."""
        with torch.inference_mode():
            out = []
            for batch in windows.to(self.device).float().split(BATCH):
                audio = F.normalize(self.audio(batch), dim=-1)
                out.append(F.softmax(self.scale * audio @ self.prompts.T, dim=-1)[:, 0])
            return torch.cat(out)


def _settings_path(setting: str, default: str) -> Path:
    from django.conf import settings

    named = getattr(settings, setting, "")
    return Path(named) if named else Path(settings.FOLEY_MODEL_DIR) / default


def weights_help(path: Path) -> str:
    return (
        f"Weights file {path} is missing. PAM needs MS-CLAP's {WEIGHTS_FILE}, published on "
        f"{WEIGHTS_SOURCE}. Put it in FOLEY_MODEL_DIR or set {WEIGHTS_SETTING} to name it."
    )


def load(
    path: str | Path | None = None,
    tokenizer: str | Path | None = None,
    *,
    device: str | None = None,
) -> Pam:
    """PAM from the released MS-CLAP file and GPT-2's tokenizer folder; by default where
    FOLEY_PAM_WEIGHTS and FOLEY_PAM_TOKENIZER name them, else in FOLEY_MODEL_DIR."""
    path = Path(path) if path else _settings_path(WEIGHTS_SETTING, WEIGHTS_FILE)
    if not path.is_file():
        raise WeightsMissing(weights_help(path))
    folder = Path(tokenizer) if tokenizer else _settings_path(TOKENIZER_SETTING, TOKENIZER_FOLDER)
    try:
        words = Gpt2Tokenizer(folder)
    except WeightsMissing as exc:
        raise WeightsMissing(
            f"{exc} Put them in FOLEY_MODEL_DIR/{TOKENIZER_FOLDER} or set {TOKENIZER_SETTING} "
            f"to name their folder ({TOKENIZER_SOURCE})."
        ) from exc
    net = load_msclap(path)
    prompts = text_embeddings(net.caption_encoder, words, list(PROMPTS))
    scale = net.logit_scale.exp().item()
    return Pam(net.audio_encoder, prompts, scale, device, untrained=net.untrained)


def windows(audio: torch.Tensor, first_only: bool = False) -> torch.Tensor:
    """PAM's 7 s windows [n, 308700] of one clip at 44.1 kHz [samples]."""
    length = audio.shape[-1]
    if length <= WINDOW_SAMPLES:
        return audio.repeat(math.ceil(WINDOW_SAMPLES / length))[None, :WINDOW_SAMPLES]
    if first_only:
        return audio[None, :WINDOW_SAMPLES]
    whole = length // WINDOW_SAMPLES
    parts = list(audio[: whole * WINDOW_SAMPLES].split(WINDOW_SAMPLES))
    if length % WINDOW_SAMPLES:
        parts.append(audio[-WINDOW_SAMPLES:])
    return torch.stack(parts)


def _clip(model: Pam, audio: np.ndarray, sample_rate: int) -> torch.Tensor:
    """One clip (float samples [samples] or [1, samples]) at PAM's rate, on the model's
    device."""
    x = np.asarray(audio, dtype=np.float32)
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 1:
        raise ValueError(f"PAM scores one channel: audio of shape {x.shape} is not [samples]")
    if not x.size:
        raise ValueError("PAM cannot score an empty clip")
    return resample(torch.from_numpy(x).to(model.device), int(sample_rate), SAMPLE_RATE)


def score(model: Pam, audio: np.ndarray, sample_rate: int, *, first_only: bool = False) -> float:
    """PAM's score of one clip (float samples [samples] or [1, samples] at `sample_rate`): the
    mean over its 7 s windows of the clean prompt's softmax share, in [0, 1]."""
    clip = _clip(model, audio, sample_rate)
    return model.window_scores(windows(clip, first_only)).double().mean().item()


def scores(model: Pam, clips: list[np.ndarray], sample_rate: int) -> list[float]:
    """`score` of each clip, their windows encoded together in batches of `BATCH` (a 4-s clip
    is one window: clip by clip, the encoder would run on one window at a time)."""
    parts = [windows(_clip(model, audio, sample_rate)) for audio in clips]
    if not parts:
        return []
    values = model.window_scores(torch.cat(parts)).double()
    return [part.mean().item() for part in values.split([len(p) for p in parts])]
