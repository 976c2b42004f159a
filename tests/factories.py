"""Audio and archive factories for tests: real WAV bytes and real zip files, nothing mocked."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import soundfile as sf


def make_wav(
    *,
    seconds: float = 4.0,
    sample_rate: int = 22_050,
    channels: int = 1,
    subtype: str = "PCM_16",
    seed: int = 0,
    amplitude: float = 0.1,
    fmt: str = "WAV",
    samples: np.ndarray | None = None,
) -> bytes:
    """A noise clip (distinct per seed) encoded as the given file format."""
    if samples is None:
        rng = np.random.default_rng(seed)
        frames = round(seconds * sample_rate)
        samples = amplitude * rng.standard_normal((frames, channels))
    buffer = io.BytesIO()
    sf.write(buffer, samples, sample_rate, subtype=subtype, format=fmt)
    return buffer.getvalue()


def make_zip(
    path: Path, files: dict[str, bytes], *, compression: int = zipfile.ZIP_DEFLATED
) -> Path:
    """Write a zip with the given member names and contents; returns its path."""
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def reference_set(categories: list[str], per_category: int = 2, seed: int = 0) -> dict[str, bytes]:
    """`{category}/{n}.wav` members with distinct valid clips."""
    return {
        f"{category}/{n}.wav": make_wav(seed=seed + 1000 * i + n)
        for i, category in enumerate(categories)
        for n in range(per_category)
    }


def make_flac(*, seconds: float = 4.0, sample_rate: int = 22_050, seed: int = 0) -> bytes:
    """A valid 16-bit mono FLAC noise clip."""
    return make_wav(seconds=seconds, sample_rate=sample_rate, seed=seed, fmt="FLAC")


def declare_frames(flac: bytes, frames: int) -> bytes:
    """The same FLAC with its header claiming `frames` samples: the audio itself is unchanged."""
    data = bytearray(flac)
    assert data[:4] == b"fLaC" and data[4] & 0x7F == 0, "STREAMINFO must come first"
    # STREAMINFO starts at byte 8; its total-samples field is the 36 bits from bit 4 of byte 21.
    data[21] = (data[21] & 0xF0) | ((frames >> 32) & 0x0F)
    data[22:26] = (frames & 0xFFFFFFFF).to_bytes(4, "big")
    return bytes(data)


def silent_flac(seconds: float, sample_rate: int = 22_050) -> bytes:
    """Digital silence as FLAC: minutes of it take a few kilobytes (written a minute at a time)."""
    buffer = io.BytesIO()
    minute = np.zeros((60 * sample_rate, 1), dtype=np.int16)
    left = round(seconds * sample_rate)
    with sf.SoundFile(buffer, "w", sample_rate, 1, "PCM_16", format="FLAC") as handle:
        while left > 0:
            handle.write(minute[:left])
            left -= len(minute)
    return buffer.getvalue()
