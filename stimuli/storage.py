"""Content-addressed audio storage on Django's default storage (a shared volume or a bucket)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from .models import AudioFile

if TYPE_CHECKING:
    from .audio import AudioCheck


def audio_name(sha256: str) -> str:
    return f"audio/{sha256[:2]}/{sha256}.wav"


def put_audio(sha256: str, data: bytes) -> str:
    """Store `data` under its hash; an existing file of the right size is kept as it is."""
    name = audio_name(sha256)
    if default_storage.exists(name):
        if default_storage.size(name) == len(data):
            return name
        # A partial file from a writer that died; nothing can reference it yet.
        default_storage.delete(name)
    saved = default_storage.save(name, ContentFile(data))
    if saved != name:  # pragma: no cover - storage renamed it; never expected for hashed names
        default_storage.delete(saved)
        raise RuntimeError(f"storage refused the name {name}")
    return name


def delete_audio(sha256: str) -> None:
    name = audio_name(sha256)
    if default_storage.exists(name):
        default_storage.delete(name)


def read_audio(name: str) -> bytes:
    with default_storage.open(name, "rb") as handle:
        return handle.read()


def audio_row(sha: str, check: AudioCheck, size: int) -> AudioFile:
    """The (unsaved) row of a checked sound stored under its hash: uploads and generation alike."""
    return AudioFile(
        sha256=sha,
        **{
            "file": audio_name(sha),
            "size_bytes": size,
            "sample_rate": check.sample_rate,
            "channels": check.channels,
            "bit_depth": check.bit_depth,
            "frames": check.frames,
            "duration_s": check.duration_s,
            "loudness_lufs": check.loudness_lufs,
            "peak_dbfs": check.peak_dbfs,
            "is_silent": check.is_silent,
            "is_clipped": check.is_clipped,
        },
    )


def stored_row(row: AudioFile) -> tuple[AudioFile, bool]:
    """The stored row of `row`'s hash and whether it is new: the existing one, or `row` saved
    (another worker may store the same sound at the same moment)."""
    return AudioFile.objects.get_or_create(
        sha256=row.sha256,
        defaults={
            f.attname: getattr(row, f.attname)
            for f in AudioFile._meta.concrete_fields
            if f.attname not in ("id", "sha256")
        },
    )


def stored_audio(check: AudioCheck) -> tuple[AudioFile, bool]:
    """The row of a checked sound, created with its file when new (inside the caller's
    transaction); the file is written again where the storage lost it."""
    audio, created = stored_row(audio_row(check.sha256, check, len(check.wav_bytes)))
    if created or not default_storage.exists(audio.file):
        put_audio(check.sha256, check.wav_bytes)
    return audio, created
