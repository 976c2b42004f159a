"""Audio as raters receive it: one format, loudness-aligned, with nothing that identifies it.

Every sound is delivered as a bare 16-bit PCM WAV at the challenge's rate (the canonical encoding
carries no metadata chunks), brought to one integrated loudness unless the organizers turned that
off, and served with the same headers whatever it is.
"""

from __future__ import annotations

import hashlib
import math
import re

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.http import HttpResponse

from stimuli import storage
from stimuli.audio import decode_wav, encode_wav, integrated_loudness, resample
from stimuli.models import AudioFile

from .anchors import dither
from .models import DeliveredAudio, ListeningTest

# Aligned audio never exceeds this peak; a quiet clip that would clip is turned down instead.
PEAK_CEILING = 10 ** (-1 / 20)


def store_samples(samples: np.ndarray, sample_rate: int) -> AudioFile:
    """Store float samples [frames, channels] as a canonical 16-bit WAV; one row per sound."""
    if samples.ndim == 1:
        samples = samples[:, None]
    data = encode_wav(samples, sample_rate, 16)
    sha = hashlib.sha256(data).hexdigest()
    # Written even when the row exists: a storage that lost the file gets it back.
    name = storage.put_audio(sha, data)
    existing = AudioFile.objects.filter(sha256=sha).first()
    if existing:
        return existing
    stored = np.clip(np.round(samples * 32768), -32768, 32767) / 32768.0
    peak = float(np.max(np.abs(stored))) if stored.size else 0.0
    try:
        with transaction.atomic():
            return AudioFile.objects.create(
                sha256=sha,
                file=name,
                size_bytes=len(data),
                sample_rate=sample_rate,
                channels=samples.shape[1],
                bit_depth=16,
                frames=samples.shape[0],
                duration_s=samples.shape[0] / sample_rate,
                loudness_lufs=integrated_loudness(stored, sample_rate) if peak > 0 else None,
                peak_dbfs=20 * math.log10(peak) if peak > 0 else None,
                is_silent=peak < 1e-4,
                is_clipped=False,
            )
    except IntegrityError:  # stored concurrently by another worker
        return AudioFile.objects.get(sha256=sha)


def load_samples(audio: AudioFile) -> tuple[np.ndarray, int]:
    samples, rate = decode_wav(storage.read_audio(audio.file))
    return samples.astype(np.float64), rate


def align(samples: np.ndarray, sample_rate: int, target_lufs: float) -> tuple[np.ndarray, float]:
    """Gain the samples to `target_lufs` (pyloudnorm, ITU-R BS.1770), peak-limited; returns the
    samples and the gain applied in dB."""
    loudness = integrated_loudness(samples, sample_rate)
    if loudness is None:
        return samples, 0.0
    gain_db = target_lufs - loudness
    gain = 10 ** (gain_db / 20)
    peak = float(np.max(np.abs(samples))) * gain
    if peak > PEAK_CEILING:
        gain *= PEAK_CEILING / peak
        gain_db = 20 * math.log10(gain)
    return samples * gain, gain_db


def delivery_settings(test: ListeningTest) -> tuple[bool, float, int]:
    """The delivery settings a rendered sound is keyed by: aligned, target, sample rate."""
    aligned = test.loudness_alignment
    return aligned, float(test.target_lufs) if aligned else 0.0, test.challenge.sample_rate


def delivered_of(row, test: ListeningTest) -> AudioFile:
    """The delivered audio of a row read with it (`lookups.trial_of`, `lookups.trial_to_answer`:
    `row.delivered`), or looked up (and rendered if it was not yet)."""
    found = getattr(row, "delivered", None)
    return found if found is not None else delivered_audio(row.audio, test)


def delivered_audio(source: AudioFile, test: ListeningTest) -> AudioFile:
    """The delivered version of `source` under the test's settings, rendered once and cached."""
    aligned, target, rate = delivery_settings(test)
    found = (
        DeliveredAudio.objects.filter(
            source=source, aligned=aligned, target_lufs=target, sample_rate=rate
        )
        .select_related("audio")
        .first()
    )
    if found:
        return found.audio
    samples, source_rate = load_samples(source)
    if source_rate != rate:
        samples = resample(samples, source_rate, rate)
    gain_db = 0.0
    if aligned:
        samples, gain_db = align(samples, rate, target)
    # Dithered like every delivered sound: no sound keeps a telltale handful of sample values.
    samples = dither(samples, int(source.sha256[:12], 16))
    audio = store_samples(samples, rate)
    try:
        with transaction.atomic():
            DeliveredAudio.objects.create(
                source=source,
                aligned=aligned,
                target_lufs=target,
                sample_rate=rate,
                audio=audio,
                gain_db=gain_db,
            )
    except IntegrityError:
        pass  # rendered concurrently: the same bytes, already recorded
    return audio


def byte_range(range_header: str, size: int) -> tuple[int, int] | None:
    """The inclusive byte range a `Range` header asks of a file of `size` bytes: None for the
    whole file; raises ValueError when nothing of the file is asked (416)."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", range_header.strip())
    if not match or not (match.group(1) or match.group(2)):
        return None
    first, last = match.groups()
    if first:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    else:  # the last N bytes
        start, end = max(0, size - int(last)), size - 1
    if start > end or start >= size:
        raise ValueError(range_header)
    return start, end


def audio_response(audio: AudioFile, range_header: str = "") -> HttpResponse:
    """The one way stimuli leave the server: same type, caching and (for equal durations) size;
    no file name, date or content tag that could tell two stimuli apart.

    Byte ranges are served (Safari on phones plays only from servers that support them). With
    settings.AUDIO_ACCEL_REDIRECT the web server in front sends the bytes (and the range) from
    the same file; the headers set here are the ones it passes on, and its configuration drops
    the date and content tag it would add (deploy/nginx.conf). `served_bytes` on the response
    is what the rater's browser receives.
    """
    size = audio.size_bytes
    try:
        wanted = byte_range(range_header, size)
    except ValueError:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        response.served_bytes = None
        return response
    start, end = wanted if wanted is not None else (0, size - 1)
    accel = settings.AUDIO_ACCEL_REDIRECT
    if accel:
        response = HttpResponse(content_type="audio/wav")
        response["X-Accel-Redirect"] = accel.rstrip("/") + "/" + audio.file
    else:
        data = storage.read_audio(audio.file)
        status = 206 if wanted is not None else 200
        response = HttpResponse(data[start : end + 1], content_type="audio/wav", status=status)
        if wanted is not None:
            response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end + 1 - start)
        response["Accept-Ranges"] = "bytes"  # nginx says so itself (once) when it sends
    response["Cache-Control"] = "private, max-age=86400"
    response.served_bytes = (start, end, size) if size else None
    return response


def served_range(response: HttpResponse) -> tuple[int, int, int] | None:
    """(first byte, last byte, file size) of what an `audio_response` sent; None for nothing."""
    return getattr(response, "served_bytes", None)


def concatenate(parts: list[np.ndarray], sample_rate: int, gap_s: float) -> np.ndarray:
    """Sounds one after another with `gap_s` of silence between them."""
    if not parts:
        raise ValueError("nothing to concatenate")
    channels = parts[0].shape[1]
    gap = np.zeros((round(gap_s * sample_rate), channels))
    pieces: list[np.ndarray] = []
    for n, part in enumerate(parts):
        if n:
            pieces.append(gap)
        pieces.append(part)
    return np.concatenate(pieces)
