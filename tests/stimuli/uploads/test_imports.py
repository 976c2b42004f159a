"""Imports of reference sets and system audio: every bad input gets a clear error and stores nothing."""

from __future__ import annotations

import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from stimuli.archives import UploadLimits
from stimuli.job_kinds import IMPORT
from stimuli.models import AudioFile, Challenge, Clip, Job
from stimuli.services import create_system, create_team
from stimuli.uploads.imports import ImportPhaseError, ImportRequestError, import_clips
from stimuli.uploads.services import _as_local_file, run_import_job
from tests.factories import declare_frames, make_flac, make_wav, make_zip, reference_set

pytestmark = pytest.mark.django_db


def stored_files(media_root: Path) -> list[Path]:
    return [p for p in media_root.rglob("*") if p.is_file()]


def assert_nothing_stored(media_root: Path) -> None:
    assert Clip.objects.count() == 0
    assert AudioFile.objects.count() == 0
    assert stored_files(media_root) == []


def run(challenge, path, **kwargs):
    kwargs.setdefault("role", "development")
    return import_clips(challenge, path, **kwargs)


def test_good_upload_stores_every_clip(challenge, tmp_path, media_root):
    zip_path = make_zip(tmp_path / "dev.zip", reference_set(["dog_bark", "rain"], 3))
    report = run(challenge, zip_path)
    assert report.accepted, report.to_dict()
    assert report.created_clips == 6
    assert Clip.objects.filter(role="development", category__slug="rain").count() == 3
    assert len(stored_files(media_root)) == 6
    clip = Clip.objects.first()
    assert clip.audio.file.endswith(f"{clip.audio.sha256}.wav")
    assert (media_root / clip.audio.file).read_bytes()[:4] == b"RIFF"


def test_folder_names_match_category_names_or_slugs_case_insensitively(challenge, tmp_path):
    files = {
        "DogBark/a.wav": make_wav(seed=1),
        "SNEEZE_COUGH/b.wav": make_wav(seed=2),
        "Moving Motor Vehicle/c.wav": make_wav(seed=3),
        "gunshot/d.WAV": make_wav(seed=4),
    }
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert report.accepted, report.to_dict()
    assert sorted(Clip.objects.values_list("category__slug", flat=True)) == [
        "dog_bark", "gunshot", "moving_motor_vehicle", "sneeze_cough",
    ]  # fmt: skip


def test_a_single_wrapper_folder_is_looked_through(challenge, tmp_path):
    files = {f"eval_set/{k}": v for k, v in reference_set(["rain"], 2).items()}
    report = run(challenge, make_zip(tmp_path / "u.zip", files), role="evaluation")
    assert report.accepted
    assert Clip.objects.filter(role="evaluation").count() == 2


def test_archive_metadata_is_skipped_with_a_note(challenge, tmp_path):
    files = {**reference_set(["rain"], 1), "__MACOSX/rain/._0.wav": b"junk", "rain/.DS_Store": b"x"}
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert report.accepted
    assert sorted(report.skipped) == [
        "__MACOSX/rain/._0.wav: archive metadata",
        "rain/.DS_Store: archive metadata",
    ]


def test_one_bad_file_rejects_the_whole_upload(challenge, tmp_path, media_root):
    files = reference_set(["dog_bark", "rain"], 3)
    files["rain/bad.wav"] = make_wav(sample_rate=44100)
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert not report.accepted
    bad = report.rejected_files
    assert [f.path for f in bad] == ["rain/bad.wav"]
    assert bad[0].errors == ["sample rate is 44,100 Hz; expected 22,050 Hz"]
    assert report.summary() == "Upload rejected: 1 of 7 files are invalid. Nothing was stored."
    assert_nothing_stored(media_root)


