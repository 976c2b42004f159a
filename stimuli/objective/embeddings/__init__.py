"""Audio embedding models behind one interface: the HEAR common API.

A model is named by a spec: a built-in name (`openl3`, `vggish`, `logmel`, `panns`, `passt`, `clap`) or the import path of
any installed HEAR-compatible module (`hearbaseline.torchcrepe`), plus options and an optional
weights file. `load_embedding_model` returns an `EmbeddingModel` that the evaluation uses
without knowing which kind it is. Worker-side only: importing this package pulls in torch lazily,
at `load_embedding_model`, so the web process can import the names without torch.
"""

from __future__ import annotations

from .base import (
    BUILTIN_MODULES,
    EmbeddingModel,
    ModelSpec,
    WeightsMissing,
    load_embedding_model,
)

__all__ = [
    "BUILTIN_MODULES",
    "EmbeddingModel",
    "ModelSpec",
    "WeightsMissing",
    "load_embedding_model",
]
