"""Anchors no one can spot from the bytes: how low-quality anchors are made from real clips, and
the check at preparation that no simple statistic of the delivered audio sets an anchor set
apart from the stimuli of its category.

An anchor that can be told apart without listening (digital silence, a handful of sample
values, a level no stimulus has) lets a script answer the checks and pass as careful.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Each statistic must separate at least this many anchors of a kind to count as a tell.
MIN_GROUP = 3


def rms_db(samples: np.ndarray) -> float:
    rms = float(np.sqrt(np.mean(np.square(samples)))) if samples.size else 0.0
    return 20 * math.log10(rms) if rms > 0 else -math.inf


def degrade(samples: np.ndarray, sample_rate: int, seed: int) -> np.ndarray:
    """A low-quality anchor from a real clip: band-limited to a narrow telephone-like band,
    distorted, and noised at 10 dB SNR. Loud enough whatever the source's spectrum (the band is
    brought back to the source's level before the noise), and never quantised coarsely: delivery
    aligns its loudness and dithers it like every other sound."""
    rng = np.random.default_rng(seed)
    frames = samples.shape[0]
    spectrum = np.fft.rfft(samples, axis=0)
    freqs = np.fft.rfftfreq(frames, 1 / sample_rate)
    spectrum[(freqs < 300) | (freqs > min(2500.0, sample_rate / 2 * 0.9))] = 0
    band = np.fft.irfft(spectrum, n=frames, axis=0)
    level = math.sqrt(float(np.mean(samples**2))) or 1e-3
    band_level = math.sqrt(float(np.mean(band**2)))
    if band_level < 1e-3 * level:
        band = samples  # a source with nothing in the band: distort it whole
        band_level = level
    band = band * (0.3 / band_level)
    distorted = np.tanh(4 * band) / 4
    power = float(np.mean(distorted**2))
    noisy = distorted + rng.standard_normal(distorted.shape) * math.sqrt(power / 10)
    return 0.5 * noisy / float(np.max(np.abs(noisy)))


def dither(samples: np.ndarray, seed: int) -> np.ndarray:
    """Triangular (TPDF) dither of one 16-bit step, added before samples are rounded to 16 bits:
    every delivered sound gets the same noise floor, so none has a telltale handful of values."""
    rng = np.random.default_rng(seed)
    step = 1 / 32768
    return samples + (rng.random(samples.shape) - rng.random(samples.shape)) * step


@dataclass(frozen=True)
class Stats:
    """What a script could measure of a delivered sound without listening."""

    distinct: int  # distinct 16-bit sample values
    rms_db: float
    flatness: float  # spectral flatness (geometric over arithmetic mean of the power spectrum)

    @property
    def silent(self) -> bool:
        return self.distinct <= 1 or self.rms_db < -90


def stats(samples: np.ndarray) -> Stats:
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    values = np.round(mono * 32768).astype(np.int32)
    power = np.abs(np.fft.rfft(mono)) ** 2 + 1e-20
    flatness = float(np.exp(np.mean(np.log(power))) / np.mean(power))
    return Stats(int(np.unique(values).size), rms_db(mono), flatness)


# How far outside the stimuli's range every anchor of a kind must lie for a statistic to be a
# tell: a factor for sample-value counts and flatness, decibels for the level. Closer than that,
# the sets differ as any two sets of real sounds do.
MARGINS = {"distinct": ("factor", 4.0), "rms_db": ("db", 6.0), "flatness": ("factor", 10.0)}


def _apart(values: list[float], low: float, high: float, name: str) -> bool:
    how, margin = MARGINS[name]
    if how == "db":
        return max(values) < low - margin or min(values) > high + margin
    return max(values) * margin < low or min(values) > high * margin


def separations(
    anchors: dict[str, list[Stats]], stimuli: list[Stats], *, flatness_kinds=()
) -> list[str]:
    """The statistics that set a kind of anchor apart from the stimuli: every anchor of the kind
    well outside the stimuli's range (see MARGINS), and any silent anchor. Spectral flatness is
    judged for `flatness_kinds` only (a degraded anchor is meant to sound worse)."""
    problems = []
    if not stimuli:
        return problems
    for kind, group in sorted(anchors.items()):
        silent = sum(s.silent for s in group)
        if silent:
            problems.append(f"{kind}: {silent} of {len(group)} anchors are digital silence")
        if len(group) < MIN_GROUP:
            continue
        measures = [("distinct sample values", "distinct"), ("RMS level (dBFS)", "rms_db")]
        if kind in flatness_kinds:
            measures.append(("spectral flatness", "flatness"))
        for label, name in measures:
            values = [getattr(s, name) for s in group]
            low = min(getattr(s, name) for s in stimuli)
            high = max(getattr(s, name) for s in stimuli)
            if _apart(values, low, high, name):
                problems.append(
                    f"{kind}: {label} {min(values):.4g} to {max(values):.4g}, stimuli "
                    f"{low:.4g} to {high:.4g}"
                )
    return problems
