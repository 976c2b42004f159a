"""Two imports of overlapping sets at the same time, on PostgreSQL: each sound ends up stored once,
every row has its file, and no file is left without a row."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from stimuli.models import AudioFile, Clip
from stimuli.services import create_challenge
from tests.factories import make_wav, make_zip

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_concurrent_imports_of_the_same_sounds(tmp_path, media_root):
    from stimuli.uploads.imports import import_clips

    challenge = create_challenge(name="Race", slug="race")
    shared = {f"rain/shared_{n}.wav": make_wav(seed=n) for n in range(6)}
    first = make_zip(tmp_path / "a.zip", {**shared, "rain/only_a.wav": make_wav(seed=100)})
    second = make_zip(tmp_path / "b.zip", {**shared, "rain/only_b.wav": make_wav(seed=200)})
    barrier = threading.Barrier(2)
    reports, errors = {}, []

    def run(name, path, role):
        try:
            barrier.wait()
            reports[name] = import_clips(challenge, path, role=role)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=run, args=("a", first, "development")),
        threading.Thread(target=run, args=("b", second, "evaluation")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert reports["a"].accepted and reports["b"].accepted
    assert AudioFile.objects.count() == 8
    assert Clip.objects.filter(role="development").count() == 7
    assert Clip.objects.filter(role="evaluation").count() == 7
    on_disk = {p.stem for p in (media_root / "audio").rglob("*.wav")}
    assert on_disk == set(AudioFile.objects.values_list("sha256", flat=True))
