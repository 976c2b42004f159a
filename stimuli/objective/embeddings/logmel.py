"""A weight-free embedding: mean and standard deviation of log-mel bands over short windows.

Not a perceptual model: it needs no download and runs fast, so the demo and the tests that need
speed use it. Each 0.5 s window (hop 0.25 s by default) gives 2 x 64 values.
HEAR module; `load_model` takes options like the other built-ins.
"""

from __future__ import annotations

import numpy as np
import torch

NEEDS_WEIGHTS = False
SAMPLE_RATE = 22_050


def mel_matrix(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> np.ndarray:
    """Triangular HTK-mel filters [n_fft // 2 + 1, n_mels]."""

    def hz_to_mel(hz):
        return 2595.0 * np.log10(1.0 + np.asarray(hz) / 700.0)

    def mel_to_hz(mel):
        return 700.0 * (10.0 ** (np.asarray(mel) / 2595.0) - 1.0)

    bins = np.linspace(0, sample_rate / 2, n_fft // 2 + 1)
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    lower, centre, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (bins[:, None] - lower) / (centre - lower)
    falling = (upper - bins[:, None]) / (upper - centre)
    return np.clip(np.minimum(rising, falling), 0.0, None).astype(np.float32)


class LogMelModel(torch.nn.Module):
    def __init__(self, n_mels: int = 64, window_s: float = 0.5, hop_s: float = 0.25, device=None):
        super().__init__()
        self.sample_rate = SAMPLE_RATE
        self.n_fft, self.stft_hop = 1024, 256
        self.window_s, self.hop_s, self.n_mels = float(window_s), float(hop_s), int(n_mels)
        self.timestamp_embedding_size = self.scene_embedding_size = 2 * self.n_mels
        self.options_id = f"mels{self.n_mels}-win{self.window_s:g}-hop{self.hop_s:g}"
        self.weights_id = "none"
        mel = mel_matrix(SAMPLE_RATE, self.n_fft, self.n_mels, 50.0, SAMPLE_RATE / 2)
        self.register_buffer("mel", torch.from_numpy(mel))
        self.register_buffer("window", torch.hann_window(self.n_fft))
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.to(self.device)

    def forward(self, audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        spec = torch.stft(
            audio.float(), self.n_fft, self.stft_hop, window=self.window, return_complex=True
        )
        power = spec.abs().square().transpose(1, 2)  # [n, stft frames, bins]
        logmel = torch.log(power @ self.mel + 1e-6)  # [n, stft frames, mels]
        fps = self.sample_rate / self.stft_hop
        size = max(1, round(self.window_s * fps))
        step = max(1, round(self.hop_s * fps))
        if logmel.shape[1] < size:
            logmel = torch.nn.functional.pad(logmel, (0, 0, 0, size - logmel.shape[1]))
        windows = logmel.unfold(1, size, step)  # [n, frames, mels, size]
        emb = torch.cat([windows.mean(-1), windows.std(-1)], dim=-1)
        starts = torch.arange(emb.shape[1], device=emb.device) * step / fps
        stamps = (starts + size / fps / 2) * 1000.0
        return emb, stamps.expand(emb.shape[0], -1)


def load_model(
    model_file_path: str = "",
    *,
    device: str | None = None,
    n_mels: int = 64,
    window_s: float = 0.5,
    hop_s: float = 0.25,
) -> LogMelModel:
    return LogMelModel(n_mels=n_mels, window_s=window_s, hop_s=hop_s, device=device)


def get_timestamp_embeddings(
    audio: torch.Tensor, model: LogMelModel
) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.inference_mode():
        return model(audio.to(model.device))


def get_scene_embeddings(audio: torch.Tensor, model: LogMelModel) -> torch.Tensor:
    emb, _ = get_timestamp_embeddings(audio, model)
    return emb.mean(dim=1)


def embed_batch(audio: np.ndarray, input_rate: int, model: LogMelModel) -> np.ndarray:
    x = np.asarray(audio, dtype=np.float32)
    if input_rate != model.sample_rate:
        import soxr

        x = np.stack([soxr.resample(row, input_rate, model.sample_rate) for row in x])
    emb, _ = get_timestamp_embeddings(torch.from_numpy(np.ascontiguousarray(x)), model)
    return emb.float().cpu().numpy()