def test_each_bad_file_gets_its_own_error(challenge, tmp_path, media_root):
    files = {
        "rain/ok.wav": make_wav(seed=1),
        "rain/stereo.wav": make_wav(channels=2),
        "rain/short.wav": make_wav(seconds=1.0),
        "rain/float.wav": make_wav(subtype="FLOAT"),
        "rain/garbage.wav": b"this is not audio",
    }
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    errors = {f.path: f.errors for f in report.rejected_files}
    assert errors == {
        "rain/stereo.wav": ["has 2 channels; expected mono"],
        "rain/short.wav": [
            "duration is 1.000 s (22,050 samples); expected 4.000 s (88,200 samples)"
        ],
        "rain/float.wav": ["sample format is FLOAT samples; expected 16-bit PCM"],
        "rain/garbage.wav": [errors["rain/garbage.wav"][0]],
    }
    assert errors["rain/garbage.wav"][0].startswith("not readable as audio")
    assert_nothing_stored(media_root)


def test_convert_policy_accepts_and_reports_what_it_changed(challenge, tmp_path):
    files = {"rain/stereo.wav": make_wav(channels=2, sample_rate=44100, seconds=2.0)}
    report = run(challenge, make_zip(tmp_path / "u.zip", files), convert=True)
    assert report.accepted
    assert report.files[0].warnings == [
        "mixed 2 channels to mono",
        "resampled 44,100 Hz to 22,050 Hz",
        "zero-padded 2.000 s to 4 s",
    ]
    audio = AudioFile.objects.get()
    assert (audio.sample_rate, audio.channels, audio.frames) == (22050, 1, 88200)


def test_duplicate_clip_is_stored_once(challenge, tmp_path, media_root):
    wav = make_wav(seed=42)
    files = {"rain/a.wav": wav, "rain/copy_of_a.wav": wav}
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert report.accepted
    assert [f.status for f in report.files] == ["stored", "duplicate"]
    assert Clip.objects.count() == 1 and AudioFile.objects.count() == 1
    # Uploading it again adds nothing either.
    again = run(challenge, make_zip(tmp_path / "again.zip", {"rain/other_name.wav": wav}))
    assert again.accepted and again.created_clips == 0
    assert [f.status for f in again.files] == ["already present"]
    assert Clip.objects.count() == 1 and AudioFile.objects.count() == 1
    assert len(stored_files(media_root)) == 1


def test_same_sound_in_two_sets_is_one_file_and_two_clips(challenge, tmp_path, media_root):
    zip_path = make_zip(tmp_path / "u.zip", {"rain/a.wav": make_wav(seed=5)})
    run(challenge, zip_path, role="development")
    run(challenge, zip_path, role="evaluation")
    assert Clip.objects.count() == 2
    assert AudioFile.objects.count() == 1
    assert len(stored_files(media_root)) == 1


def test_system_output_needs_a_system_of_the_same_challenge(challenge, tmp_path):
    zip_path = make_zip(tmp_path / "u.zip", reference_set(["rain"], 1))
    with pytest.raises(ImportRequestError, match="system output needs a system"):
        run(challenge, zip_path, role="system")
    team = create_team(challenge, name="Team")
    system = create_system(team=team, track=challenge.tracks.get(code="A"), name="Sys")
    with pytest.raises(ImportRequestError, match="belongs to no system"):
        run(challenge, zip_path, role="development", system=system)
    report = run(challenge, zip_path, role="system", system=system)
    assert report.accepted
    assert Clip.objects.get().system == system


# --- hostile and broken archives -------------------------------------------------------------


