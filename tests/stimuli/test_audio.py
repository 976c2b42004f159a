"""The clip-spec checks and the DCASE-style conversion, on real encoded audio."""

import hashlib
import io
import struct
import tracemalloc

import numpy as np
import pytest
import soundfile as sf

from stimuli.audio import ClipSpec, encode_wav, inspect_audio, quantise, resample
from tests.factories import declare_frames, make_flac, make_wav, silent_flac

SPEC = ClipSpec()


def test_valid_clip_passes_with_canonical_encoding():
    check = inspect_audio(make_wav(seed=1), SPEC)
    assert check.ok, check.errors
    assert (check.sample_rate, check.channels, check.frames, check.bit_depth) == (
        22050,
        1,
        88200,
        16,
    )
    assert check.sha256 == hashlib.sha256(check.wav_bytes).hexdigest()
    assert -40 < check.loudness_lufs < 0
    assert not check.is_silent and not check.is_clipped


def test_same_samples_give_same_hash_whatever_the_file_metadata():
    samples = np.random.default_rng(3).uniform(-0.5, 0.5, (88200, 1))
    plain = make_wav(samples=samples)
    # The same samples written as a 16-bit WAVEX file: different bytes, same sound.
    extensible = make_wav(samples=samples, fmt="WAVEX")
    assert plain != extensible
    assert inspect_audio(plain, SPEC).sha256 == inspect_audio(extensible, SPEC).sha256


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sample_rate": 44100}, "sample rate is 44,100 Hz; expected 22,050 Hz"),
        ({"channels": 2}, "has 2 channels; expected mono"),
        (
            {"seconds": 3.5},
            "duration is 3.500 s (77,175 samples); expected 4.000 s (88,200 samples)",
        ),
        ({"subtype": "FLOAT"}, "sample format is FLOAT samples; expected 16-bit PCM"),
        ({"subtype": "PCM_24"}, "sample format is 24-bit PCM; expected 16-bit PCM"),
    ],
)
def test_strict_policy_names_what_is_wrong_and_what_was_expected(kwargs, message):
    check = inspect_audio(make_wav(**kwargs), SPEC)
    assert not check.ok
    assert message in check.errors
    assert check.wav_bytes is None


def test_every_deviation_is_reported_at_once():
    check = inspect_audio(make_wav(sample_rate=48000, channels=2, seconds=1.0), SPEC)
    assert len(check.errors) == 3


def test_unreadable_bytes_are_rejected_with_a_clear_error():
    check = inspect_audio(b"RIFF\x00\x00\x00\x00WAVEjunk" + b"\x00" * 100, SPEC)
    assert not check.ok
    assert check.errors[0].startswith("not readable as audio")
    assert check.errors[0].endswith("expected a PCM_16 WAV file")


def test_empty_audio_is_rejected():
    check = inspect_audio(make_wav(samples=np.zeros((0, 1))), SPEC)
    assert check.errors and "contains no samples" in check.errors[0]


def test_nan_samples_are_rejected():
    samples = np.zeros((88200, 1))
    samples[100] = np.nan
    check = inspect_audio(make_wav(samples=samples, subtype="FLOAT"), SPEC, convert=True)
    assert check.errors == ["contains NaN or infinite sample values"]


def test_silent_and_clipped_clips_are_flagged_not_rejected():
    silent = inspect_audio(make_wav(samples=np.zeros((88200, 1))), SPEC)
    assert silent.ok and silent.is_silent and silent.loudness_lufs is None
    assert "is silent (peak below -80 dBFS)" in silent.warnings

    samples = np.full((88200, 1), 0.2)
    samples[1000:1010] = 1.0
    clipped = inspect_audio(make_wav(samples=samples), SPEC)
    assert clipped.ok and clipped.is_clipped and not clipped.is_silent


def test_isolated_full_scale_peak_is_not_clipping():
    samples = np.full((88200, 1), 0.2)
    samples[500] = 1.0
    assert not inspect_audio(make_wav(samples=samples), SPEC).is_clipped


def test_convert_policy_brings_audio_to_the_spec_like_dcase():
    source = make_wav(sample_rate=44100, channels=2, seconds=3.0, subtype="FLOAT", seed=7)
    check = inspect_audio(source, SPEC, convert=True)
    assert check.ok, check.errors
    assert (check.sample_rate, check.channels, check.frames) == (22050, 1, 88200)
    assert check.conversions == [
        "mixed 2 channels to mono",
        "resampled 44,100 Hz to 22,050 Hz",
        "zero-padded 3.000 s to 4 s",
        "quantised FLOAT to 16-bit PCM",
    ]
    # The padding is digital silence: the last second is all zeros.
    assert np.all(check.samples[66150 + 10 :] == 0)


