"""Audio as raters receive it: one format, loudness-aligned, with nothing that identifies it.

Every sound is delivered as a bare 16-bit PCM WAV at the challenge's rate (the canonical encoding
carries no metadata chunks), brought to one integrated loudness unless the organizers turned that
off, and served with the same headers whatever it is.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import re
import select
import socket
import struct
import termios
import time
from collections.abc import Callable

import numpy as np
from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.http import HttpResponse, StreamingHttpResponse

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
    """The delivered audio of a row read with it (`statements.trial_of`, `statements.trial_to_answer`:
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
    whole file; raises ValueError when nothing of the file is asked, or several ranges are
    (416: a player asks for one range at a time, and a list of ranges would be sent as pieces
    the delivery record cannot vouch for)."""
    value = range_header.strip()
    if not value:
        return None
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", value)
    if not match or not (match.group(1) or match.group(2)):
        if value.startswith("bytes=") and "," in value:
            raise ValueError(range_header)
        return None
    first, last = match.groups()
    if first:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
    else:  # the last N bytes
        start, end = max(0, size - int(last)), size - 1
    if start > end or start >= size:
        raise ValueError(range_header)
    return start, end


# A sound's body leaves in pieces of this size.
CHUNK_BYTES = 64 * 1024
# How long a sent body may wait for the client's acknowledgement before it counts as not sent.
ACK_TIMEOUT_S = 30.0
# Through nginx, sounds leave at this many times their playing rate (bytes per second), never
# slower than MIN_SEND_RATE.
SEND_RATE_FACTOR = 2
MIN_SEND_RATE = 32 * 1024
RECEIPT_HEADER = "X-Foley-Receipt"
# Where the web server in front reports a sound sent (deploy/nginx.conf's @sound_sent).
RECEIPT_PATH = "/_sounds/delivered/"
RECEIPT_SALT = "raters.delivery.receipt"
# A receipt is redeemed when the web server in front has sent the file: within this time.
RECEIPT_MAX_AGE_S = 3600


# TCP states (Linux's tcp_states.h) in which a connection still carries what was sent: open, or
# closed by the client after it read everything (its FIN acknowledges all it received).
_CARRYING = (1, 8)  # ESTABLISHED, CLOSE_WAIT


def _queue(sock) -> tuple[int, int | None]:
    """Bytes sent but not acknowledged on `sock`, and its TCP state where it can be read."""
    (waiting,) = struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))
    tcp_info = getattr(socket, "TCP_INFO", None)
    state = sock.getsockopt(socket.IPPROTO_TCP, tcp_info, 1)[0] if tcp_info else None
    return waiting, state


def acknowledged(sock, timeout: float = ACK_TIMEOUT_S) -> bool:
    """Whether everything written to `sock` reached the client: the kernel's queue of bytes
    sent but not acknowledged (Linux's SIOCOUTQ) emptied while the connection stood (a reset
    empties the queue too, so its state is read with it). Where the queue cannot be asked,
    what was written counts."""
    try:
        _queue(sock)
    except (OSError, AttributeError, ValueError):
        return True
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLERR | select.POLLHUP | select.POLLRDHUP)
    deadline = time.monotonic() + timeout
    while True:
        try:
            waiting, state = _queue(sock)
        except OSError:
            return False
        if state is not None and state not in _CARRYING:
            return False
        if waiting == 0:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        # Acknowledgements arrive within a round trip; a failure or the client's close ends the
        # wait at once (then asked no more: it stays signalled).
        if poller.poll(min(5.0, left) * 1000):
            poller.modify(sock.fileno(), 0)


class Sent:
    """A sound's body, in pieces, that calls `on_sent` once all of it has left: written out by
    the server and, where the connection can be asked, acknowledged by the client. A client that
    goes away half-way makes the server close the body before its end, so nothing is called."""

    def __init__(self, data: bytes, on_sent: Callable[[], None], sock=None) -> None:
        self.data, self.on_sent, self.sock = data, on_sent, sock

    def __iter__(self):
        for offset in range(0, len(self.data), CHUNK_BYTES):
            yield self.data[offset : offset + CHUNK_BYTES]
        # Reached only once the server asked for more after writing the last piece.
        if self.sock is None or acknowledged(self.sock):
            self.on_sent()


def receipt(kind: int, pk: int, start: int, end: int, size: int) -> str:
    """What the web server in front hands back once it has sent a file (deploy/nginx.conf's
    post_action): signed, so only a receipt this process wrote is redeemed."""
    return signing.dumps([kind, pk, start, end, size], salt=RECEIPT_SALT, compress=False)


def redeem(value: str, completion: str, bytes_sent: str) -> tuple[int, int, int, int, int] | None:
    """The (kind, row id, first byte, last byte, size) of a receipt whose file was sent whole
    (nginx's `$request_completion` "OK" and `$body_bytes_sent` the range's length); None
    otherwise."""
    try:
        kind, pk, start, end, size = signing.loads(
            value, salt=RECEIPT_SALT, max_age=RECEIPT_MAX_AGE_S
        )
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if completion != "OK" or bytes_sent != str(end + 1 - start):
        return None
    return kind, pk, start, end, size


def audio_response(
    audio: AudioFile,
    range_header: str = "",
    *,
    sent: Callable[[int, int, int], None] | None = None,
    receipt_for: tuple[int, int] | None = None,
    sock=None,
    accel: bool = True,
) -> HttpResponse:
    """The one way stimuli leave the server: same type, caching and (for equal durations) size;
    no file name, date or content tag that could tell two stimuli apart.

    Byte ranges are served (Safari on phones plays only from servers that support them), one
    at a time. `sent(first, last, size)` is called once those bytes have left (`Sent`); with
    settings.AUDIO_ACCEL_REDIRECT the web server in front sends the bytes from the same file
    and, once it has, hands back the receipt for `receipt_for` (kind, row id) that this
    response carries (hidden from the browser); the headers set here are the ones it passes on,
    and its configuration drops the date and content tag it would add (deploy/nginx.conf).
    `accel` False (the request did not come through that server) sends the bytes from here.
    """
    size = audio.size_bytes
    try:
        wanted = byte_range(range_header, size)
    except ValueError:
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        return response
    start, end = wanted if wanted is not None else (0, size - 1)
    accel_to = settings.AUDIO_ACCEL_REDIRECT if accel else ""
    if accel_to:
        response = HttpResponse(content_type="audio/wav")
        response["X-Accel-Redirect"] = accel_to.rstrip("/") + "/" + audio.file
        # nginx sends at twice the rate the sound plays (two seconds' worth at once, then the
        # rest as the next second begins): a player never waits, and a download abandoned early
        # is still being sent when the browser goes away, so nginx sees it end short and reports
        # no delivery. Unlimited, nginx would hand the whole file to the kernel at once and call
        # it complete. (A sound under two seconds leaves in one piece.)
        if audio.duration_s:
            rate = SEND_RATE_FACTOR * audio.size_bytes / audio.duration_s
            response["X-Accel-Limit-Rate"] = str(max(MIN_SEND_RATE, int(rate)))
        if receipt_for is not None and size:
            response[RECEIPT_HEADER] = receipt(*receipt_for, start, end, size)
    else:
        data = storage.read_audio(audio.file)[start : end + 1]
        status = 206 if wanted is not None else 200

        def done() -> None:
            if sent is not None and size:
                sent(start, end, size)

        response = StreamingHttpResponse(
            Sent(data, done, sock), content_type="audio/wav", status=status
        )
        if wanted is not None:
            response["Content-Range"] = f"bytes {start}-{end}/{size}"
        response["Content-Length"] = str(end + 1 - start)
        response["Accept-Ranges"] = "bytes"  # nginx says so itself (once) when it sends
    response["Cache-Control"] = "private, max-age=86400"
    return response


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
