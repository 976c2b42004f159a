"""Anchors no one can spot from the bytes: how low-quality anchors are made from real clips, what
a script could measure of a delivered sound without listening, and the tests at preparation that
no such statistic, and no match against the sounds the teams hold, sets an anchor set apart.

An anchor that can be told apart without listening (digital silence, a handful of sample
values, a level or noise floor no stimulus has, a clip of the published development set) lets a
script answer the anchors and pass as careful.
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


def _coloured_noise(rng: np.random.Generator, frames: int, slope: float) -> np.ndarray:
    """Gaussian noise whose power falls as f**slope (0 white, -1 pink, -2 brown), unit RMS."""
    spectrum = np.fft.rfft(rng.standard_normal(frames))
    freqs = np.fft.rfftfreq(frames)
    spectrum[1:] *= freqs[1:] ** (slope / 2)
    spectrum[0] = 0
    noise = np.fft.irfft(spectrum, n=frames)
    return noise / (float(np.std(noise)) or 1.0)


def _envelope(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """The sound's amplitude envelope (20-ms moving RMS), mean 1."""
    width = max(1, int(0.02 * sample_rate))
    power = np.convolve(samples**2, np.ones(width) / width, mode="same")
    envelope = np.sqrt(np.maximum(power, 0))
    return envelope / (float(np.mean(envelope)) or 1.0)


@dataclass(frozen=True)
class Degradation:
    """One low-quality anchor's recipe, drawn per anchor: nothing in it is a constant a script
    could look for (see `degradation`)."""

    low_hz: float  # band edges
    high_hz: float
    stopband_db: float  # how far outside the band is turned down
    drive: float  # soft-clipping drive (tanh); 1 is nearly clean
    clip: float  # hard-clipping level as a quantile of |x| (1: none)
    snr_db: float
    slope: float  # the noise's colour: power ~ f**slope
    follow: float  # share of the noise that follows the sound's envelope (0: steady hiss)


def degradation(sample_rate: int, seed) -> Degradation:
    """Draw a recipe: a telephone- to radio-like band, soft or hard clipping of any strength,
    noise from 8 to 30 dB below the sound, of any colour from white to brown, steady or riding
    on the sound."""
    rng = np.random.default_rng(seed)
    nyquist = sample_rate / 2
    return Degradation(
        low_hz=float(np.exp(rng.uniform(np.log(80), np.log(700)))),
        high_hz=float(np.exp(rng.uniform(np.log(1500), np.log(max(1600, 0.8 * nyquist))))),
        stopband_db=float(rng.uniform(25, 60)),
        drive=float(np.exp(rng.uniform(np.log(1.5), np.log(8)))),
        clip=float(rng.choice([1.0, rng.uniform(0.6, 0.98)])),
        snr_db=float(rng.uniform(8, 30)),
        slope=float(rng.uniform(-2, 0.5)),
        follow=float(rng.uniform(0, 1)),
    )


# Recipes drawn per anchor; the one that leaves the sound's statistics nearest its source's is
# kept (`degrade`).
CANDIDATES = 8


def degrade(samples: np.ndarray, sample_rate: int, seed: int) -> np.ndarray:
    """A low-quality anchor from a real clip: band-limited, distorted and noised by recipes
    drawn per anchor (`degradation`), keeping of `CANDIDATES` the one whose noise floor, crest
    factor, bandwidth, flatness and level for its loudness stay nearest the source's, so the
    anchors are spread as the real sounds they come from are, not where one recipe puts them.
    Loud enough whatever the source's spectrum, and never quantised coarsely: delivery aligns
    its loudness and dithers it like every other sound."""
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    target = _profile(mono, sample_rate)
    best, best_distance = mono, math.inf
    for n in range(CANDIDATES):
        recipe = degradation(sample_rate, [seed, n])
        candidate = _render(mono, sample_rate, recipe, np.random.default_rng([seed, n, 1]))
        distance = float(np.sum(np.abs((_profile(candidate, sample_rate) - target) / _SCALES)))
        if distance < best_distance:
            best, best_distance = candidate, distance
    shaped = 0.5 * best / (float(np.max(np.abs(best))) or 1.0)
    return shaped[:, None] if samples.ndim == 2 else shaped


def _over(mono: np.ndarray, sample_rate: int) -> float:
    """RMS level over integrated loudness (dB): what a sound's RMS is once delivery has aligned
    its loudness."""
    from stimuli.audio import integrated_loudness

    loudness = integrated_loudness(mono[:, None], sample_rate)
    return rms_db(mono) - loudness if loudness is not None else 0.0