def test_convert_cuts_long_clips():
    check = inspect_audio(make_wav(seconds=5.0), SPEC, convert=True)
    assert check.ok and check.frames == 88200
    assert check.conversions == ["cut 5.000 s to 4 s"]


def test_resampling_keeps_a_tone_at_its_frequency():
    t = np.arange(48000 * 4) / 48000
    tone = 0.5 * np.sin(2 * np.pi * 1000 * t)[:, None]
    check = inspect_audio(make_wav(samples=tone, sample_rate=48000), SPEC, convert=True)
    spectrum = np.abs(np.fft.rfft(check.samples[:, 0]))
    peak_hz = np.argmax(spectrum) * 22050 / 88200
    assert abs(peak_hz - 1000) < 1


def test_encoding_is_deterministic():
    samples = np.random.default_rng(0).uniform(-1, 1, (1000, 1))
    assert encode_wav(samples, 22050) == encode_wav(samples.copy(), 22050)


# --- headers that would make decoding explode --------------------------------------------------


def inspect_measured(data: bytes, *, convert: bool):
    """The check and the most memory Python and numpy held at once while it ran."""
    tracemalloc.start()
    try:
        check = inspect_audio(data, SPEC, convert=convert)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return check, peak


@pytest.mark.parametrize(
    ("convert", "message"),
    [
        (
            False,
            "duration is 3116529.557 s (68,719,476,735 samples); expected 4.000 s (88,200 samples)",
        ),
        (
            True,
            "duration is 3116529.557 s (68,719,476,735 samples); "
            "conversion cuts clips to 4 s and takes sources of up to 40 s",
        ),
    ],
)
def test_a_small_flac_declaring_a_huge_length_is_refused_undecoded(convert, message):
    liar = declare_frames(make_flac(seconds=0.5), 2**36 - 1)
    assert len(liar) < 30_000
    check, peak = inspect_measured(liar, convert=convert)
    assert check.errors == [message]
    # Decoding what it declares would take 550 GB.
    assert peak < 4 * 1024**2


@pytest.mark.parametrize(
    ("convert", "message"),
    [
        (False, "duration is 600.000 s (13,230,000 samples); expected 4.000 s (88,200 samples)"),
        (
            True,
            "duration is 600.000 s (13,230,000 samples); "
            "conversion cuts clips to 4 s and takes sources of up to 40 s",
        ),
    ],
)
def test_long_silence_is_refused_by_its_declared_length(convert, message):
    ten_minutes = silent_flac(600)
    assert len(ten_minutes) < 100_000
    check, peak = inspect_measured(ten_minutes, convert=convert)
    assert check.errors == [message]
    assert peak < 4 * 1024**2  # decoded it is 106 MB of floats


def test_a_flac_that_leaves_its_length_open_is_refused():
    check = inspect_audio(declare_frames(make_flac(), 0), SPEC)
    assert check.errors == [
        "does not declare its length in its header; expected 4.000 s (88,200 samples)"
    ]


def test_convert_decodes_only_the_start_of_a_long_source_and_cuts_it_as_a_whole():
    rng = np.random.default_rng(11)
    source = rng.uniform(-0.5, 0.5, (48_000 * 30, 1))
    data = make_wav(samples=source, sample_rate=48_000)
    check, peak = inspect_measured(data, convert=True)
    assert check.ok, check.errors
    assert check.conversions == ["resampled 48,000 Hz to 22,050 Hz", "cut 30.000 s to 4 s"]
    # What the whole 30 s give once decoded and resampled, then cut.
    decoded, _ = sf.read(io.BytesIO(data), dtype="float64", always_2d=True)
    whole = resample(decoded, 48_000, 22_050)[: SPEC.frames]
    assert np.array_equal(check.samples, quantise(whole, 16) / 32768.0)
    assert peak < 8 * 1024**2  # the whole source decodes to 11.5 MB of floats


def test_convert_refuses_a_header_with_more_channels_than_it_may_decode():
    # A 1,000-channel 8-bit WAV: 34 MB of file, 270 MB once decoded to floats.
    channels, frames = 1000, 34_000
    header = bytearray(make_wav(samples=np.zeros((1, channels)), subtype="PCM_U8"))
    data_at = header.index(b"data")
    header[data_at + 4 : data_at + 8] = struct.pack("<I", channels * frames)
    header[4:8] = struct.pack("<I", data_at + 8 + channels * frames - 8)
    data = bytes(header[: data_at + 8]) + bytes(channels * frames)
    check, peak = inspect_measured(data, convert=True)
    assert check.errors == [
        "has 1,000 channels at 22,050 Hz: 34,000,000 samples to decode for 4 s; "
        "conversion takes at most 33,554,432"
    ]
    assert peak < 4 * 1024**2
