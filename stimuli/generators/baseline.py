"""The procedural baseline: the seven DCASE categories from noise, filters and envelopes.

It follows the generator API (`load_model`, `generate`, `generate_from_text`), so it is a
working example for authors and the system the demo and the tests generate with. It does not
pretend to sound like the real thing.

Every clip is drawn from its own random generator seeded with (seed, clip index), so a call is
deterministic and clip k of a call does not depend on how many clips the call asked for.

Configuration (a JSON or TOML file given to `load_model`, or a folder holding `config.json`):

    sample_rate   Hz (default: FOLEY_SAMPLE_RATE from the environment, else 22050)
    duration_s    seconds (default: FOLEY_CLIP_DURATION_S, else 4.0)
    brightness    0..1, how much high-frequency content (default 0.5)
    density       > 0, a multiplier on event rates: drops, steps, keystrokes (default 1.0)
    level_db      peak level in dBFS (default -3)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
from scipy import signal

from .contract import CATEGORIES, resolve_category


@dataclass(frozen=True)
class BaselineModel:
    sample_rate: int = 22_050
    duration_s: float = 4.0
    brightness: float = 0.5
    density: float = 1.0
    level_db: float = -3.0

    @property
    def frames(self) -> int:
        return round(self.duration_s * self.sample_rate)


def load_model(path: str | os.PathLike | None = None) -> BaselineModel:
    """A model from a JSON/TOML configuration file, a folder holding one, or None for defaults."""
    config: dict = {}
    if path:
        path = Path(path)
        if path.is_dir():
            candidates = [path / "config.json", path / "config.toml", path / "baseline.json"]
            path = next((p for p in candidates if p.exists()), None)
        if path is not None:
            text = path.read_text()
            config = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    defaults = {
        "sample_rate": int(os.environ.get("FOLEY_SAMPLE_RATE", 22_050)),
        "duration_s": float(os.environ.get("FOLEY_CLIP_DURATION_S", 4.0)),
    }
    known = {f.name for f in fields(BaselineModel)}
    unknown = set(config) - known
    if unknown:
        raise ValueError(f"unknown baseline settings: {', '.join(sorted(unknown))}")
    model = BaselineModel(**{**defaults, **config})
    if not 0 <= model.brightness <= 1:
        raise ValueError("brightness must lie in 0..1")
    if model.density <= 0:
        raise ValueError("density must be positive")
    return model


def generate(model: BaselineModel, category: str, n: int, seed: int) -> np.ndarray:
    """`n` clips of `category` (slug or name) as float32 [n, samples] in -1..1."""
    slug = resolve_category(category)
    if slug is None:
        raise ValueError(f"unknown category '{category}'; expected one of {', '.join(CATEGORIES)}")
    synth = _SYNTHS[slug]
    out = np.zeros((n, model.frames), dtype=np.float32)
    peak = 10 ** (model.level_db / 20)
    for index in range(n):
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, index])
        clip = synth(model, rng)
        top = float(np.max(np.abs(clip)))
        if top > 0:
            # Peaks vary a little from clip to clip, as recordings do.
            clip = clip * (peak * rng.uniform(0.6, 1.0) / top)
        out[index] = clip.astype(np.float32)
    return out


# Words that name a category's sound; a prompt may name several (a dog barking in the rain).
TEXT_KEYWORDS = {
    "dog_bark": ("bark", "dog", "woof", "puppy", "howl", "yelp"),
    "footstep": ("step", "walk", "foot", "stair", "run", "stomp"),
    "gunshot": ("gun", "shot", "rifle", "pistol", "shoot", "fire", "blast", "bang"),
    "keyboard": ("keyboard", "typing", "type", "keys", "click", "computer"),
    "moving_motor_vehicle": ("car", "engine", "motor", "vehicle", "truck", "drive", "traffic"),
    "sneeze_cough": ("sneeze", "cough", "achoo", "throat"),
    "rain": ("rain", "drizzle", "storm", "shower", "drop", "water"),
}
# Words that change how a sound is made: (brightness, density, level in dB) offsets.
TEXT_MODIFIERS = {
    "bright": (0.3, 0.0, 0.0),
    "sharp": (0.3, 0.0, 0.0),
    "crisp": (0.25, 0.0, 0.0),
    "dark": (-0.3, 0.0, 0.0),
    "muffled": (-0.4, 0.0, -3.0),
    "distant": (-0.3, 0.0, -8.0),
    "far": (-0.25, 0.0, -6.0),
    "quiet": (0.0, 0.0, -9.0),
    "soft": (-0.1, 0.0, -6.0),
    "loud": (0.1, 0.0, 2.0),
    "heavy": (-0.1, 1.6, 0.0),
    "fast": (0.0, 1.6, 0.0),
    "many": (0.0, 1.8, 0.0),
    "light": (0.1, 0.6, -3.0),
    "slow": (0.0, 0.6, 0.0),
    "single": (0.0, 0.5, 0.0),
    "once": (0.0, 0.5, 0.0),
}


def text_plan(prompt: str) -> tuple[list[str], dict[str, float]]:
    """The categories a prompt names, in the order it names them (rain when it names none), and
    the settings its modifier words give (brightness, density multiplier, level in dB)."""
    words = re.findall(r"[a-z]+", prompt.lower())
    found: list[tuple[int, str]] = []
    for slug, keys in TEXT_KEYWORDS.items():
        places = [n for n, word in enumerate(words) if any(word.startswith(k) for k in keys)]
        if places:
            found.append((places[0], slug))
    slugs = [slug for _, slug in sorted(found)] or ["rain"]
    brightness, density, level = 0.0, 1.0, 0.0
    for word in words:
        if word in TEXT_MODIFIERS:
            b, d, lvl = TEXT_MODIFIERS[word]
            brightness += b
            density *= d or 1.0
            level += lvl
    return slugs, {"brightness": brightness, "density": density, "level_db": level}


def generate_from_text(model: BaselineModel, prompt: str, n: int, seed: int) -> np.ndarray:
    """`n` clips for a text prompt as float32 [n, samples]: the synthesis of every category the
    prompt's words name, mixed (the first named leads), shaped by its modifier words.

    The seed is mixed with the prompt, so two prompts asked with the same seed differ, and the
    same (prompt, n, seed) gives the same audio.
    """
    slugs, shift = text_plan(prompt)
    shaped = replace(
        model,
        brightness=float(np.clip(model.brightness + shift["brightness"], 0.0, 1.0)),
        density=max(0.05, model.density * shift["density"]),
        level_db=min(-0.5, model.level_db + shift["level_db"]),
    )
    digest = hashlib.sha256(" ".join(prompt.lower().split()).encode()).digest()
    prompt_seed = int.from_bytes(digest[:4], "big")
    out = np.zeros((n, shaped.frames), dtype=np.float32)
    peak = 10 ** (shaped.level_db / 20)
    for index in range(n):
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, prompt_seed, index])
        clip = np.zeros(shaped.frames)
        for rank, slug in enumerate(slugs):
            layer = _SYNTHS[slug](shaped, rng)
            top = float(np.max(np.abs(layer)))
            if top > 0:
                # Later-named sounds sit behind the first: "a dog barking in the rain".
                clip += layer / top * (1.0 if rank == 0 else 0.35)
        top = float(np.max(np.abs(clip)))
        if top > 0:
            clip = clip * (peak * rng.uniform(0.6, 1.0) / top)
        out[index] = clip.astype(np.float32)
    return out


# --- building blocks -------------------------------------------------------------------------


def _cutoff(model: BaselineModel, low: float, high: float) -> float:
    """A cutoff between `low` and `high` Hz by brightness, kept below Nyquist."""
    value = low * (high / low) ** model.brightness
    return min(value, 0.45 * model.sample_rate)


def _lowpass(x: np.ndarray, cutoff: float, sr: int, order: int = 2) -> np.ndarray:
    sos = signal.butter(order, min(cutoff, 0.45 * sr), btype="low", fs=sr, output="sos")
    return signal.sosfilt(sos, x)


def _bandpass(x: np.ndarray, low: float, high: float, sr: int, order: int = 2) -> np.ndarray:
    high = min(high, 0.45 * sr)
    low = min(low, 0.8 * high)
    sos = signal.butter(order, [low, high], btype="band", fs=sr, output="sos")
    return signal.sosfilt(sos, x)


def _env(length: int, sr: int, attack_s: float, decay_s: float) -> np.ndarray:
    t = np.arange(length) / sr
    attack = np.clip(t / max(attack_s, 1e-4), 0, 1)
    return attack * np.exp(-np.maximum(t - attack_s, 0) / max(decay_s, 1e-4))


def _add(out: np.ndarray, event: np.ndarray, start: int) -> None:
    if start >= out.size:
        return
    end = min(out.size, start + event.size)
    out[start:end] += event[: end - start]


def _onsets(rng: np.random.Generator, rate: float, duration_s: float, sr: int) -> np.ndarray:
    """Poisson event times in samples."""
    count = rng.poisson(max(rate * duration_s, 0.0))
    return np.sort(rng.integers(0, int(duration_s * sr), size=count))


# --- the categories ----------------------------------------------------------------------------


def _rain(model: BaselineModel, rng: np.random.Generator) -> np.ndarray:
    sr, frames = model.sample_rate, model.frames
    bed = _bandpass(rng.standard_normal(frames), 400, _cutoff(model, 3000, 9000), sr)
    swell = 1 + 0.3 * np.sin(2 * np.pi * rng.uniform(0.1, 0.4) * np.arange(frames) / sr)
    out = 0.3 * bed * swell
    drop_len = int(0.02 * sr)
    t = np.arange(drop_len) / sr
    for start in _onsets(rng, 150 * model.density, model.duration_s, sr):
        freq = rng.uniform(1500, _cutoff(model, 3000, 7000))
        drop = np.sin(2 * np.pi * freq * t) * np.exp(-t / rng.uniform(0.002, 0.006))
        _add(out, rng.uniform(0.2, 1.0) * drop, int(start))
    return out


def _footstep(model: BaselineModel, rng: np.random.Generator) -> np.ndarray:
    sr, frames = model.sample_rate, model.frames
    out = 0.01 * rng.standard_normal(frames)
    interval = rng.uniform(0.45, 0.7) / model.density
    time = rng.uniform(0.05, 0.3)
    hit_len = int(0.15 * sr)
    while time < model.duration_s - 0.05:
        for offset, gain in ((0.0, 1.0), (rng.uniform(0.03, 0.06), 0.6)):  # heel, then toe
            burst = rng.standard_normal(hit_len) * _env(hit_len, sr, 0.003, 0.03)
            burst = _lowpass(burst, _cutoff(model, 500, 3000), sr)
            _add(out, gain * rng.uniform(0.7, 1.0) * burst, int((time + offset) * sr))
        time += interval * rng.uniform(0.9, 1.1)
    return out


def _keyboard(model: BaselineModel, rng: np.random.Generator) -> np.ndarray:
    sr, frames = model.sample_rate, model.frames
    out = 0.003 * rng.standard_normal(frames)
    click_len = int(0.03 * sr)
    t = np.arange(click_len) / sr
    for start in _onsets(rng, 7 * model.density, model.duration_s, sr):
        space = rng.random() < 0.12
        noise = rng.standard_normal(click_len) * _env(click_len, sr, 0.0005, 0.004)
        click = _bandpass(noise, 1500 if not space else 400, _cutoff(model, 3000, 8000), sr)
        ping = 0.3 * np.sin(2 * np.pi * rng.uniform(2000, 4000) * t) * np.exp(-t / 0.003)
        _add(out, rng.uniform(0.5, 1.0) * (click + ping) * (1.5 if space else 1.0), int(start))
    return out


def _gunshot(model: BaselineModel, rng: np.random.Generator) -> np.ndarray:
    sr, frames = model.sample_rate, model.frames
    out = np.zeros(frames)
    shots = rng.integers(1, 4)
    times = np.sort(rng.uniform(0.1, max(0.2, model.duration_s - 1.5), size=shots))
    tail_len = min(frames, int(1.5 * sr))
    t = np.arange(tail_len) / sr
    for time in times:
        crack = rng.standard_normal(tail_len) * _env(tail_len, sr, 0.0005, 0.02)
        crack = _lowpass(crack, _cutoff(model, 2000, 9000), sr)
        boom_freq = 90 * np.exp(-t / 0.3) + 35
        boom = np.sin(2 * np.pi * np.cumsum(boom_freq) / sr) * _env(tail_len, sr, 0.002, 0.12)
        tail = _lowpass(rng.standard_normal(tail_len), 1200, sr) * _env(tail_len, sr, 0.01, 0.4)
        _add(out, crack + 0.8 * boom + 0.15 * tail, int(time * sr))
    return out


def _engine(model: BaselineModel, rng: np.random.Generator) -> np.ndarray:
    sr, frames = model.sample_rate, model.frames
    t = np.arange(frames) / sr
    # A pass-by: the level peaks when the vehicle is closest, the pitch falls as it passes.
    closest = rng.uniform(0.3, 0.7) * model.duration_s
    speed = rng.uniform(0.6, 1.5)
    doppler = 1 + 0.06 * np.tanh(-(t - closest) * 2 * speed)
    f0 = rng.uniform(25, 55) * doppler * (1 + 0.05 * np.sin(2 * np.pi * 0.3 * t))
    phase = 2 * np.pi * np.cumsum(f0) / sr
    harmonics = sum(np.sin(k * phase) / k**1.2 for k in range(1, 12))
    rumble = _lowpass(rng.standard_normal(frames), _cutoff(model, 300, 2500), sr)
    level = np.exp(-(((t - closest) * speed) ** 2) / 2) + 0.15
    return (harmonics + 0.6 * rumble) * level


def _dog_bark(model: BaselineModel, rng: np.random.Generator) -> np.ndarray:
    sr, frames = model.sample_rate, model.frames
    out = 0.005 * rng.standard_normal(frames)
    barks = rng.integers(1, 5)
    time = rng.uniform(0.05, 0.5)
    for _ in range(barks):
        length = int(rng.uniform(0.12, 0.3) * sr)
        t = np.arange(length) / sr
        f0 = rng.uniform(350, 700) * np.exp(-t / 0.4)
        phase = 2 * np.pi * np.cumsum(f0) / sr
        voiced = sum(np.sin(k * phase) * rng.uniform(0.3, 1.0) / k for k in range(1, 8))
        breath = 0.4 * rng.standard_normal(length)
        bark = _bandpass(voiced + breath, 300, _cutoff(model, 1500, 4000), sr)
        _add(out, bark * _env(length, sr, 0.01, 0.07), int(time * sr))
        time += length / sr + rng.uniform(0.15, 0.6)
        if time > model.duration_s - 0.1:
            break
    return out


def _sneeze_cough(model: BaselineModel, rng: np.random.Generator) -> np.ndarray:
    sr, frames = model.sample_rate, model.frames
    out = 0.003 * rng.standard_normal(frames)
    time = rng.uniform(0.1, 0.8)
    if rng.random() < 0.5:  # a sneeze: a rising inhale, then one burst
        inhale_len = int(rng.uniform(0.3, 0.6) * sr)
        ramp = np.linspace(0, 1, inhale_len) ** 2
        inhale = _bandpass(rng.standard_normal(inhale_len), 800, 3000, sr) * ramp * 0.2
        _add(out, inhale, int(time * sr))
        time += inhale_len / sr
        bursts = 1
    else:  # a cough: a few short bursts
        bursts = rng.integers(1, 4)
    for _ in range(bursts):
        length = int(rng.uniform(0.15, 0.35) * sr)
        burst = rng.standard_normal(length) * _env(length, sr, 0.005, 0.06)
        burst = _bandpass(burst, 250, _cutoff(model, 2500, 6000), sr)
        _add(out, burst, int(time * sr))
        time += length / sr + rng.uniform(0.1, 0.3)
        if time > model.duration_s - 0.1:
            break
    return out


_SYNTHS = {
    "dog_bark": _dog_bark,
    "footstep": _footstep,
    "gunshot": _gunshot,
    "keyboard": _keyboard,
    "moving_motor_vehicle": _engine,
    "rain": _rain,
    "sneeze_cough": _sneeze_cough,
}