# What one unit of difference is, per entry of `_profile`.
_SCALES = np.array([6.0, 2.0, 0.5, 0.5, 0.25])


def _profile(mono: np.ndarray, sample_rate: int) -> np.ndarray:
    """Noise floor and crest factor relative to the level (dB), log2 bandwidth, log10
    flatness, and level over loudness (dB): what delivery leaves of a sound's statistics."""
    measured = stats(mono, sample_rate)
    over = _over(mono, sample_rate)
    return np.array(
        [
            measured.noise_floor_db - measured.rms_db,
            measured.crest_db,
            math.log2(max(measured.bandwidth_hz, 1.0)),
            math.log10(max(measured.flatness, 1e-12)),
            over,
        ]
    )


def _render(mono: np.ndarray, sample_rate: int, recipe: Degradation, rng) -> np.ndarray:
    """One recipe applied: clipped, its peaks expanded back to about the source's crest factor
    (clipping alone would lower every anchor's), noised, sent through the band, and given the
    source's dynamics (`_like`)."""
    frames = mono.shape[0]
    freqs = np.fft.rfftfreq(frames, 1 / sample_rate)
    outside = (freqs < recipe.low_hz) | (freqs > recipe.high_hz)
    inside_share = float(np.sum(np.abs(np.fft.rfft(mono))[~outside] ** 2)) / (
        float(np.sum(np.abs(np.fft.rfft(mono)) ** 2)) or 1.0
    )
    if inside_share < 1e-6:
        outside[:] = False  # nothing in the band: the whole of it goes through
    signal = mono * (0.3 / (math.sqrt(float(np.mean(mono**2))) or 1e-3))
    distorted = np.tanh(recipe.drive * signal) / recipe.drive
    if recipe.clip < 1:
        ceiling = float(np.quantile(np.abs(distorted), recipe.clip)) or 1.0
        distorted = np.clip(distorted, -ceiling, ceiling)
    distorted = _expanded(distorted, _crest_db(mono) + rng.normal(0, 1.5))
    power = float(np.mean(distorted**2))
    noise = _coloured_noise(rng, frames, recipe.slope)
    noise = noise * (recipe.follow * _envelope(distorted, sample_rate) + 1 - recipe.follow)
    noise *= math.sqrt(power / 10 ** (recipe.snr_db / 10)) / (float(np.std(noise)) or 1.0)
    spectrum = np.fft.rfft(distorted + noise)
    spectrum[outside] *= 10 ** (-recipe.stopband_db / 20)
    return _like(np.fft.irfft(spectrum, n=frames), mono, sample_rate)


def _crest_db(samples: np.ndarray) -> float:
    peak = float(np.max(np.abs(samples))) if samples.size else 0.0
    return 20 * math.log10((peak or 1e-9) / (float(np.std(samples)) or 1e-9))


def _expanded(samples: np.ndarray, crest_db: float) -> np.ndarray:
    """|x| raised to the power that gives this crest factor (found by bisection)."""
    unit = samples / (float(np.max(np.abs(samples))) or 1.0)
    sign, magnitude = np.sign(unit), np.abs(unit)
    # The peak of |unit| ** p stays 1 (or 0, for silence) whatever p: the crest factor is the
    # level's alone, so each step computes only the level, as `_crest_db` would.
    peak = float(np.max(magnitude)) if magnitude.size else 0.0
    low, high = 0.5, 4.0
    for _ in range(16):
        middle = (low + high) / 2
        level = float(np.std(sign * magnitude**middle)) or 1e-9
        if 20 * math.log10((peak or 1e-9) / level) < crest_db:
            low = middle
        else:
            high = middle
    return sign * magnitude**low


