"""A HEAR-API embedding module that takes its time: 0.3 s per call, so a test can kill the worker
in the middle of an embedding job. Features: per 0.25 s frame, the log energy in 8 bands."""

from __future__ import annotations

import time

import torch


class Model(torch.nn.Module):
    sample_rate = 16_000
    scene_embedding_size = 8
    timestamp_embedding_size = 8


def load_model(model_file_path: str = "") -> Model:
    return Model()


def get_timestamp_embeddings(audio: torch.Tensor, model: Model):
    time.sleep(0.3)
    hop = model.sample_rate // 4
    frames = audio[:, : audio.shape[1] // hop * hop].reshape(audio.shape[0], -1, hop)
    spectrum = torch.fft.rfft(frames, dim=-1).abs().square()
    bands = torch.stack([b.sum(-1) for b in spectrum.chunk(8, dim=-1)], dim=-1)
    emb = torch.log(bands + 1e-6)
    stamps = (torch.arange(emb.shape[1]) * 250.0 + 125.0).expand(emb.shape[0], -1)
    return emb, stamps


def get_scene_embeddings(audio: torch.Tensor, model: Model) -> torch.Tensor:
    return get_timestamp_embeddings(audio, model)[0].mean(dim=1)
