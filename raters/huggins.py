"""The Huggins-pitch headphone check (Milne et al. 2021, "An online headphone screening test
based on dichotic pitch", Behav. Res. Methods 53): white noise in both ears, the same in each
except a narrow band around 600 Hz whose phase is inverted in one ear. Over headphones the
listener hears a faint tone in that noise; over loudspeakers the two ears' signals mix in the
air and the tone is gone, and neither ear's signal alone has it (each is flat white noise). A
trial plays three noises, one of them the dichotic one, and asks which held the tone.

Numpy only: stimuli are made in the web process, per rater and per trial, from a secret seed.
"""

from __future__ import annotations

import numpy as np

CENTRE_HZ = 600.0
# The inverted band is +-6% around the centre (Milne et al. 2021).
BANDWIDTH = 0.06
NOISE_S = 1.0
GAP_S = 0.5
RAMP_S = 0.02
INTERVALS = 3


def band(frequencies: np.ndarray, centre_hz: float = CENTRE_HZ) -> np.ndarray:
    """The frequency bins whose interaural phase a Huggins pitch inverts."""
    return (frequencies >= centre_hz * (1 - BANDWIDTH)) & (
        frequencies <= centre_hz * (1 + BANDWIDTH)
    )


def noise_pair(
    rng: np.random.Generator, sample_rate: int, *, dichotic: bool, seconds: float = NOISE_S
) -> np.ndarray:
    """One noise [frames, 2] at unit RMS: diotic (the same in both ears), or dichotic (the band
    around `CENTRE_HZ` phase-inverted in the right ear: the Huggins pitch). Made in the
    frequency domain, so the inversion is exact; no onset ramp (see `trial`)."""
    frames = round(seconds * sample_rate)
    spectrum = rng.standard_normal(frames // 2 + 1) + 1j * rng.standard_normal(frames // 2 + 1)
    spectrum[0] = 0.0
    right = spectrum.copy()
    if dichotic:
        right[band(np.fft.rfftfreq(frames, 1.0 / sample_rate))] *= -1
    pair = np.stack([np.fft.irfft(spectrum, frames), np.fft.irfft(right, frames)], axis=1)
    return pair / float(np.sqrt(np.mean(pair**2)))


def ramped(pair: np.ndarray, sample_rate: int) -> np.ndarray:
    """Raised-cosine onset and offset, the same in both ears (no click gives the tone away)."""
    n = max(1, int(RAMP_S * sample_rate))
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, n))
    out = pair.copy()
    out[:n] *= ramp[:, None]
    out[-n:] *= ramp[::-1, None]
    return out


def trial(rng: np.random.Generator, sample_rate: int) -> tuple[np.ndarray, int]:
    """One trial's sound [frames, 2]: three noises with silences between, one of them (drawn
    from `rng`) dichotic. Returns the sound and the 1-based interval that holds the tone."""
    target = int(rng.integers(1, INTERVALS + 1))
    gap = np.zeros((round(GAP_S * sample_rate), 2))
    parts: list[np.ndarray] = []
    for interval in range(1, INTERVALS + 1):
        if parts:
            parts.append(gap)
        parts.append(ramped(noise_pair(rng, sample_rate, dichotic=interval == target), sample_rate))
    return 0.1 * np.concatenate(parts), target


def interaural_phase(pair: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """Per frequency bin, the cosine of the phase between the ears (1: in phase, -1: inverted),
    and the bins' frequencies: how the tests see what the ears receive."""
    left = np.fft.rfft(pair[:, 0])
    right = np.fft.rfft(pair[:, 1])
    cross = left * np.conj(right)
    magnitude = np.abs(cross)
    cosine = np.divide(cross.real, magnitude, out=np.ones_like(magnitude), where=magnitude > 0)
    return cosine, np.fft.rfftfreq(pair.shape[0], 1.0 / sample_rate)
