"""What a bot that reads spoken gold by templates computes (numpy and scipy only): espeak-ng's own
rendering of every sentence a built-in trapping sound may say, in the synthesiser's default voice
(each stretch between the numbers and each number rendered apart, at one loudness, as the
platform speaks them: the bot has read `raters.gold`), and the nearest of them to a served sound
by MFCC distance.

Two distances: the sequences of MFCCs stretched to one length and compared frame by frame (the
plain reading), and dynamic time warping, which lets each template's words align with the
sound's wherever they fall (the stronger reading)."""

from __future__ import annotations

import functools
import random
import shutil
import subprocess

import numpy as np
from scipy.fft import dct
from scipy.signal import stft

from raters import gold
from stimuli.audio import decode_wav, resample

FRAME_S, HOP_S = 0.025, 0.010
COEFFICIENTS = 13
MELS = 26
# Frames more than this far below the loudest are the silence around the words (dB).
TRIM_DB = 35.0
STRETCHED = 100


def sentences() -> dict[tuple[int, int], list[str]]:
    """Every instruction `gold.instruction` can give, by the (quality, fit) it asks for."""
    found: dict[tuple[int, int], list[str]] = {}
    for text, quality, fit in gold.instructions():
        found.setdefault((quality, fit), []).append(text)
    return found


@functools.cache
def render(text: str, sample_rate: int) -> np.ndarray:
    """`text` in espeak-ng's default voice, speed and pitch, mono at `sample_rate`."""
    spoken = subprocess.run(
        [shutil.which("espeak-ng"), "--stdout", text], capture_output=True, check=True
    ).stdout
    samples, rate = decode_wav(spoken)
    samples = samples.astype(np.float64).mean(axis=1)
    return samples if rate == sample_rate else resample(samples[:, None], rate, sample_rate)[:, 0]


def render_as_served(text: str, sample_rate: int) -> np.ndarray:
    """`text` as a trapping sound speaks it, word by word (`gold.chunks`), every word in the
    default voice at one loudness, with the mean pause between them."""
    gap = np.zeros(int(np.mean(gold.CHUNK_GAP_S) * sample_rate))
    parts = []
    for stretch in gold.chunks(text, random.Random(0)):
        spoken = gold._trimmed(render(stretch, sample_rate))
        parts += [gap, spoken / np.sqrt(np.mean(spoken**2))]
    return np.concatenate(parts[1:])


RENDERINGS = (render, render_as_served)


def templates(sample_rate: int, renderer=render_as_served) -> dict[tuple[int, int], list]:
    """The MFCCs of every sentence, by the (quality, fit) it asks for."""
    return {
        answer: [mfcc(renderer(text, sample_rate), sample_rate) for text in texts]
        for answer, texts in sentences().items()
    }


def _mel_bank(size: int, sample_rate: int) -> np.ndarray:
    def mel(hz):
        return 2595 * np.log10(1 + hz / 700)

    points = 700 * (10 ** (np.linspace(mel(60.0), mel(sample_rate / 2), MELS + 2) / 2595) - 1)
    frequencies = np.fft.rfftfreq(size, 1 / sample_rate)
    bank = np.zeros((MELS, frequencies.size))
    for n in range(MELS):
        low, centre, high = points[n : n + 3]
        rising = (frequencies - low) / (centre - low)
        falling = (high - frequencies) / (high - centre)
        bank[n] = np.clip(np.minimum(rising, falling), 0, None)
    return bank


def mfcc(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """MFCCs [frames, 13] of the words (the silence around them trimmed), each coefficient
    normalised over the sound (so neither gain nor a fixed colouring counts)."""
    width, hop = int(FRAME_S * sample_rate), int(HOP_S * sample_rate)
    size = 1 << (width - 1).bit_length()
    _, _, frames = stft(
        samples, sample_rate, nperseg=width, noverlap=width - hop, nfft=size, boundary=None
    )
    power = np.abs(frames) ** 2
    energy = power.sum(axis=0)
    loud = np.flatnonzero(energy > energy.max() * 10 ** (-TRIM_DB / 10))
    power = power[:, loud[0] : loud[-1] + 1]
    spectrum = np.log(_mel_bank(size, sample_rate) @ power + 1e-10)
    coefficients = dct(spectrum, axis=0, norm="ortho")[1 : COEFFICIENTS + 1]
    mean, spread = coefficients.mean(axis=1, keepdims=True), coefficients.std(axis=1, keepdims=True)
    return ((coefficients - mean) / (spread + 1e-9)).T


def stretched_distance(a: np.ndarray, templates: list[np.ndarray]) -> np.ndarray:
    """Per template: both sequences stretched to `STRETCHED` frames, compared frame by frame."""

    def stretch(x: np.ndarray) -> np.ndarray:
        at = np.linspace(0, x.shape[0] - 1, STRETCHED)
        return np.stack([np.interp(at, np.arange(x.shape[0]), column) for column in x.T], axis=1)

    heard = stretch(a)
    return np.array([np.sqrt(np.mean((heard - stretch(b)) ** 2)) for b in templates])


def warped_distance(a: np.ndarray, templates: list[np.ndarray]) -> np.ndarray:
    """Per template: dynamic time warping (steps right, down and diagonal), by path length.

    Every template at once: padded to the longest, each row of the recurrence for all of them
    together (a column past a template's end never reaches back into it, so each is read at its
    own last column)."""
    lengths = np.array([b.shape[0] for b in templates])
    padded = np.zeros((len(templates), lengths.max(), a.shape[1]))
    for k, b in enumerate(templates):
        padded[k, : b.shape[0]] = b
    # Euclidean frame distances [a's frames, templates, template frames].
    square = (
        (a**2).sum(axis=1)[:, None, None]
        + (padded**2).sum(axis=2)[None]
        - 2 * np.einsum("if,tjf->itj", a, padded)
    )
    cost = np.sqrt(np.maximum(square, 0.0))
    previous = np.full((len(templates), padded.shape[1] + 1), np.inf)
    previous[:, 0] = 0.0
    start = np.full((len(templates), 1), np.inf)
    for row in cost:
        # cur[j] = row[j] + min(prev[j], prev[j-1], cur[j-1]): the last term as a running minimum.
        best = np.minimum(previous[:, 1:], previous[:, :-1]) + row
        total = np.cumsum(row, axis=1)
        previous = np.concatenate((start, total + np.minimum.accumulate(best - total, axis=1)), 1)
    return previous[np.arange(len(templates)), lengths] / (a.shape[0] + lengths)


def nearest(features: np.ndarray, templates: dict, distance) -> tuple[int, int]:
    """The (quality, fit) of the template nearest to `features`."""
    answers = [answer for answer, group in templates.items() for _ in group]
    found = distance(features, [t for group in templates.values() for t in group])
    return answers[int(np.argmin(found))]
