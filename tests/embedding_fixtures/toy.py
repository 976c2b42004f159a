"""A toy built-in embedding model, as the contributor's checklist adds one: a HEAR module whose
`load_model` takes the built-ins' options. Features: per 0.25 s frame, the log energy in `bands`
bands."""

from __future__ import annotations

import torch

NEEDS_WEIGHTS = False


class Model(torch.nn.Module):
    sample_rate = 16_000

    def __init__(self, bands: int):
        super().__init__()
        self.bands = bands
        self.scene_embedding_size = self.timestamp_embedding_size = bands


def load_model(model_file_path: str = "", device=None, bands: int = 8) -> Model:
    return Model(int(bands))


def get_timestamp_embeddings(audio: torch.Tensor, model: Model):
    hop = model.sample_rate // 4
    frames = audio[:, : audio.shape[1] // hop * hop].reshape(audio.shape[0], -1, hop)
    spectrum = torch.fft.rfft(frames, dim=-1).abs().square()
    emb = torch.log(torch.stack([b.sum(-1) for b in spectrum.chunk(model.bands, -1)], -1) + 1e-6)
    stamps = (torch.arange(emb.shape[1]) * 250.0 + 125.0).expand(emb.shape[0], -1)
    return emb, stamps


def get_scene_embeddings(audio: torch.Tensor, model: Model) -> torch.Tensor:
    return get_timestamp_embeddings(audio, model)[0].mean(dim=1)
