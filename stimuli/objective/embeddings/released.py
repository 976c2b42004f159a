"""Loading a released checkpoint into a network built here under the release's parameter names.

The network is built on the meta device (no memory, no init), the checkpoint's tensors are checked
against it, name by name and shape by shape, and assigned. A file of another model or variant is
an error that names what is missing or of the wrong shape, so the organizer learns which file
they hold, not a traceback of `load_state_dict`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The parameters of a checkpoint file: a bare state dict or one nested in a training dict."""
    from .vggish import _state_dict, _torch_load

    raw = _torch_load(Path(path))
    if not isinstance(raw, dict):
        raise ValueError(f"{path} holds no state dict (a {type(raw).__name__})")
    return _state_dict(raw)


def load_released(
    build: Callable[[], nn.Module],
    params: dict[str, torch.Tensor],
    *,
    source: str,
    label: str,
    hint: str,
) -> nn.Module:
    """`build()`'s network with `params` assigned; ValueError naming every mismatch (up to 4 each)."""
    with torch.device("meta"):
        net = build()
    wanted = net.state_dict()
    missing = [k for k in wanted if k not in params]
    wrong = [k for k in wanted if k in params and tuple(params[k].shape) != tuple(wanted[k].shape)]
    if missing or wrong:
        problems = [f"lacks {', '.join(missing[:4])}"] if missing else []
        problems += [f"{k} is {tuple(params[k].shape)}" for k in wrong[:4]]
        raise ValueError(f"{source} holds no {label} checkpoint: {'; '.join(problems)} ({hint})")
    net.load_state_dict(
        {k: params[k].float() if params[k].is_floating_point() else params[k] for k in wanted},
        assign=True,
    )
    return net


def random_init(build: Callable[[], nn.Module], seed: int = 0) -> nn.Module:
    """`build()`'s network with a fixed random init (for tests and dry runs without weights)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = build()
        for name, tensor in net.state_dict().items():
            # Zero-initialised parameters (tokens, position embeddings) would hide wiring mistakes.
            skip = not tensor.is_floating_point() or name.endswith(("running_var", "attn_mask"))
            if not skip and not tensor.abs().sum():
                tensor.normal_(0.0, 0.02)
    return net
