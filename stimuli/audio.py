"""Audio checks against a challenge's clip spec, DCASE-style conversion, and canonical encoding.

Every path that brings audio into the platform (web upload, API, command line, generator output)
goes through `inspect_audio`, so a clip is judged by one set of rules everywhere.
"""

from __future__ import annotations

import hashlib
import io
import math
from dataclasses import dataclass, field

import numpy as np
import soundfile as sf

# A clip whose peak stays below this is treated as silent (about -80 dBFS at 16 bits).
SILENCE_PEAK = 10 ** (-80 / 20)
# Runs of this many consecutive full-scale samples mark clipping; isolated peaks are legitimate.
CLIPPING_RUN = 3
SUBTYPE_BITS = {"PCM_16": 16, "PCM_24": 24, "PCM_32": 32, "PCM_S8": 8, "PCM_U8": 8}


@dataclass(frozen=True)
class ClipSpec:
    sample_rate: int = 22_050
    channels: int = 1
    duration_s: float = 4.0
    bit_depth: int = 16

    @property
    def frames(self) -> int:
        return round(self.duration_s * self.sample_rate)

    @property
    def subtype(self) -> str:
        return f"PCM_{self.bit_depth}"

    def describe(self) -> str:
        layout = "mono" if self.channels == 1 else f"{self.channels} channels"
        return f"{self.duration_s:g} s, {self.sample_rate:,} Hz, {layout}, {self.bit_depth}-bit PCM"


