"""Meta's Audiobox Aesthetics predictor (Tjandra et al., "Meta Audiobox Aesthetics: Unified
Automatic Quality Assessment for Speech, Music, and Sound", arXiv 2502.05139): four ratings of a
clip on a 1-10 scale, as its listeners were trained to give them: PQ (production quality), PC
(production complexity), CE (content enjoyment) and CU (content usefulness).

The network is WavLM Base (`wavlm.py`) and, for each axis, a softmax-weighted sum of its 13
hidden states, the mean over the clip's frames, L2-normalised, and a small MLP to one number.
It is built here under the parameter names of the authors' `audiobox_aesthetics` package, so
their released `checkpoint.pt` (Hugging Face `facebook/audiobox-aesthetics`, CC-BY-4.0) loads as
it is. That file is a dict of

- `state_dict`: the model's parameters, each name prefixed `model.`: `wavlm_model.*` the
  encoder, `layer_weights.<axis>` the 13 logits of the axis's layer weighting and
  `proj_layer.<axis>.<i>.*` the axis's head (numbered as the release's `nn.Sequential` numbers
  its linear layers, layer norms, GELUs and dropouts);
- `model_cfg`: what the release builds the heads from (`proj_num_layer`, `proj_ln`,
  `proj_act_fn`, `proj_dropout`, `nth_layer`, `use_weighted_layer_sum`, `precision`,
  `normalize_embed`, `output_dim`);
- `target_transform`: per axis the `mean` and `std` of the training ratings: the heads predict
  standardised ratings, which are scaled back.

The encoder's sizes (WavLM Base's in the release) are read from the file's tensors, so a file
in the same layout with a smaller encoder loads too (the demo's untrained stand-in); `load` then
checks all of it against the network of those sizes and names every missing, unexpected or
misshapen parameter at once. A file that carries `untrained_standin` beside those entries (the
platform's stand-ins, standins.py) loads as one, and says so (`AestheticsModel.untrained`).
The release computes in float32 whatever `precision` says (its autocast switch compares the
torch dtype with "16" and "bf16", so it never turns on), and so does this module.

Preprocessing as the release's `AesPredictor`: the clip is mixed to mono (the mean of its
channels) and resampled to 16 kHz; it is cut into 10 s windows every 10 s, the last one
zero-padded to 10 s, the padding masked out of the attention and the pooling; each window is
rated, its ratings scaled back, and the clip's rating is the mean of its windows' weighted by
the share of each window that is the clip's. The release resamples with torchaudio's
windowed-sinc filter; here julius resamples with the same filter width (6 zero crossings) and
cutoff (0.99 of the lower Nyquist frequency) and the same output length, which leaves small
differences (julius normalises each filter phase to unit gain and repeats the edge samples
where torchaudio pads with zeros). Audio already at 16 kHz is not resampled by either.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..embeddings.base import WeightsMissing, file_digest
from . import UNTRAINED
from .wavlm import WAVLM_BASE, WavLM, WavLMSizes, sizes_of

AXES = ("PQ", "PC", "CE", "CU")
SAMPLE_RATE = 16_000
WINDOW = HOP = 10 * SAMPLE_RATE
# torchaudio's default windowed-sinc filter, which the release resamples with.
RESAMPLE_ZEROS, RESAMPLE_ROLLOFF = 6, 0.99
SETTING = "FOLEY_AESTHETICS_WEIGHTS"
CHECKPOINT_FILE = "checkpoint.pt"
# Under FOLEY_MODEL_DIR when the setting names no file: the file's published name in a folder
# named after its repository, since "checkpoint.pt" alone says nothing.
DEFAULT_PATH = f"audiobox-aesthetics/{CHECKPOINT_FILE}"
WEIGHTS_HELP = (
    f"Audiobox Aesthetics needs the released {CHECKPOINT_FILE}, published on Hugging Face in "
    "the facebook/audiobox-aesthetics repository (CC-BY-4.0; facebookresearch/"
    "audiobox-aesthetics on GitHub)."
)
# The model_cfg entries the release builds its model from.
CONFIG_KEYS = (
    "proj_num_layer", "proj_ln", "proj_act_fn", "proj_dropout", "nth_layer",
    "use_weighted_layer_sum", "precision", "normalize_embed", "output_dim",
)  # fmt: skip
PRECISIONS = ("64", "32", "16", "bf16")
BATCH_WINDOWS = 8  # windows per forward pass: bounds memory whatever the clips' lengths


class CheckpointMismatch(ValueError):
    """A file that is not an Audiobox Aesthetics checkpoint as released.

    The message names every missing, unexpected and misshapen parameter, and every entry of
    `model_cfg` or `target_transform` the release could not build from; the lists are kept on
    the error.
    """

    def __init__(
        self,
        source: str,
        *,
        missing: Sequence[str] = (),
        unexpected: Sequence[str] = (),
        wrong_shape: Sequence[str] = (),
        config: Sequence[str] = (),
    ):
        self.missing, self.unexpected = list(missing), list(unexpected)
        self.wrong_shape, self.config = list(wrong_shape), list(config)
        parts = [f"{len(self.missing)} missing: {', '.join(self.missing)}"] if missing else []
        if unexpected:
            parts.append(f"{len(self.unexpected)} unexpected: {', '.join(self.unexpected)}")
        if wrong_shape:
            parts.append(f"{len(self.wrong_shape)} of another shape: {'; '.join(wrong_shape)}")
        parts += self.config
        super().__init__(
            f"{source} is not an Audiobox Aesthetics checkpoint as released: "
            f"{'; '.join(parts)}. {WEIGHTS_HELP}"
        )


@dataclass(frozen=True)
class HeadConfig:
    """What of `model_cfg` shapes the heads and the pooling."""

    layers: int = 1
    layer_norm: bool = False
    dropout: float = 0.0
    normalize_embed: bool = True


def head(config: HeadConfig, width: int) -> nn.Sequential:
    """An axis's MLP, numbered as the release numbers it: per hidden layer a linear layer, its
    layer norm, a GELU and its dropout (a place in the numbering, nothing at inference)."""
    parts: list[nn.Module] = []
    for _ in range(config.layers - 1):
        parts.append(nn.Linear(width, width))
        if config.layer_norm:
            parts.append(nn.LayerNorm(width))
        parts.append(nn.GELU())
        if config.dropout:
            parts.append(nn.Identity())
    parts.append(nn.Linear(width, 1))
    return nn.Sequential(*parts)


class AestheticsNet(nn.Module):
    """The release's `AesMultiOutput` by its parameter names: windows -> standardised ratings."""

    def __init__(self, config: HeadConfig, sizes: WavLMSizes = WAVLM_BASE):
        super().__init__()
        self.wavlm_model = WavLM(sizes)
        self.proj_layer = nn.ModuleDict({axis: head(config, sizes.width) for axis in AXES})
        self.layer_weights = nn.ParameterDict(
            {axis: nn.Parameter(torch.empty(sizes.layers + 1)) for axis in AXES}
        )
        self.normalize_embed = config.normalize_embed

    def forward(self, audio: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Windows [n, samples] at 16 kHz whose first `valid[i]` samples are the clip's ->
        standardised ratings [n, 4] in the order of AXES."""
        states, padding = self.wavlm_model(audio, valid)
        keep = (~padding).to(states[0].dtype)[..., None]
        # Pooling is linear, so each layer is pooled before the weighting rather than after:
        # the same numbers, without four weighted copies of every frame.
        pooled = torch.stack([(s * keep).sum(1) for s in states], dim=-1)  # [n, width, 13]
        pooled = pooled / keep.sum(1)[..., None].clamp(min=1)
        ratings = []
        for axis in AXES:
            embedding = pooled @ torch.softmax(self.layer_weights[axis], dim=-1)
            if self.normalize_embed:
                embedding = F.normalize(embedding, dim=-1)
            ratings.append(self.proj_layer[axis](embedding)[:, 0])
        return torch.stack(ratings, dim=-1)


class AestheticsModel:
    """A loaded predictor: the network, each axis's rating scale, the device, a file id and
    whether the file is an untrained stand-in."""

    def __init__(
        self,
        net: AestheticsNet,
        targets: dict[str, tuple[float, float]],
        *,
        weights_id: str,
        device: str | torch.device | None = None,
        untrained: bool = False,
    ):
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.net = net.eval().to(self.device)
        self.mean = torch.tensor([targets[a][0] for a in AXES], device=self.device)
        self.std = torch.tensor([targets[a][1] for a in AXES], device=self.device)
        self.weights_id = weights_id
        self.untrained = untrained  # a stand-in's random weights (standins.py): values mean nothing

    def rate_windows(self, windows: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Ratings [n, 4] (AXES order, the 1-10 scale) of 10 s windows [n, 160000]."""
        with torch.inference_mode():
            return self.net(windows.to(self.device), valid.to(self.device)) * self.std + self.mean


def weights_path() -> Path:
    """The checkpoint the settings name (FOLEY_AESTHETICS_WEIGHTS), else
    audiobox-aesthetics/checkpoint.pt under FOLEY_MODEL_DIR."""
    from django.conf import settings

    named = getattr(settings, SETTING, "")
    return Path(named) if named else Path(settings.FOLEY_MODEL_DIR) / DEFAULT_PATH


def read_checkpoint(path: Path) -> Any:
    """The unpickled file: tensors and plain values only (numpy scalars allowed, as a saved
    config may hold them), never arbitrary objects."""
    import pickle

    core = getattr(np, "_core", None) or np.core
    scalar = core.multiarray.scalar
    allowed = [
        (scalar, "numpy.core.multiarray.scalar"),
        (scalar, "numpy._core.multiarray.scalar"),
        np.dtype,
        *{type(np.dtype(kind)) for kind in (np.float64, np.float32, np.int64, np.bool_)},
    ]
    try:
        with torch.serialization.safe_globals(allowed):
            return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        # torch's refusal is a page long; its reason is the line after "WeightsUnpickler error".
        reason = str(exc).partition("WeightsUnpickler error:")[2].strip() or str(exc)
        raise ValueError(
            f"{path} is not a torch checkpoint of tensors and plain values, which is all that "
            f"is read ({reason.splitlines()[0] if reason else type(exc).__name__}). "
            f"{WEIGHTS_HELP}"
        ) from exc


def head_config(config: Any, problems: list[str], layers: int = WAVLM_BASE.layers) -> HeadConfig:
    """The heads' config from `model_cfg` (over an encoder of `layers` layers); what the release
    could not build goes to problems."""
    if not isinstance(config, dict):
        problems.append("no model_cfg dict")
        return HeadConfig()
    absent = [key for key in CONFIG_KEYS if key not in config]
    if absent:
        problems.append(f"model_cfg lacks {', '.join(absent)}")
    get = config.get
    # Entries the release accepts but that would make it predict otherwise, or fail.
    if get("proj_act_fn", "gelu") != "gelu":
        problems.append(f"model_cfg proj_act_fn is {get('proj_act_fn')!r}, not 'gelu'")
    if get("nth_layer", layers + 1) != layers + 1:
        problems.append(f"model_cfg nth_layer is {get('nth_layer')!r}, not {layers + 1}")
    if get("use_weighted_layer_sum", True) is not True:
        problems.append("model_cfg use_weighted_layer_sum is not true")
    if get("output_dim", 1) != 1:
        problems.append(f"model_cfg output_dim is {get('output_dim')!r}, not 1")
    if str(get("precision", "32")) not in PRECISIONS:
        problems.append(f"model_cfg precision is {get('precision')!r}")
    layers = get("proj_num_layer", 1)
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        problems.append(f"model_cfg proj_num_layer is {layers!r}, not a positive whole number")
        layers = 1
    return HeadConfig(
        layers=layers,
        layer_norm=bool(get("proj_ln", False)),
        dropout=float(get("proj_dropout", 0.0) or 0.0),
        normalize_embed=bool(get("normalize_embed", True)),
    )


def rating_scales(transform: Any, problems: list[str]) -> dict[str, tuple[float, float]]:
    """{axis: (mean, std)} from `target_transform`; what is missing goes to problems."""
    scales = {}
    for axis in AXES:
        entry = transform.get(axis) if isinstance(transform, dict) else None
        try:
            mean, std = float(entry["mean"]), float(entry["std"])
        except (TypeError, KeyError, ValueError):
            problems.append(f"target_transform has no mean and std for {axis}")
            continue
        if not (np.isfinite(mean) and np.isfinite(std) and std > 0):
            problems.append(f"target_transform of {axis} is mean {mean}, std {std}")
        scales[axis] = (mean, std)
    return scales


@dataclass(frozen=True)
class Released:
    """What a checkpoint as released holds: the heads' config, the encoder's sizes (read from
    its tensors), each axis's rating scale, the parameters, and whether the file says it is an
    untrained stand-in (standins.py)."""

    config: HeadConfig
    sizes: WavLMSizes
    scales: dict[str, tuple[float, float]]
    params: dict[str, torch.Tensor]
    untrained: bool = False


def released_parts(raw: Any, source: str) -> Released:
    """The parts of a released checkpoint; one CheckpointMismatch naming everything that is not
    as released.

    The encoder's sizes are read from its tensors (wavlm.sizes_of), and every parameter is then
    held to the network of those sizes: the released file gives WavLM Base, and a parameter
    missing, unexpected or of another shape than the rest of the file implies is named.
    """
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise CheckpointMismatch(source, config=[f"it holds a {type(raw).__name__}, not a dict"])
    state = raw.get("state_dict")
    if not isinstance(state, dict):
        problems.append("no state_dict")
        state = {}
    # The release strips "model." and loads the rest strictly.
    params = {str(k).removeprefix("model."): v for k, v in state.items()}
    encoder = {k.removeprefix("wavlm_model."): v for k, v in params.items()}
    impossible: list[str] = []
    sizes = sizes_of(encoder, impossible)
    problems += impossible
    config = head_config(raw.get("model_cfg"), problems, sizes.layers)
    scales = rating_scales(raw.get("target_transform"), problems)
    wanted = {}
    if not impossible:  # sizes no network has build none to hold the file to
        with torch.device("meta"):
            wanted = AestheticsNet(config, sizes).state_dict()
    missing = [k for k in wanted if k not in params]
    unexpected = [k for k in params if wanted and k not in wanted]
    wrong = [
        f"{k} is {tuple(params[k].shape)}, not {tuple(wanted[k].shape)}"
        if isinstance(params[k], torch.Tensor)
        else f"{k} is a {type(params[k]).__name__}, not a tensor"
        for k in wanted
        if k in params
        and not (isinstance(params[k], torch.Tensor) and params[k].shape == wanted[k].shape)
    ]
    if missing or unexpected or wrong or problems:
        raise CheckpointMismatch(
            source, missing=missing, unexpected=unexpected, wrong_shape=wrong, config=problems
        )
    return Released(
        config, sizes, scales, {k: params[k].float() for k in wanted}, bool(raw.get(UNTRAINED))
    )


def load(path: str | Path | None = None, *, device: str | None = None) -> AestheticsModel:
    """The predictor from a released checkpoint: `path`, or the one the settings name.

    WeightsMissing when the file is not there; CheckpointMismatch when it is not as released.
    """
    path = Path(path) if path else weights_path()
    if not path.is_file():
        raise WeightsMissing(
            f"Audiobox Aesthetics checkpoint {path} is missing. {WEIGHTS_HELP} Put it there, "
            f"or name it with the {SETTING} setting (default: {DEFAULT_PATH} under "
            "FOLEY_MODEL_DIR)."
        )
    found = released_parts(read_checkpoint(path), str(path))
    with torch.device("meta"):
        net = AestheticsNet(found.config, found.sizes)
    net.load_state_dict(found.params, assign=True)
    return AestheticsModel(
        net, found.scales, weights_id=file_digest(path), device=device, untrained=found.untrained
    )


@functools.lru_cache(maxsize=8)
def _resampler(sample_rate: int, device: torch.device) -> torch.nn.Module:
    """julius's resampler from `sample_rate` to 16 kHz: its kernel is built once per rate and
    device, where building it anew for each clip took longer than the demo's small networks."""
    import julius

    return julius.ResampleFrac(
        sample_rate, SAMPLE_RATE, zeros=RESAMPLE_ZEROS, rolloff=RESAMPLE_ROLLOFF
    ).to(device)


def resample(audio: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """[..., samples] at `sample_rate` -> 16 kHz, as long as torchaudio's output would be."""
    if int(sample_rate) == SAMPLE_RATE:
        return audio
    return _resampler(int(sample_rate), audio.device)(audio, full=True)


def mono(audio: np.ndarray) -> np.ndarray:
    """float32 [samples] of a clip [samples] or [samples, channels] (as `decode_wav` gives)."""
    x = np.asarray(audio, dtype=np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1)  # before resampling, not after as the release: the same, both linear
    if x.ndim != 1 or not x.size:
        raise ValueError(f"a clip is [samples] or [samples, channels] of audio, not {x.shape}")
    return np.ascontiguousarray(x)


def clip_windows(audio: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[samples] at 16 kHz -> (10 s windows [k, 160000] every 10 s, the last zero-padded;
    how many samples of each are the clip's [k])."""
    length = audio.shape[-1]
    starts = range(0, length, HOP)
    windows = torch.stack([F.pad(audio[s : s + WINDOW], (0, max(0, s + WINDOW - length)))
                           for s in starts])  # fmt: skip
    valid = torch.tensor([min(WINDOW, length - s) for s in starts], device=audio.device)
    return windows, valid


def predict_clips(
    model: AestheticsModel, clips: Sequence[np.ndarray], sample_rate: int
) -> list[dict[str, float]]:
    """Each clip's ratings {"PQ", "PC", "CE", "CU"}: the windows of all the clips rated in
    batches, each clip's the mean of its windows' weighted by their share of the clip."""
    windows, valid, owner = [], [], []
    for i, clip in enumerate(clips):
        x = torch.from_numpy(mono(clip)).to(model.device)
        w, v = clip_windows(resample(x[None], sample_rate)[0])
        windows.append(w)
        valid.append(v)
        owner += [i] * len(v)
    if not windows:
        return []
    all_windows, all_valid = torch.cat(windows), torch.cat(valid)
    ratings = torch.cat([
        model.rate_windows(all_windows[i : i + BATCH_WINDOWS], all_valid[i : i + BATCH_WINDOWS])
        for i in range(0, len(all_valid), BATCH_WINDOWS)
    ]).double().cpu()  # fmt: skip
    weights = all_valid.double().cpu() / WINDOW
    rows = torch.tensor(owner)
    results = []
    for i in range(len(clips)):
        w = weights[rows == i]
        clip = (ratings[rows == i] * w[:, None]).sum(0) / w.sum()
        results.append(dict(zip(AXES, clip.tolist(), strict=True)))
    return results


def predict(model: AestheticsModel, audio: np.ndarray, sample_rate: int) -> dict[str, float]:
    """One clip's ratings {"PQ", "PC", "CE", "CU"} on the 1-10 scale; the clip is float audio
    [samples] or [samples, channels] at `sample_rate`."""
    return predict_clips(model, [audio], sample_rate)[0]
