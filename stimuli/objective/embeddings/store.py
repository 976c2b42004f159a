"""The embedding cache: every clip's embeddings under a model are computed once and kept.

An embedding is a float32 `.npy` [frames, d] in media storage, named by the model id's hash and
the audio's sha256, with an `Embedding` row that says it is complete. Files are written before
rows, and rows are inserted with ON CONFLICT DO NOTHING, so two workers racing on a clip (or a
worker killed half-way) leave one row and a complete file, never a row without its file.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import soundfile as sf
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from ...models import AudioFile, Embedding
from ...storage import read_audio

Progress = Callable[[int, int, str], None]


def embedding_name(model_id: str, sha256: str) -> str:
    model_key = hashlib.sha256(model_id.encode()).hexdigest()[:16]
    return f"embeddings/{model_key}/{sha256[:2]}/{sha256}.npy"


def _save(name: str, array: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array, dtype=np.float32), allow_pickle=False)
    if default_storage.exists(name):
        default_storage.delete(name)  # a partial file of a writer that died
    default_storage.save(name, ContentFile(buffer.getvalue()))


def load(embedding: Embedding) -> np.ndarray:
    with default_storage.open(embedding.file, "rb") as handle:
        return np.load(io.BytesIO(handle.read()), allow_pickle=False)


def cached_ids(model_id: str, audio_ids: Iterable[int]) -> set[int]:
    ids = list(audio_ids)
    found: set[int] = set()
    for start in range(0, len(ids), 5000):
        found.update(
            Embedding.objects.filter(
                model_id=model_id, audio_id__in=ids[start : start + 5000]
            ).values_list("audio_id", flat=True)
        )
    return found


def load_many(model_id: str, audio_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """Embeddings of these audio files under the model; raises if one has not been computed."""
    rows = {}
    ids = list(dict.fromkeys(audio_ids))
    for start in range(0, len(ids), 5000):
        for row in Embedding.objects.filter(
            model_id=model_id, audio_id__in=ids[start : start + 5000]
        ):
            rows[row.audio_id] = row
    missing = [i for i in ids if i not in rows]
    if missing:
        raise LookupError(f"{len(missing)} clips have no {model_id} embeddings yet")
    return {i: load(rows[i]) for i in ids}


def _read(audio: AudioFile) -> np.ndarray:
    samples, _ = sf.read(io.BytesIO(read_audio(audio.file)), dtype="float32", always_2d=True)
    return samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]


def embed_audio(
    model,
    audio_files: Sequence[AudioFile],
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
    should_stop: Callable[[], None] | None = None,
) -> dict[str, int]:
    """Embed what the cache lacks, `batch_size` clips at a time; returns computed/cached counts.

    Clips are batched by sample rate and length (a batch is one tensor), so memory follows the
    batch size, never the number of clips.
    """
    model_id = model.model_id
    unique = list({a.pk: a for a in audio_files}.values())
    have = cached_ids(model_id, (a.pk for a in unique))
    todo = [a for a in unique if a.pk not in have]
    total, done = len(unique), len(unique) - len(todo)
    if progress:
        progress(done, total, f"{done} embeddings cached, {len(todo)} to compute")
    groups: dict[tuple[int, int], list[AudioFile]] = {}
    for audio in todo:
        groups.setdefault((audio.sample_rate, audio.frames), []).append(audio)
    for (rate, _frames), members in groups.items():
        for start in range(0, len(members), batch_size):
            if should_stop:
                should_stop()
            batch = members[start : start + batch_size]
            emb = model.embed(np.stack([_read(a) for a in batch]), rate)
            rows = []
            for audio, frames in zip(batch, emb, strict=True):
                name = embedding_name(model_id, audio.sha256)
                _save(name, frames)
                rows.append(
                    Embedding(
                        audio=audio,
                        model_id=model_id,
                        file=name,
                        frames=frames.shape[0],
                        dim=frames.shape[1],
                    )
                )
            Embedding.objects.bulk_create(rows, ignore_conflicts=True)
            done += len(batch)
            if progress:
                progress(done, total, f"embedded {done} of {total} clips with {model.spec.name}")
    return {"computed": len(todo), "cached": total - len(todo), "total": total}
