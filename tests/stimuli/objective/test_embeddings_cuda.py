"""Every built-in embedding model gives the same embeddings on a GPU as on the CPU, through the
call the objective stage makes (resampling included). Runs where CUDA is available (a GPU
worker); skipped elsewhere. OpenL3 runs in half precision on CUDA and convolutions may use TF32,
hence a tolerance relative to the embeddings' scale."""

from __future__ import annotations

import numpy as np
import pytest

from stimuli.objective.embeddings import BUILTIN_MODULES, load_embedding_model

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

RATE = 22_050


def clips() -> np.ndarray:
    t = np.arange(4 * RATE) / RATE
    rng = np.random.default_rng(0)
    return np.stack(
        [
            0.3 * np.sin(2 * np.pi * (80 * t + 900 * t**2)) + 0.05 * rng.standard_normal(t.size),
            0.2 * np.sin(2 * np.pi * 440 * t) * (t % 0.5 < 0.1),
        ]
    ).astype(np.float32)


@pytest.mark.parametrize("name", list(BUILTIN_MODULES))
def test_cuda_matches_the_cpu(name):
    audio = clips()
    cpu = load_embedding_model(name, weights="random", device="cpu")
    cuda = load_embedding_model(name, weights="random", device="cuda")
    assert cuda.device.startswith("cuda")
    expected = cpu.embed(audio, RATE)
    got = cuda.embed(audio, RATE)
    assert got.shape == expected.shape and got.dtype == np.float32
    scale = float(np.abs(expected).max())
    assert scale > 0 and np.isfinite(got).all()
    assert float(np.abs(got - expected).max()) <= 2e-2 * scale
