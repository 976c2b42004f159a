"""The digit-triplet hearing check (Smits et al. 2004; the ITU-T P.808 toolkit's hearing test):
three spoken digits in speech-shaped noise, the rater types what they heard, and the
signal-to-noise ratio follows a one-up one-down staircase that settles where half the triplets
are heard right: the speech reception threshold (SRT). Normal hearing over headphones gives an
SRT well below 0 dB; the check passes below the test's threshold.

Numpy only (the speech itself comes from the speech synthesiser, `raters.gold.speak`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

START_SNR_DB = 0.0
STEP_DB = 2.0
# Triplets before the SRT is averaged: the staircase first walks down from the start.
SKIP = 4
LOWEST_SNR_DB = -30.0
HIGHEST_SNR_DB = 20.0


@dataclass
class Staircase:
    """One-up one-down on whole triplets. `snrs[i]` was presented, `correct[i]` is whether all
    three digits came back right."""

    triplets: int = 24
    snrs: list[float] = field(default_factory=list)
    correct: list[bool] = field(default_factory=list)

    def next_snr(self) -> float:
        """The SNR of the next triplet (also the virtual one after the last, which the SRT
        includes)."""
        if not self.snrs:
            return START_SNR_DB
        step = -STEP_DB if self.correct[-1] else STEP_DB
        return float(np.clip(self.snrs[-1] + step, LOWEST_SNR_DB, HIGHEST_SNR_DB))

    def record(self, snr_db: float, right: bool) -> None:
        self.snrs.append(float(snr_db))
        self.correct.append(bool(right))

    @property
    def done(self) -> bool:
        return len(self.correct) >= self.triplets

    def threshold(self) -> float:
        """The SRT: the mean SNR of the triplets after the first `SKIP`, with the virtual next
        one (Smits et al. 2004)."""
        values = [*self.snrs[SKIP:], self.next_snr()]
        return float(np.mean(values))

    def as_dict(self) -> dict:
        return {"triplets": self.triplets, "snrs": self.snrs, "correct": self.correct}

    @classmethod
    def from_dict(cls, data: dict) -> Staircase:
        return cls(
            triplets=int(data.get("triplets", 24)),
            snrs=[float(v) for v in data.get("snrs", [])],
            correct=[bool(v) for v in data.get("correct", [])],
        )


def digits(rng: np.random.Generator) -> str:
    """Three digits, no digit twice (as the test's lists are made)."""
    return "".join(str(d) for d in rng.choice(10, size=3, replace=False))


def heard_right(expected: str, answer: str) -> bool:
    """The answer's digits, in order, are the triplet's (spaces and other marks ignored)."""
    return "".join(c for c in answer if c.isdigit()) == expected


def speech_shaped_noise(speech: np.ndarray, rng: np.random.Generator, frames: int) -> np.ndarray:
    """Noise with the long-term spectrum of `speech` (random phases), `frames` long, unit RMS."""
    size = max(frames, speech.size)
    magnitude = np.abs(np.fft.rfft(speech, size))
    phases = np.exp(2j * np.pi * rng.random(magnitude.size))
    noise = np.fft.irfft(magnitude * phases, size)[:frames]
    return noise / (float(np.sqrt(np.mean(noise**2))) or 1.0)


def mix(speech: np.ndarray, noise: np.ndarray, snr_db: float) -> np.ndarray:
    """Speech in noise at `snr_db` (speech RMS over its active part against the noise's RMS),
    the noise level fixed and the speech level following the SNR, peak-normalised to 0.5."""
    active = speech[np.abs(speech) > 0.02 * (float(np.max(np.abs(speech))) or 1.0)]
    speech_rms = float(np.sqrt(np.mean(active**2))) if active.size else 1.0
    noise_rms = float(np.sqrt(np.mean(noise**2))) or 1.0
    gain = noise_rms * 10 ** (snr_db / 20) / (speech_rms or 1.0)
    out = noise.copy()
    out[: speech.size] += gain * speech[: noise.size]
    return 0.5 * out / (float(np.max(np.abs(out))) or 1.0)
