"""The Huggins-pitch headphone check (Milne et al. 2021, "An online headphone screening test
based on dichotic pitch", Behav. Res. Methods 53): white noise in both ears, the same in each
except a narrow band around 600 Hz whose phase is inverted in one ear. Over headphones the
listener hears a faint tone in that noise; over loudspeakers the two ears' signals mix in the
air and the tone is gone, and neither ear's signal alone has it (each is flat white noise). A
trial plays three noises, one of them the target, and asks which held the tone.

The two other noises (foils) differ between the ears too, by as much and in the same way (as
many frequency bins phase-inverted in one ear), but in bins scattered over the whole spectrum:
every auditory filter then sees the same slight interaural decorrelation, which has no edge in
frequency and so no pitch. Foils identical in both ears would let a script name the target by
the energy of left minus right alone; here that energy, and each ear's spectrum, are alike for
target and foils. The check still screens equipment, not programs: what a listener hears is in
the file, and a script that looks for the inverted band around 600 Hz finds it.

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


def inverted_bins(rng: np.random.Generator, frequencies: np.ndarray, *, pitch: bool) -> np.ndarray:
    """The bins whose phase the right ear inverts: the band around `CENTRE_HZ` for the target
    (the Huggins pitch), or as many bins drawn at random from the whole spectrum for a foil (no
    pitch: no edge in frequency)."""
    inside = band(frequencies)
    if pitch:
        return inside
    chosen = np.zeros(frequencies.size, dtype=bool)
    # Bin 0 is silent (no DC), so flipping it would flip nothing.
    chosen[1 + rng.choice(frequencies.size - 1, int(inside.sum()), replace=False)] = True
    return chosen


def noise_pair(
    rng: np.random.Generator, sample_rate: int, *, pitch: bool, seconds: float = NOISE_S
) -> np.ndarray:
    """One noise [frames, 2] at unit RMS, the right ear's phase inverted in some bins
    (`inverted_bins`): the band around `CENTRE_HZ` (`pitch`, the Huggins pitch) or as many
    scattered bins (a foil). Made in the frequency domain, so the inversion is exact and each
    ear's magnitude spectrum the same; no onset ramp (see `trial`)."""
    frames = round(seconds * sample_rate)
    spectrum = rng.standard_normal(frames // 2 + 1) + 1j * rng.standard_normal(frames // 2 + 1)
    spectrum[0] = 0.0
    right = spectrum.copy()
    right[inverted_bins(rng, np.fft.rfftfreq(frames, 1.0 / sample_rate), pitch=pitch)] *= -1
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
    from `rng`) the Huggins pitch, the others foils. Returns the sound and the 1-based interval
    that holds the tone."""
    target = int(rng.integers(1, INTERVALS + 1))
    gap = np.zeros((round(GAP_S * sample_rate), 2))
    parts: list[np.ndarray] = []
    for interval in range(1, INTERVALS + 1):
        if parts:
            parts.append(gap)
        parts.append(ramped(noise_pair(rng, sample_rate, pitch=interval == target), sample_rate))
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