def _frame_levels(samples: np.ndarray, width: int) -> np.ndarray:
    frames = samples[: samples.size // width * width].reshape(-1, width)
    return np.sqrt(np.mean(frames**2, axis=1)) + 1e-9


def _like(degraded: np.ndarray, source: np.ndarray, sample_rate: int) -> np.ndarray:
    """The degraded sound given its source's dynamics: its 20-ms frame levels mapped rank for
    rank onto the source's, so quiet stretches stay as quiet and the noise floor is the
    source's (a steady hiss would lift every anchor's floor)."""
    width = max(1, int(0.02 * sample_rate))
    have, want = _frame_levels(degraded, width), _frame_levels(source, width)
    ranks = np.argsort(np.argsort(have))
    gains = np.sort(want)[ranks] / have
    gain = np.repeat(gains, width)
    tail = np.full(degraded.size - gain.size, gains[-1] if gains.size else 1.0)
    smooth = max(1, width // 4)
    gain = np.convolve(np.concatenate([gain, tail]), np.ones(smooth) / smooth, mode="same")
    return degraded * gain


def dither(samples: np.ndarray, seed: int) -> np.ndarray:
    """Triangular (TPDF) dither of one 16-bit step, added before samples are rounded to 16 bits:
    every delivered sound gets the same noise floor, so none has a telltale handful of values."""
    rng = np.random.default_rng(seed)
    step = 1 / 32768
    return samples + (rng.random(samples.shape) - rng.random(samples.shape)) * step


# --- What a script measures -------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """What a script could measure of a delivered sound without listening."""

    distinct: int  # distinct 16-bit sample values
    rms_db: float
    flatness: float  # spectral flatness (geometric over arithmetic mean of the power spectrum)
    noise_floor_db: float  # the 10th percentile of 20-ms frame levels (dBFS)
    crest_db: float  # peak over RMS
    bandwidth_hz: float  # spectral spread around the centroid

    @property
    def silent(self) -> bool:
        return self.distinct <= 1 or self.rms_db < -90


# The statistics every test reads, with the words the refusals use.
MEASURES = {
    "distinct": "distinct sample values",
    "rms_db": "RMS level (dBFS)",
    "noise_floor_db": "noise floor (dBFS)",
    "crest_db": "crest factor (dB)",
    "bandwidth_hz": "spectral bandwidth (Hz)",
    "flatness": "spectral flatness",
}
# What a sound is, not how it was made: a poor-fit anchor is another category's sound, so these
# differ from the category's stimuli as a listener hears them to; within a category they are
# judged for good-fit anchors only (see `separations`).
SPECTRAL = ("noise_floor_db", "crest_db", "bandwidth_hz", "flatness")
# Judged over everything a rater receives (flatness is not: a band-limited, noisy anchor is
# meant to sound worse, and that is what flatness measures).
POOLED = ("distinct", "rms_db", "noise_floor_db", "crest_db", "bandwidth_hz")


def stats(samples: np.ndarray, sample_rate: int) -> Stats:
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    values = np.round(mono * 32768).astype(np.int32)
    power = np.abs(np.fft.rfft(mono)) ** 2 + 1e-20
    flatness = float(np.exp(np.mean(np.log(power))) / np.mean(power))
    freqs = np.fft.rfftfreq(mono.size, 1 / sample_rate)
    centroid = float(np.sum(freqs * power) / np.sum(power))
    bandwidth = math.sqrt(float(np.sum((freqs - centroid) ** 2 * power) / np.sum(power)))
    width = max(1, int(0.02 * sample_rate))
    frames = mono[: mono.size // width * width].reshape(-1, width)
    levels = np.sqrt(np.mean(frames**2, axis=1)) if frames.size else np.zeros(1)
    floor = float(np.quantile(levels, 0.1))
    peak = float(np.max(np.abs(mono))) if mono.size else 0.0
    level = rms_db(mono)
    return Stats(
        distinct=int(np.unique(values).size),
        rms_db=level,
        flatness=flatness,
        noise_floor_db=20 * math.log10(floor) if floor > 0 else -150.0,
        crest_db=20 * math.log10(peak) - level if peak > 0 and math.isfinite(level) else 0.0,
        bandwidth_hz=bandwidth,
    )


# --- Tells within a category: every anchor of a kind outside the stimuli's range -------------

# How far outside the stimuli's range every anchor of a kind must lie for a statistic to be a
# tell: a factor for counts, flatness and bandwidth, decibels for levels. Closer than that, the
# sets differ as any two sets of real sounds do.
MARGINS = {
    "distinct": ("factor", 4.0),
    "rms_db": ("db", 6.0),
    "flatness": ("factor", 10.0),
    "noise_floor_db": ("db", 10.0),
    "crest_db": ("db", 4.0),
    "bandwidth_hz": ("factor", 2.0),
}


def _apart(values: list[float], low: float, high: float, name: str) -> bool:
    how, margin = MARGINS[name]
    if how == "db":
        return max(values) < low - margin or min(values) > high + margin
    return max(values) * margin < low or min(values) > high * margin


def separations(
    anchors: dict[str, list[Stats]], stimuli: list[Stats], *, spectral_kinds=()
) -> list[str]:
    """The statistics that set a kind of anchor apart from the stimuli of its category: every
    anchor of the kind well outside the stimuli's range (see MARGINS), and any silent anchor.
    The statistics of what the sound is (SPECTRAL) are judged for `spectral_kinds` only."""
    problems = []
    if not stimuli:
        return problems
    for kind, group in sorted(anchors.items()):
        silent = sum(s.silent for s in group)
        if silent:
            problems.append(f"{kind}: {silent} of {len(group)} anchors are digital silence")
        if len(group) < MIN_GROUP:
            continue
        for name, label in MEASURES.items():
            if name in SPECTRAL and kind not in spectral_kinds:
                continue
            values = [getattr(s, name) for s in group]
            low = min(getattr(s, name) for s in stimuli)
            high = max(getattr(s, name) for s in stimuli)
            if _apart(values, low, high, name):
                problems.append(
                    f"{kind}: {label} {min(values):.4g} to {max(values):.4g}, stimuli "
                    f"{low:.4g} to {high:.4g}"
                )
    return problems


# --- Tells over everything a rater receives: one threshold on one statistic ------------------

# A threshold on one statistic that sorts anchors from stimuli with this balanced accuracy
# (the mean of the shares of anchors and of stimuli sorted right; 0.5 is chance), and by more
# than chance at this significance, separates them.
SEPARATING_ACCURACY = 0.75
SIGNIFICANCE = 0.01
# Below this many anchors of a kind (or stimuli) over the challenge, a threshold's accuracy says
# more about the draw than about the sounds; the per-category range test still applies.
POOLED_MIN_GROUP = 20


@dataclass(frozen=True)
class Detection:
    """How well the best single threshold on one statistic tells anchors from stimuli."""

    accuracy: float  # balanced accuracy of the best threshold, either direction
    p_value: float  # two-sample Kolmogorov-Smirnov: the chance of doing as well by luck

    @property
    def separates(self) -> bool:
        return self.accuracy >= SEPARATING_ACCURACY and self.p_value < SIGNIFICANCE


def detection(anchors: list[float], stimuli: list[float]) -> Detection:
    """The best threshold's balanced accuracy is 0.5 + D/2, D the Kolmogorov-Smirnov distance
    between the two sets' distributions, so the KS test says whether it beats chance."""
    from scipy.stats import ks_2samp

    if not anchors or not stimuli:
        return Detection(0.5, 1.0)
    result = ks_2samp(anchors, stimuli)
    return Detection(0.5 + float(result.statistic) / 2, float(result.pvalue))


def pooled_separations(anchors: dict[str, list[Stats]], stimuli: list[Stats]) -> list[str]:
    """The statistics by which one threshold picks a kind of anchor out of every stimulus (what
    a rater of several categories receives; see `Detection.separates`)."""
    problems = []
    if len(stimuli) < POOLED_MIN_GROUP:
        return problems
    for kind, group in sorted(anchors.items()):
        if len(group) < POOLED_MIN_GROUP:
            continue
        for name in POOLED:
            label = MEASURES[name]
            found = detection(
                [getattr(s, name) for s in group], [getattr(s, name) for s in stimuli]
            )
            if found.separates:
                problems.append(
                    f"{kind}: {label} picks them out of the stimuli with {found.accuracy:.0%} "
                    "balanced accuracy"
                )
    return problems


# --- Matching against the sounds the teams hold -----------------------------------------------

# Recordings this correlated are the same one: a clip against itself loudness-aligned and
# dithered scores 1, degraded by `degrade` typically 0.4; two different recordings of a few
# seconds stay within +-0.2 even for narrow-band sounds.
MATCH_CORRELATION = 0.3


def fingerprint(samples: np.ndarray, frames: int) -> np.ndarray:
    """A recording as a matcher compares it: mono, `frames` long (cut or padded), zero mean and
    unit norm, so that any gain (loudness alignment) leaves it as it is (float32)."""
    mono = samples.mean(axis=1) if samples.ndim == 2 else samples
    mono = np.pad(mono[:frames], (0, max(0, frames - mono.size)))
    mono = mono - float(np.mean(mono))
    norm = float(np.linalg.norm(mono))
    return (mono / norm if norm > 0 else mono).astype(np.float32)


def best_matches(queries: np.ndarray, references) -> np.ndarray:
    """For each query fingerprint (rows), the highest correlation (either sign) with any of
    `references`, an iterable of fingerprint arrays (rows) read a block at a time, so a whole
    development set never has to be held at once."""
    best = np.zeros(len(queries), dtype=np.float32)
    for block in references:
        if len(queries) and len(block):
            best = np.maximum(best, np.abs(queries @ np.asarray(block).T).max(axis=1))
    return best
