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
# A header is judged before any sample is decoded, and no more is decoded than the clip needs:
# the header sizes the decoding, and a few kilobytes of FLAC can declare hours of audio.
# With conversion a longer source is cut to the clip; one declaring more than this many clip
# durations is not a clip at all and is refused undecoded.
CONVERT_MAX_LENGTH_FACTOR = 10
# Most samples (frames x channels) decoded for one file, about 270 MB as floats: a header
# declaring a thousand channels or an absurd rate is refused instead. Holds 4 s at 384 kHz in 16
# channels, and every clip spec a challenge allows.
MAX_DECODED_SAMPLES = 2**25
# Source audio decoded past the clip's end, so the resampler sees what follows the cut as it
# would when resampling the whole file (0.1 s is far beyond the reach of soxr's VHQ filter).
RESAMPLE_MARGIN_S = 0.1
# What libsndfile reports as the length of a file whose header leaves it open.
UNKNOWN_FRAMES = 2**63 - 1
# What libsndfile and numpy raise on a file they cannot decode.
DECODE_ERRORS = (sf.LibsndfileError, RuntimeError, TypeError, ValueError)


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
    except DECODE_ERRORS as exc:
        check.errors.append(_unreadable(exc, spec))
        return check
    sample_rate, channels, declared = info.samplerate, info.channels, info.frames
    if sample_rate <= 0 or channels <= 0:
        check.errors.append(
            f"not readable as audio (no sample rate or channels); {_expected(spec)}"
        )
        return check
    if declared >= UNKNOWN_FRAMES:
        check.errors.append(
            "does not declare its length in its header; "
            f"expected {_fmt_duration(spec.frames, spec.sample_rate)}"
        )
        return check
    if declared <= 0:
        check.errors.append(
            f"contains no samples; expected {_fmt_duration(spec.frames, spec.sample_rate)}"
        )
        return check

    if convert:
        wanted = math.ceil(spec.duration_s * sample_rate)
        check.errors.extend(_convert_limits(declared, sample_rate, channels, wanted, spec))
        to_read = min(declared, wanted + math.ceil(RESAMPLE_MARGIN_S * sample_rate))
    else:
        check.errors.extend(
            _strict_problems(sample_rate, channels, declared, info.subtype, info.format, spec)
        )
        to_read = spec.frames
    if check.errors:
        return check

    try:
        samples, _ = sf.read(io.BytesIO(data), frames=to_read, dtype="float64", always_2d=True)
    except MemoryError:
        check.errors.append("too large to decode in the memory available")
        return check
    except DECODE_ERRORS as exc:
        check.errors.append(_unreadable(exc, spec))
        return check
    frames = samples.shape[0]
    if frames == 0:
        check.errors.append(
            f"contains no samples; expected {_fmt_duration(spec.frames, spec.sample_rate)}"
        )
        return check
    if not np.isfinite(samples).all():
        check.errors.append("contains NaN or infinite sample values")
        return check

    if convert:
        samples = _convert(samples, sample_rate, declared, info.subtype, spec, check)
        sample_rate = spec.sample_rate
    elif frames != spec.frames:
        # The header promised the clip's length but the data ends early.
        check.errors.append(
            f"duration is {_fmt_duration(frames, sample_rate)}; "
            f"expected {_fmt_duration(spec.frames, spec.sample_rate)}"
        )
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


def _expected(spec: ClipSpec) -> str:
    return f"expected a {spec.subtype} WAV file"


def _unreadable(exc: Exception, spec: ClipSpec) -> str:
    detail = str(exc).split(":")[-1].strip() or "unknown format"
    return f"not readable as audio ({detail}); {_expected(spec)}"


def _strict_problems(
    sample_rate: int, channels: int, declared: int, subtype: str, container: str, spec: ClipSpec
) -> list[str]:
    """Every way the header differs from the spec."""
    problems = []
    if sample_rate != spec.sample_rate:
        problems.append(f"sample rate is {sample_rate:,} Hz; expected {spec.sample_rate:,} Hz")
    if channels != spec.channels:
        problems.append(
            f"has {channels} channels; expected {'mono' if spec.channels == 1 else spec.channels}"
        )
    # Compared in time, so a clip at the wrong rate is not also called the wrong length.
    if declared * spec.sample_rate != spec.frames * sample_rate:
        problems.append(
            f"duration is {_fmt_duration(declared, sample_rate)}; "
            f"expected {_fmt_duration(spec.frames, spec.sample_rate)}"
        )
    source_bits = SUBTYPE_BITS.get(subtype)
    if source_bits != spec.bit_depth:
        found = f"{source_bits}-bit PCM" if source_bits else f"{subtype} samples"
        problems.append(f"sample format is {found}; expected {spec.bit_depth}-bit PCM")
    if container not in ("WAV", "WAVEX", "FLAC"):
        problems.append(f"container is {container}; expected WAV")
    return problems


def _convert_limits(
    declared: int, sample_rate: int, channels: int, wanted: int, spec: ClipSpec
) -> list[str]:
    """Why a source cannot be converted without decoding far more than the clip it becomes."""
    longest = CONVERT_MAX_LENGTH_FACTOR * spec.duration_s
    if declared > CONVERT_MAX_LENGTH_FACTOR * wanted:
        return [
            f"duration is {_fmt_duration(declared, sample_rate)}; conversion cuts clips to "
            f"{spec.duration_s:g} s and takes sources of up to {longest:g} s"
        ]
    margin = math.ceil(RESAMPLE_MARGIN_S * sample_rate)
    samples = min(declared, wanted + margin) * channels
    if samples > MAX_DECODED_SAMPLES:
        return [
            f"has {channels:,} channels at {sample_rate:,} Hz: {samples:,} samples to decode "
            f"for {spec.duration_s:g} s; conversion takes at most {MAX_DECODED_SAMPLES:,}"
        ]
    return []


def _convert(
    samples: np.ndarray,
    sample_rate: int,
    declared: int,
    subtype: str,
    spec: ClipSpec,
    check: AudioCheck,
) -> np.ndarray:
    # `samples` may stop shortly after the clip's end; `declared` is the source's whole length.
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
        check.conversions.append(f"{verb} {declared / sample_rate:.3f} s to {spec.duration_s:g} s")
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