def write_raw_zip(path: Path, entries: list[tuple[zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for info, data in entries:
            archive.writestr(info, data)
    return path


def info(name: str, *, mode: int | None = None) -> zipfile.ZipInfo:
    entry = zipfile.ZipInfo(name)
    entry.compress_type = zipfile.ZIP_DEFLATED
    if mode is not None:
        entry.create_system = 3
        entry.external_attr = mode << 16
    return entry


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("../rain/evil.wav", "../rain/evil.wav: path traversal ('..') is not allowed"),
        ("rain/../../evil.wav", "rain/../../evil.wav: path traversal ('..') is not allowed"),
        ("/etc/rain/evil.wav", "/etc/rain/evil.wav: absolute path is not allowed"),
        ("C:/rain/evil.wav", "C:/rain/evil.wav: absolute path is not allowed"),
        ("rain\\evil.wav", "rain\\evil.wav: backslash in path is not allowed"),
    ],
)
def test_hostile_names_are_rejected(challenge, tmp_path, media_root, name, message):
    path = write_raw_zip(
        tmp_path / "u.zip", [(info("rain/ok.wav"), make_wav()), (info(name), make_wav(seed=1))]
    )
    report = run(challenge, path)
    assert not report.accepted
    assert report.problems == [message]
    assert_nothing_stored(media_root)


def test_symlink_entries_are_rejected(challenge, tmp_path, media_root):
    link = info("rain/link.wav", mode=stat.S_IFLNK | 0o777)
    path = write_raw_zip(
        tmp_path / "u.zip", [(info("rain/ok.wav"), make_wav()), (link, b"/etc/passwd")]
    )
    report = run(challenge, path)
    assert report.problems == ["rain/link.wav: symbolic links are not allowed"]
    assert_nothing_stored(media_root)


def test_zip_bomb_by_compression_ratio_is_rejected(challenge, tmp_path, media_root):
    bomb = info("rain/bomb.wav")
    path = write_raw_zip(tmp_path / "u.zip", [(bomb, b"\x00" * (50 * 1024 * 1024))])
    assert path.stat().st_size < 200_000
    report = run(challenge, path)
    assert len(report.problems) == 1
    assert report.problems[0].startswith("rain/bomb.wav: compression ratio ")
    assert report.problems[0].endswith("exceeds the limit of 100:1 (possible zip bomb)")
    assert_nothing_stored(media_root)


def test_total_expanded_size_is_capped(challenge, tmp_path, media_root):
    path = make_zip(tmp_path / "u.zip", reference_set(["rain"], 3))
    report = run(challenge, path, limits=UploadLimits(max_expanded_bytes=400_000))
    assert report.problems == ["the archive expands to 529,332 bytes; the limit is 400,000"]
    assert_nothing_stored(media_root)


def test_too_many_files_is_rejected_before_reading_them(challenge, tmp_path, media_root):
    files = {f"rain/{n}.wav": b"x" for n in range(11)}
    report = run(challenge, make_zip(tmp_path / "u.zip", files), limits=UploadLimits(max_files=10))
    assert report.problems == ["the archive holds 11 files; the limit is 10"]
    assert_nothing_stored(media_root)


def test_unknown_folders_are_named_with_the_expected_ones(challenge, tmp_path, media_root):
    files = {**reference_set(["rain"], 1), "cats/meow.wav": make_wav(seed=9)}
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert report.problems == [
        "cats/: unknown category folder; expected one of: dog_bark, footstep, gunshot, "
        "keyboard, moving_motor_vehicle, rain, sneeze_cough"
    ]
    assert_nothing_stored(media_root)


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
def test_misplaced_files_are_rejected_and_non_audio_skipped_unless_strict(
    challenge, tmp_path, media_root, strict
):
    files = {
        **reference_set(["rain"], 1),
        "rain/notes.txt": b"hello",
        "loose.wav": make_wav(seed=3),
        "rain/deeper/x.wav": make_wav(seed=4),
    }
    report = run(challenge, make_zip(tmp_path / "u.zip", files), strict=strict)
    misplaced = [
        "loose.wav: file is not inside a category folder",
        "rain/deeper/x.wav: nested folders are not allowed; expected <category>/<file>",
    ]
    stray = "rain/notes.txt: not an audio file (extension '.txt'); expected .wav"
    assert sorted(report.problems) == sorted(misplaced + ([stray] if strict else []))
    assert report.skipped == ([] if strict else ["rain/notes.txt: not an audio file"])
    assert_nothing_stored(media_root)


def test_a_readme_beside_the_clips_is_skipped_and_the_clips_stored(challenge, tmp_path):
    files = {**reference_set(["rain"], 2), "rain/README.md": b"# notes", "LICENSE": b"CC-BY"}
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert report.accepted and report.created_clips == 2
    assert sorted(report.skipped) == [
        "LICENSE: not an audio file",
        "rain/README.md: not an audio file",
    ]


def test_every_problem_of_an_archive_is_reported_in_one_pass(challenge, tmp_path, media_root):
    # What took three uploads to learn: a stray file, an unknown folder, a file at the wrong
    # rate and one stereo and too long, beside a good clip.
    files = {
        "rain/good.wav": make_wav(seed=1),
        "rain/notes.txt": b"take 2 was better",
        "cats/meow.wav": make_wav(seed=2),
        "rain/fast.wav": make_wav(seed=3, sample_rate=44_100),
        "rain/wide.wav": make_wav(seed=4, channels=2, seconds=5.0),
    }
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert not report.accepted
    assert report.problems == [
        "cats/: unknown category folder; expected one of: dog_bark, footstep, gunshot, "
        "keyboard, moving_motor_vehicle, rain, sneeze_cough"
    ]
    assert report.skipped == ["rain/notes.txt: not an audio file"]
    errors = {f.path: " ".join(f.errors) for f in report.files}
    assert errors["rain/good.wav"] == ""
    # Sound audio in an unknown folder is not listed as valid: it cannot be stored either.
    assert errors["cats/meow.wav"] == "its folder 'cats' names no category of this challenge"
    assert {f.path: f.status for f in report.files}["cats/meow.wav"] == "rejected"
    assert "sample rate is 44,100 Hz; expected 22,050 Hz" in errors["rain/fast.wav"]
    assert "2 channels" in errors["rain/wide.wav"] and "5.0" in errors["rain/wide.wav"]
    assert report.summary() == (
        "Upload rejected: 1 problem with the archive and 3 of 4 files are invalid. "
        "Nothing was stored."
    )
    assert_nothing_stored(media_root)


def test_truncated_zip_is_rejected(challenge, tmp_path, media_root):
    whole = make_zip(tmp_path / "whole.zip", reference_set(["rain"], 2)).read_bytes()
    path = tmp_path / "truncated.zip"
    path.write_bytes(whole[: len(whole) // 2])
    report = run(challenge, path)
    assert report.problems == [
        "the upload is not a readable zip archive (truncated or not a zip file)"
    ]
    assert_nothing_stored(media_root)


def test_not_a_zip_is_rejected(challenge, tmp_path, media_root):
    path = tmp_path / "u.zip"
    path.write_bytes(make_wav())
    report = run(challenge, path)
    assert report.problems == [
        "the upload is not a readable zip archive (truncated or not a zip file)"
    ]
    assert_nothing_stored(media_root)


def test_corrupt_member_data_is_reported_for_that_file(challenge, tmp_path, media_root):
    path = make_zip(
        tmp_path / "u.zip",
        {"rain/a.wav": make_wav(seed=1), "rain/b.wav": make_wav(seed=2)},
        compression=zipfile.ZIP_STORED,
    )
    data = bytearray(path.read_bytes())
    offset = data.find(b"data", 200)  # inside the second member's samples
    data[offset + 4000 : offset + 4010] = b"\xff" * 10
    path.write_bytes(bytes(data))
    report = run(challenge, path)
    assert not report.accepted
    bad = report.rejected_files
    assert len(bad) == 1 and bad[0].errors[0].startswith("corrupt archive entry")
    assert_nothing_stored(media_root)


def test_empty_upload_is_rejected(challenge, tmp_path, media_root):
    report = run(challenge, make_zip(tmp_path / "u.zip", {}))
    assert report.problems == ["the upload holds no audio files"]
    assert_nothing_stored(media_root)


def test_folder_import_rejects_symlinks(challenge, tmp_path, media_root):
    root = tmp_path / "set"
    (root / "rain").mkdir(parents=True)
    (root / "rain" / "a.wav").write_bytes(make_wav())
    os.symlink("/etc/passwd", root / "rain" / "b.wav")
    report = run(challenge, root)
    assert report.problems == ["rain/b.wav: symbolic links are not allowed"]
    assert_nothing_stored(media_root)


def test_folder_import_stores_like_a_zip(challenge, tmp_path):
    root = tmp_path / "set"
    for name, data in reference_set(["rain", "keyboard"], 2).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    report = run(challenge, root)
    assert report.accepted and report.created_clips == 4


def test_failure_while_storing_removes_the_files_written(
    challenge, tmp_path, media_root, monkeypatch
):
    """A crash between writing files and committing leaves neither rows nor files behind."""
    import stimuli.uploads.imports as imports

    written = []
    real_put = imports.storage.put_audio

    def put_then_count(sha, data):
        written.append(sha)
        return real_put(sha, data)

    def failing_bulk_create(objs, *args, **kwargs):
        assert written, "audio files are written before the clips are created"
        raise RuntimeError("disk full")

    monkeypatch.setattr(imports.storage, "put_audio", put_then_count)
    monkeypatch.setattr(imports.Clip.objects, "bulk_create", failing_bulk_create)
    with pytest.raises(RuntimeError, match="disk full"):
        run(challenge, make_zip(tmp_path / "u.zip", reference_set(["rain"], 3)))
    assert len(written) == 3
    assert_nothing_stored(media_root)


# --- crafted archives, names and headers --------------------------------------------------------


def member_headers(data: bytes, name: str) -> tuple[int, int]:
    """Where the local header and the central directory record of member `name` start."""
    encoded = name.encode()
    local, central = data.find(encoded) - 30, data.rfind(encoded) - 46
    assert data[local : local + 4] == b"PK\x03\x04" and data[central : central + 4] == b"PK\x01\x02"
    return local, central


def test_a_name_marked_utf8_that_is_not_utf8_rejects_the_archive(challenge, tmp_path, media_root):
    path = make_zip(tmp_path / "u.zip", {"rain/ok.wav": make_wav(), "rain/é.wav": make_wav(seed=1)})
    # zipfile marks a non-ASCII name as UTF-8; two bytes that are not UTF-8 replace the "é".
    path.write_bytes(path.read_bytes().replace("é".encode(), b"\xff\xfe"))
    report = run(challenge, path)
    assert report.problems == [
        "the upload is not a readable zip archive (a file name is marked as UTF-8 but is not "
        "valid UTF-8)"
    ]
    assert_nothing_stored(media_root)


def test_an_unsupported_compression_method_rejects_the_archive(challenge, tmp_path, media_root):
    files = {"rain/ok.wav": make_wav(), "rain/aes.wav": make_wav(seed=1)}
    data = bytearray(
        make_zip(tmp_path / "u.zip", files, compression=zipfile.ZIP_STORED).read_bytes()
    )
    local, central = member_headers(bytes(data), "rain/aes.wav")
    data[local + 8 : local + 10] = data[central + 10 : central + 12] = (99).to_bytes(2, "little")
    (tmp_path / "u.zip").write_bytes(bytes(data))
    report = run(challenge, tmp_path / "u.zip")
    assert report.problems == [
        "rain/aes.wav: compression method 99 is not supported; use stored, deflate, bzip2, lzma"
    ]
    assert_nothing_stored(media_root)


def test_corrupt_deflate_data_is_reported_for_that_file(challenge, tmp_path, media_root):
    files = {"rain/a.wav": make_wav(seed=1), "rain/b.wav": make_wav(seed=2)}
    data = bytearray(make_zip(tmp_path / "u.zip", files).read_bytes())
    local, _ = member_headers(bytes(data), "rain/b.wav")
    name_length, extra_length = struct.unpack("<HH", data[local + 26 : local + 30])
    # The first deflate block header now names block type 3, which does not exist.
    data[local + 30 + name_length + extra_length] = 0xFF
    (tmp_path / "u.zip").write_bytes(bytes(data))
    report = run(challenge, tmp_path / "u.zip")
    assert not report.accepted
    assert {f.path: f.status for f in report.files} == {
        "rain/a.wav": "valid",
        "rain/b.wav": "rejected",
    }
    assert report.rejected_files[0].errors == [
        "corrupt archive entry (Error -3 while decompressing data: invalid block type)"
    ]
    assert_nothing_stored(media_root)


def test_a_flac_declaring_hours_is_one_rejected_file_not_a_failed_import(
    challenge, tmp_path, media_root
):
    files = {
        **reference_set(["rain"], 2),
        "rain/liar.flac": declare_frames(make_flac(seconds=0.5), 2**36 - 1),
    }
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert not report.accepted
    assert {f.path: f.status for f in report.files} == {
        "rain/0.wav": "valid",
        "rain/1.wav": "valid",
        "rain/liar.flac": "rejected",
    }
    assert report.rejected_files[0].errors == [
        "duration is 3116529.557 s (68,719,476,735 samples); expected 4.000 s (88,200 samples)"
    ]
    assert report.summary() == "Upload rejected: 1 of 3 files are invalid. Nothing was stored."
    assert_nothing_stored(media_root)


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize(
    ("names", "message"),
    [
        (
            ["rain/a.wav", "rain/a.wav"],
            "rain/a.wav: the name appears more than once in the archive",
        ),
        (
            ["rain/a.wav", "Rain/A.WAV"],
            "Rain/A.WAV: the same name as rain/a.wav once letter case and Unicode form are "
            "ignored; rename one of them",
        ),
        (
            ["rain/caf\u00e9.wav", "rain/cafe\u0301.wav"],
            "rain/cafe\u0301.wav: the same name as rain/caf\u00e9.wav once letter case and "
            "Unicode form are ignored; rename one of them",
        ),
    ],
)
def test_a_name_given_twice_rejects_the_archive(challenge, tmp_path, media_root, names, message):
    # The first entry is the bad one: with one name for both, only the last could be read.
    entries = [(info(names[0]), make_wav(sample_rate=44100)), (info(names[1]), make_wav(seed=1))]
    report = run(challenge, write_raw_zip(tmp_path / "u.zip", entries))
    assert report.problems == [message]
    assert_nothing_stored(media_root)


def test_a_path_longer_than_a_stored_name_is_rejected(challenge, tmp_path, media_root):
    long_name = f"rain/{'x' * 300}.wav"
    limit = Clip._meta.get_field("original_name").max_length
    files = {"rain/ok.wav": make_wav(), long_name: make_wav(seed=1)}
    report = run(challenge, make_zip(tmp_path / "u.zip", files))
    assert report.problems == [
        f"{long_name}: the path is 309 characters long; the limit is {limit}"
    ]
    assert_nothing_stored(media_root)


@pytest.mark.parametrize(
    ("phase", "message"),
    [
        (
            "listening",
            "the listening test is open: its stimuli are fixed, so no clips can be added",
        ),
        ("published", "the results of this challenge are published; nothing can change"),
    ],
)
def test_no_import_once_the_listening_test_opened(challenge, tmp_path, media_root, phase, message):
    Challenge.objects.filter(pk=challenge.pk).update(phase=phase)
    challenge.refresh_from_db()
    with pytest.raises(ImportPhaseError) as refused:
        run(challenge, make_zip(tmp_path / "u.zip", reference_set(["rain"], 1)))
    assert str(refused.value) == message
    assert_nothing_stored(media_root)


# --- the worker side of an upload --------------------------------------------------------------


def stage(data: bytes) -> str:
    return default_storage.save("staging/upload.zip", ContentFile(data))


def test_an_upload_whose_system_was_deleted_fails_and_leaves_no_staged_file(
    challenge, tmp_path, media_root
):
    team = create_team(challenge, name="Team")
    system = create_system(team=team, track=challenge.tracks.get(code="A"), name="Sys")
    staging = stage(make_zip(tmp_path / "u.zip", reference_set(["rain"], 1)).read_bytes())
    job = Job.objects.create(
        challenge=challenge,
        kind=IMPORT,
        params={"staging": staging, "role": "system", "system_id": system.pk, "convert": False},
    )
    system.delete()
    job = run_import_job(job.pk)
    assert job.state == Job.State.FAILED
    assert_nothing_stored(media_root)  # the staged zip included
    assert job.error == "The system of this upload was deleted."


def test_an_error_raised_while_a_staged_file_is_open_reaches_the_caller(media_root):
    staging = stage(b"PK")
    refused = pytest.raises(NotImplementedError, match="That compression method is not supported")
    with refused, _as_local_file(staging) as path:
        assert path.read_bytes() == b"PK"
        raise NotImplementedError("That compression method is not supported")
