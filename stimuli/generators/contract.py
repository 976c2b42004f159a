"""The generator API: what a submitted system's Python module provides.

A generator is a Python module (a module path, a .zip holding the module and its weight files,
or a wheel) with two functions, in the spirit of the HEAR common API:

``load_model(path) -> model``
    `path` is the folder the archive was unpacked into (where its weights are), a small
    configuration file, or None. The returned object has an integer attribute ``sample_rate``.
    Loading happens once per run; it may take a while (weights), within the load time limit.

``generate(model, category: str, n: int, seed: int) -> array``
    `n` clips of `category` (the category's slug, e.g. ``"dog_bark"``; a generator may also
    accept the display name) as an array of shape ``[n, samples]`` (``[n, channels, samples]``
    for a stereo challenge), either float32/float64 in -1..1 or int16. Every clip is exactly the
    challenge's clip length. The same (category, n, seed) must give the same audio: the platform
    derives a seed for every batch from the job's seed, the category and the batch's first clip
    index (`derive_seed`), so a resumed job reproduces the audio it lost.

``generate_from_text(model, prompt: str, n: int, seed: int) -> array`` (optional)
    The same for text-conditioned systems.

``generate_from_texts(model, prompts: list[str], n: int, seeds: list[int]) -> array`` (optional)
    `n` clips of each prompt, prompt after prompt (``[len(prompts) * n, samples]``), each
    prompt's clips those `generate_from_text(model, prompt, n, seed)` gives: the prompts of
    several judges in one call (one forward pass, for a model that batches). Without it the
    platform's runner calls `generate_from_text` once per prompt inside the same call.

Generators see the clip spec they must meet in the environment (FOLEY_SAMPLE_RATE,
FOLEY_CLIP_DURATION_S, FOLEY_CHANNELS) and may use it; a fixed-rate model ignores it and the
validator reports the mismatch. They run with no network, in a scratch folder that is their
working directory and HOME, and with `FOLEY_DEVICE` set to ``cuda`` when a GPU is visible.

This module holds the pieces shared by the baseline, the validator and the generation jobs; it
imports only numpy at its top, since the baseline imports it inside the sandbox, where only the
generator's own folder is given (the sandbox's `output_shape` says what a call returns).
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    # Only named: this module is copied into the sandbox with a generator built on the contract,
    # where nothing else of the platform is importable.
    from stimuli.audio import ClipSpec


REQUIRED_FUNCTIONS = ("load_model", "generate")
OPTIONAL_FUNCTIONS = ("generate_from_text", "generate_from_texts")

# The DCASE 2023 Task 7 categories, as slugs; names and a few spellings map onto them.
CATEGORIES = (
    "dog_bark",
    "footstep",
    "gunshot",
    "keyboard",
    "moving_motor_vehicle",
    "rain",
    "sneeze_cough",
)
_ALIASES = {
    "bark": "dog_bark",
    "dog": "dog_bark",
    "footsteps": "footstep",
    "keyboard_clicks": "keyboard",
    "typing": "keyboard",
    "engine": "moving_motor_vehicle",
    "vehicle": "moving_motor_vehicle",
    "motor_vehicle": "moving_motor_vehicle",
    "sneeze": "sneeze_cough",
    "cough": "sneeze_cough",
    "gun": "gunshot",
    "gun_shot": "gunshot",
}


class Model(Protocol):
    sample_rate: int


class GeneratorModule(Protocol):
    def load_model(self, path: str | None) -> Model: ...

    def generate(self, model: Model, category: str, n: int, seed: int) -> Any: ...


def slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def resolve_category(name: str) -> str | None:
    """The DCASE slug for a category slug, name or common spelling; None when unknown."""
    slug = slugify(name)
    if slug in CATEGORIES:
        return slug
    return _ALIASES.get(slug)


def derive_seed(seed: int, category: str, index: int) -> int:
    """The seed for the clips starting at `index` of `category`: stable across runs and machines."""
    digest = hashlib.sha256(f"{int(seed)}:{category}:{int(index)}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def check_output(
    array: np.ndarray, n: int, spec: ClipSpec, model_rate: int | None = None
) -> list[tuple[str, str]]:
    """Every way `array` breaks the output contract, as (code, message) pairs.

    `model_rate`, the model's own sample rate, only makes the length message clearer.
    """
    problems: list[tuple[str, str]] = []
    from sandbox.process import output_shape  # never inside the sandbox: see the docstring

    expected = output_shape(spec, n)
    if array.dtype == np.int16:
        pass
    elif array.dtype.kind != "f":
        problems.append(
            ("wrong_dtype", f"samples are {array.dtype}; expected float32 in -1..1 or int16")
        )
        return problems
    if array.shape != expected:
        hint = ""
        if array.ndim == len(expected) and array.shape[:-1] == expected[:-1]:
            rate = model_rate or spec.sample_rate
            seconds = array.shape[-1] / rate
            hint = f" ({seconds:.3f} s at {rate:,} Hz; expected {spec.duration_s:g} s"
            hint += f" at {spec.sample_rate:,} Hz)" if rate != spec.sample_rate else ")"
        problems.append(
            ("wrong_shape", f"output shape is {list(array.shape)}; expected {list(expected)}{hint}")
        )
    if array.dtype.kind == "f":
        finite = np.isfinite(array)
        if not finite.all():
            bad = int(array.size - finite.sum())
            problems.append(("not_finite", f"{bad:,} samples are NaN or infinite"))
        values = array[finite] if not finite.all() else array
        if values.size and float(np.max(np.abs(values))) > 1.0:
            problems.append(
                (
                    "out_of_range",
                    f"peak is {float(np.max(np.abs(values))):.3g}; float samples must lie in -1..1",
                )
            )
    return problems


def to_float(array: np.ndarray) -> np.ndarray:
    """Samples as float64 in -1..1, whatever the accepted dtype."""
    if array.dtype == np.int16:
        return array.astype(np.float64) / 32768.0
    return array.astype(np.float64)
