"""The spec of an embedding model, its stable id (for the cache), and the HEAR adapter."""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

# Built-in models are HEAR modules of this package; their `load_model` also takes options.
BUILTIN_MODULES = {
    "openl3": "stimuli.objective.embeddings.openl3",
    "vggish": "stimuli.objective.embeddings.vggish",
    "logmel": "stimuli.objective.embeddings.logmel",
    "panns": "stimuli.objective.embeddings.panns",
    "passt": "stimuli.objective.embeddings.passt",
    "clap": "stimuli.objective.embeddings.clap",
}


# In a declared model id, the weights part that stands for any weights file of the model: for
# published statistics, whose makers' file the platform cannot hash.
ANY_WEIGHTS = "*"
MODEL_ID_LENGTH = 200


def make_model_id(name: str, options_id: str, weights_id: str) -> str:
    """`name:options@weights`, the form every embedding cache key and FAD result carries."""
    return f"{name}:{options_id}@{weights_id}"[:MODEL_ID_LENGTH]


def split_model_id(model_id: str) -> tuple[str, str, str]:
    """(name, options, weights) of a model id; ValueError when it has not that form.

    Names (built-ins, import paths) hold no ':' and weights ids (hashes, 'random', versions)
    no '@', so the first ':' and the last '@' delimit the options, whatever they contain.
    """
    name, colon, rest = model_id.partition(":")
    options, at, weights = rest.rpartition("@")
    if not (colon and at and name.strip() and options and weights):
        raise ValueError(f"{model_id!r} is not a model id of the form name:options@weights")
    return name, options, weights


def model_id_matches(declared: str, model_id: str) -> bool:
    """Whether a model with `model_id` is the one `declared` names (`@*`: any weights file)."""
    name, options, weights = split_model_id(declared)
    if weights != ANY_WEIGHTS:
        return declared == model_id
    try:
        return split_model_id(model_id)[:2] == (name, options)
    except ValueError:
        return False


class WeightsMissing(FileNotFoundError):
    """A model's weights file is not where the settings say; the message says how to get it."""


@dataclass(frozen=True)
class ModelSpec:
    """What names an embedding model: `name` (built-in or import path), options, weights file."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    weights: str = ""

    @classmethod
    def parse(
        cls, value: str | ModelSpec, options: dict | None = None, weights: str = ""
    ) -> ModelSpec:
        if isinstance(value, ModelSpec):
            return value
        return cls(name=value.strip(), options=dict(options or {}), weights=weights or "")

    @property
    def module_path(self) -> str:
        return BUILTIN_MODULES.get(self.name, self.name)

    @property
    def is_builtin(self) -> bool:
        return self.name in BUILTIN_MODULES


def file_digest(path: str | Path, length: int = 12) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:length]


class EmbeddingModel:
    """A loaded HEAR model and what the evaluation needs around it.

    `embed(batch)` takes float32 audio [n, samples] at any `input_rate` and returns per-clip
    frame embeddings [n, frames, d] as float32 numpy; resampling to the model's rate is the
    model's own business (built-in models do it on torch), except for external HEAR modules,
    which get audio already resampled here.
    """

    def __init__(self, spec: ModelSpec, module: Any, model: Any, weights_id: str):
        self.spec = spec
        self.module = module
        self.model = model
        self.weights_id = weights_id
        self.sample_rate = int(model.sample_rate)
        self.timestamp_embedding_size = int(model.timestamp_embedding_size)
        self.scene_embedding_size = int(model.scene_embedding_size)

    @property
    def model_id(self) -> str:
        """Stable across runs: name, options and weights; the embedding cache is keyed on it."""
        options = json.dumps(self.spec.options, sort_keys=True, separators=(",", ":"))
        resolved = getattr(self.model, "options_id", None) or options
        return make_model_id(self.spec.name, resolved, self.weights_id)

    @property
    def device(self) -> str:
        return str(getattr(self.model, "device", "cpu"))

    def embed(self, audio: np.ndarray, input_rate: int) -> np.ndarray:
        """Frame embeddings [n, frames, d] of a batch of clips at `input_rate`."""
        import torch

        if hasattr(self.module, "embed_batch"):
            return self.module.embed_batch(audio, input_rate, self.model)
        x = np.asarray(audio, dtype=np.float32)
        if input_rate != self.sample_rate:
            import soxr

            x = np.stack([soxr.resample(row, input_rate, self.sample_rate) for row in x])
        device = getattr(self.model, "device", "cpu")
        with torch.inference_mode():
            emb, _ = self.module.get_timestamp_embeddings(
                torch.from_numpy(x).to(device), self.model
            )
        return emb.float().cpu().numpy()


def default_weights_path(module: Any, options: dict) -> Path:
    """Where a built-in model's weights are expected: FOLEY_MODEL_DIR / the module's file name."""
    from django.conf import settings

    path = Path(settings.FOLEY_MODEL_DIR) / module.default_weights_file(**options)
    if not path.is_file():
        raise WeightsMissing(
            f"Weights file {path} is missing. {module.WEIGHTS_HELP} "
            "Put it there, set FOLEY_MODEL_DIR, or name a weights file in the challenge's "
            "objective settings."
        )
    return path


def load_embedding_model(
    spec: str | ModelSpec,
    options: dict | None = None,
    weights: str = "",
    device: str | None = None,
) -> EmbeddingModel:
    """Import the spec's module and load its model (built-ins take options and a device)."""
    spec = ModelSpec.parse(spec, options, weights)
    try:
        module = importlib.import_module(spec.module_path)
    except ImportError as exc:
        raise ValueError(
            f"Embedding model {spec.name!r}: cannot import {spec.module_path!r} ({exc}). "
            f"Name a built-in ({', '.join(BUILTIN_MODULES)}) or an installed HEAR module."
        ) from exc
    for name in ("load_model", "get_timestamp_embeddings", "get_scene_embeddings"):
        if not hasattr(module, name):
            raise ValueError(f"{spec.module_path} is not a HEAR module: it has no {name}()")
    if spec.is_builtin and not spec.weights and getattr(module, "NEEDS_WEIGHTS", False):
        spec = replace(spec, weights=str(default_weights_path(module, spec.options)))
    if spec.weights and spec.weights != "random" and not Path(spec.weights).is_file():
        raise WeightsMissing(f"Weights file {spec.weights} of model {spec.name!r} does not exist.")
    if spec.is_builtin:
        model = module.load_model(spec.weights or "", device=device, **spec.options)
    else:
        if spec.options:
            raise ValueError(f"{spec.name} is an external HEAR module and takes no options")
        model = module.load_model(spec.weights) if spec.weights else module.load_model()
        if device and hasattr(model, "to"):
            model = model.to(device)
    weights_id = (
        file_digest(spec.weights)
        if spec.weights and spec.weights != "random"
        else getattr(model, "weights_id", None) or getattr(module, "__version__", "default")
    )
    return EmbeddingModel(spec, module, model, str(weights_id))