@dataclass
class AudioCheck:
    """The verdict on one file: errors reject it, warnings and conversions are reported."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)
    samples: np.ndarray | None = None  # float64 [frames, channels] in -1..1, as stored
    wav_bytes: bytes | None = None
    sha256: str | None = None
    sample_rate: int = 0
    channels: int = 0
    bit_depth: int = 0
    frames: int = 0
    loudness_lufs: float | None = None
    peak_dbfs: float | None = None
    is_silent: bool = False
    is_clipped: bool = False

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate if self.sample_rate else 0.0


def _fmt_duration(frames: int, sample_rate: int) -> str:
    return f"{frames / sample_rate:.3f} s ({frames:,} samples)"


def inspect_audio(data: bytes, spec: ClipSpec, *, convert: bool = False) -> AudioCheck:
    """Decode `data`, check it against `spec` and return the canonical encoding when it passes.

    With `convert` off, every deviation from the spec is an error. With `convert` on, audio is
    brought to the spec the way DCASE prepared its data: channels mixed to mono, resampled with
    soxr, zero-padded or cut to the clip duration, and quantised to the spec's bit depth.
    """
    check = AudioCheck()
    try:
        info = sf.info(io.BytesIO(data))
        samples, sample_rate = sf.read(io.BytesIO(data), dtype="float64", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as exc:
        detail = str(exc).split(":")[-1].strip() or "unknown format"
        check.errors.append(f"not readable as audio ({detail}); expected a {spec.subtype} WAV file")
        return check

    frames, channels = samples.shape
    source_bits = SUBTYPE_BITS.get(info.subtype)
    if frames == 0:
        check.errors.append(
            f"contains no samples; expected {_fmt_duration(spec.frames, spec.sample_rate)}"
        )
        return check
    if not np.isfinite(samples).all():
        check.errors.append("contains NaN or infinite sample values")
        return check

    if convert:
        samples = _convert(samples, sample_rate, info.subtype, spec, check)
        sample_rate = spec.sample_rate
    else:
        if sample_rate != spec.sample_rate:
            check.errors.append(
                f"sample rate is {sample_rate:,} Hz; expected {spec.sample_rate:,} Hz"
            )
        if channels != spec.channels:
            check.errors.append(
                f"has {channels} channels; expected {'mono' if spec.channels == 1 else spec.channels}"
            )
        # Compared in time, so a clip at the wrong rate is not also called the wrong length.
        if frames * spec.sample_rate != spec.frames * sample_rate:
            check.errors.append(
                f"duration is {_fmt_duration(frames, sample_rate)}; "
                f"expected {_fmt_duration(spec.frames, spec.sample_rate)}"
            )
        if source_bits != spec.bit_depth:
            found = f"{source_bits}-bit PCM" if source_bits else f"{info.subtype} samples"
            check.errors.append(f"sample format is {found}; expected {spec.bit_depth}-bit PCM")
        if info.format not in ("WAV", "WAVEX", "FLAC"):
            check.errors.append(f"container is {info.format}; expected WAV")
        if check.errors:
            return check

    check.samples = samples
    check.sample_rate = sample_rate
    check.channels = samples.shape[1]
    check.frames = samples.shape[0]
    check.bit_depth = spec.bit_depth
    check.wav_bytes = encode_wav(samples, sample_rate, spec.bit_depth)
    check.sha256 = hashlib.sha256(check.wav_bytes).hexdigest()
    _analyse(check)
    return check


def _convert(
    samples: np.ndarray, sample_rate: int, subtype: str, spec: ClipSpec, check: AudioCheck
) -> np.ndarray:
    channels = samples.shape[1]
    if channels != spec.channels:
        if spec.channels == 1:
            samples = samples.mean(axis=1, keepdims=True)
            check.conversions.append(f"mixed {channels} channels to mono")
        elif channels == 1:
            samples = np.repeat(samples, spec.channels, axis=1)
            check.conversions.append(f"duplicated mono to {spec.channels} channels")
        else:
            samples = samples[:, : spec.channels]
            check.conversions.append(f"kept the first {spec.channels} of {channels} channels")
    if sample_rate != spec.sample_rate:
        samples = resample(samples, sample_rate, spec.sample_rate)
        check.conversions.append(f"resampled {sample_rate:,} Hz to {spec.sample_rate:,} Hz")
    if samples.shape[0] != spec.frames:
        before = samples.shape[0]
        if before < spec.frames:
            pad = np.zeros((spec.frames - before, samples.shape[1]))
            samples = np.concatenate([samples, pad])
            verb = "zero-padded"
        else:
            samples = samples[: spec.frames]
            verb = "cut"
        check.conversions.append(
            f"{verb} {before / spec.sample_rate:.3f} s to {spec.duration_s:g} s"
        )
    if SUBTYPE_BITS.get(subtype) != spec.bit_depth:
        check.conversions.append(f"quantised {subtype} to {spec.bit_depth}-bit PCM")
    return samples


def resample(samples: np.ndarray, source_rate: int, target_rate: int) -> np.ndarray:
    """Band-limited resampling with soxr at very high quality; [frames, channels] in and out."""
    import soxr

    return soxr.resample(samples, source_rate, target_rate, quality="VHQ")


def quantise(samples: np.ndarray, bit_depth: int) -> np.ndarray:
    """Round float samples to the integer grid of `bit_depth`, clipping to full scale."""
    scale = 2 ** (bit_depth - 1)
    dtype = np.int16 if bit_depth == 16 else np.int32
    ints = np.clip(np.round(samples * scale), -scale, scale - 1).astype(dtype)
    return ints


def encode_wav(samples: np.ndarray, sample_rate: int, bit_depth: int = 16) -> bytes:
    """The canonical encoding: a bare RIFF/WAV PCM file, so equal audio gives equal bytes."""
    ints = quantise(samples, bit_depth)
    if bit_depth == 24:
        ints = ints.astype(np.int32) << 8  # soundfile takes 24-bit data left-aligned in int32
    buffer = io.BytesIO()
    sf.write(buffer, ints, sample_rate, subtype=f"PCM_{bit_depth}", format="WAV")
    return buffer.getvalue()


def decode_wav(data: bytes) -> tuple[np.ndarray, int]:
    """Float32 mono-or-multichannel samples [frames, channels] and the sample rate."""
    samples, sample_rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return samples, sample_rate


def _analyse(check: AudioCheck) -> None:
    assert check.samples is not None
    # The samples as stored: the quantised grid, so the figures describe the file itself.
    stored = quantise(check.samples, check.bit_depth) / float(2 ** (check.bit_depth - 1))
    peak = float(np.max(np.abs(stored)))
    check.peak_dbfs = 20 * math.log10(peak) if peak > 0 else None
    check.is_silent = peak < SILENCE_PEAK
    check.is_clipped = _has_clipping_run(stored)
    check.loudness_lufs = (
        None if check.is_silent else integrated_loudness(stored, check.sample_rate)
    )
    check.samples = stored
    if check.is_silent:
        check.warnings.append("is silent (peak below -80 dBFS)")
    if check.is_clipped:
        check.warnings.append(f"is clipped ({CLIPPING_RUN} or more consecutive full-scale samples)")


def _has_clipping_run(samples: np.ndarray) -> bool:
    full_scale = np.abs(samples) >= (1.0 - 1.5 / 32768)
    if full_scale.sum() < CLIPPING_RUN:
        return False
    for channel in full_scale.T:
        # Length of the longest run of True values, without a Python loop over samples.
        padded = np.concatenate([[0], channel.astype(np.int8), [0]])
        edges = np.flatnonzero(np.diff(padded))
        if edges.size and (edges[1::2] - edges[::2]).max() >= CLIPPING_RUN:
            return True
    return False


def integrated_loudness(samples: np.ndarray, sample_rate: int) -> float | None:
    """ITU-R BS.1770 integrated loudness in LUFS with pyloudnorm; None when it is undefined."""
    import pyloudnorm

    meter = pyloudnorm.Meter(sample_rate)
    if samples.shape[0] < int(meter.block_size * sample_rate):
        return None
    value = float(meter.integrated_loudness(samples))
    return value if math.isfinite(value) else None
