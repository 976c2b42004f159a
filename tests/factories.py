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
