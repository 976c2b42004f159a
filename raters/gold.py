"""Gold (trapping) trials in the ITU-T P.808 sense: sounds whose answer is known, placed in
sessions at random positions but never first, and judged by the gold rule of `raters.rules`.

An organizer uploads gold sounds with the range each scale's answer must fall in, or uses the
built-in trapping sounds: spoken instructions ("set both sliders to two") from the espeak-ng
speech synthesiser, at the clip length and the challenge's rate. Each built-in one is heard by
one trial only, so a bot's operator who listened once has nothing to reuse. Its numbers, its
opening words and the order it names the sliders in are drawn at random; each of its words is
spoken in a voice, accent, speed, pitch and formant shift of its own, at one loudness, and the
whole in a room, after a lead-in, behind background noise (the speech 3 to 8 dB above it) and a
babble of backward speech (4 to 8 dB below the speech), at a gain, all drawn afresh for it
(`trapping_parts`). The synthesiser's own rendering of a sentence, whole or word by word, is no
longer near it by MFCC distance, so templates of every sentence no longer read its numbers, even
matched by time warping; a speech recogniser reads them as a person hears them: gold screens out
people who do not listen, not programs.

Preparation makes a pool of them, rendered for delivery like every stimulus (`make_pool`); a
session takes its gold sounds from the pool, and makes any the pool lacks before its first page
(rendered at once too). A gold sound's first fetch is then a file read like any stimulus's, so
the time to its first byte says nothing (a sound rendered on its first fetch would start later,
and the page preloads the next trial's sound). They are delivered like every sound
(loudness-aligned to the test's target, dithered, the same WAV), so nothing a browser receives
says which trial is gold.
"""

from __future__ import annotations

import math
import random
import re
import shutil
import subprocess
from collections.abc import Callable

import numpy as np
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from stimuli.audio import decode_wav, inspect_audio, resample
from stimuli.models import Challenge
from stimuli.selectors import clip_spec

from . import delivery, selectors
from .errors import ListeningError
from .models import PAIRS, CategorySession, GoldSound, ListeningTest, Trial

NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
# The hearing check's voices (its threshold is relative to them: kept as they were).
VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-029")
VARIANTS = ("", "+m1", "+m3", "+m5", "+f1", "+f2", "+f4")
# Trapping sounds draw from every English accent espeak-ng has and its plainly spoken voice
# variants (none whispered, croaking or robotic).
TRAPPING_VOICES = (
    *VOICES,
    "en-gb-x-gbclan",
    "en-gb-x-rp",
    "en-gb-x-gbcwmd",
    "en-us-nyc",
)
TRAPPING_VARIANTS = (
    *VARIANTS,
    *(f"+m{n}" for n in (2, 4, 6, 7, 8)),
    *(f"+f{n}" for n in (3, 5)),
    *("+" + name for name in ("klatt", "klatt2", "klatt3", "Andy", "Annie", "Alex", "Mike")),
    *("+" + name for name in ("Michael", "Mario", "gustave", "Gene", "Jacky", "linda", "max")),
    *("+" + name for name in ("rob", "robert", "paul", "travis", "victor", "zac", "steph")),
    *("+" + name for name in ("quincy", "grandpa", "grandma", "edward", "benjamin", "john")),
)
# The words before the first slider, and between the two: a sentence's shape is not known ahead.
OPENINGS = (
    "Please set",
    "Now set",
    "Set",
    "Okay, set",
    "Please move",
    "Move",
    "Now move",
    "Please turn",
)
JOININGS = ("and", "then", "and then", "and set", "and move")
SPEAKER = "espeak-ng"
_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBERS[1:10]) + r")\b")
# How far above its background a trapping sound's speech is (dB, its mean power while it
# speaks against the noise's). With the babble, the speech stands 0.5 to 5 dB above both
# together: clear for a listener (digits in noise are still half understood some 10 dB lower),
# too far from clean for a template matcher, which time warping made read 7 of 30 at 10 to 20 dB.
SPEECH_SNR_DB = (3.0, 8.0)
# Formants (and pitch, and pace) shifted by resampling: a speaker of another size, from a small
# one to a large one (a template in one voice matches a word in another the less, the further
# their sizes are apart; at 12%, with the speech 0 to 5 dB above the noise, time warping still
# read 7 of 60).
FORMANT_SHIFT = 0.22
# The pause between one speaker's stretch of a trapping sound and the next's (seconds).
CHUNK_GAP_S = (0.0, 0.06)
# How many words one voice of a trapping sound says before the next voice takes over.
CHUNK_WORDS = (1, 1)
# Backward speech behind a trapping sound, this far below its speech (dB), by so many voices.
BABBLE_SNR_DB = (4.0, 8.0)
# The babble's talkers' formant shifts (its one rendering at as many sizes as talkers).
BABBLE_SHIFT = 0.24
BABBLE_TALKERS = 3
# How far a trapping sound's filter lifts or lowers each band, drifting (dB).
COLOURING_DB = 8.0
# Reverberation time of the room a trapping sound is spoken in (seconds).
ROOM_RT60_S = (0.1, 0.4)
LEAD_S = (0.1, 1.0)
# Speech never closer to the clip's end than this, so the last number is heard whole.
TAIL_S = 0.1
# Speech sped up no further than this to fit the clip (words per minute).
FASTEST_WPM = 260
GAIN_DB = (-6.0, 0.0)


def sentence(
    quality: int, fit: int, quality_first: bool = True, opening: str = "", joining: str = ""
) -> str:
    """The words asking for `quality` and `fit`: one number for both sliders when they are the
    same, else each slider by name, in the order given; after `opening` (an `OPENINGS` one,
    the first by default), the second slider after `joining` (a `JOININGS` one)."""
    opening = opening or OPENINGS[0]
    if quality == fit:
        return f"{opening} both sliders to {NUMBERS[quality]}."
    named = [("quality", quality), ("fit", fit)]
    (first, a), (second, b) = named if quality_first else named[::-1]
    joining = joining or JOININGS[0]
    return f"{opening} {first} to {NUMBERS[a]}, {joining} {second} to {NUMBERS[b]}."


def instruction(rng: random.Random) -> tuple[str, int, int]:
    """What a trapping sound says, and the quality and fit it asks for: both scales alike, or
    each its own (never the same, so copying one scale to the other fails), from 1 to 9, the
    two sliders named in either order, in words drawn from `OPENINGS` and `JOININGS`."""
    opening, joining = rng.choice(OPENINGS), rng.choice(JOININGS)
    if rng.random() < 0.5:
        n = rng.randint(1, 9)
        return sentence(n, n, opening=opening), n, n
    quality, fit = rng.sample(range(1, 10), 2)
    return sentence(quality, fit, rng.random() < 0.5, opening, joining), quality, fit


# The pairs design's trapping sounds ask for a vote on both questions of their A/B trial: this
# sound, the other one, or a tie, in words drawn from these.
VOTE_OPENINGS = ("Please choose", "Choose", "Now choose", "Okay, choose", "Please pick", "Pick")
VOTE_ANSWERS = {"this": "this sound", "other": "the other sound", "tie": "a tie"}
VOTE_ENDINGS = ("on both questions", "for both questions", "for quality and for fit")


def vote_sentence(vote: str, opening: str = "", ending: str = "") -> str:
    """The words asking for `vote` (`GOLD_VOTES`) on both questions of an A/B trial."""
    opening, ending = opening or VOTE_OPENINGS[0], ending or VOTE_ENDINGS[0]
    return f"{opening} {VOTE_ANSWERS[vote]} {ending}."


def vote_instruction(rng: random.Random) -> tuple[str, str]:
    """What a trapping sound of A/B trials says, and the vote it asks for: its own side, the
    other or a tie, alike often."""
    vote = rng.choice(list(VOTE_ANSWERS))
    return vote_sentence(vote, rng.choice(VOTE_OPENINGS), rng.choice(VOTE_ENDINGS)), vote


def instructions() -> list[tuple[str, int, int]]:
    """Every sentence `instruction` may say in its first words, with the quality and fit it
    asks for."""
    found = [(sentence(n, n), n, n) for n in range(1, 10)]
    for quality in range(1, 10):
        for fit in range(1, 10):
            if quality != fit:
                found += [(sentence(quality, fit, first), quality, fit) for first in (True, False)]
    return found


def chunks(text: str, rng: random.Random | None = None) -> list[str]:
    """`text` cut into the stretches a trapping sound speaks each in a voice of its own: every
    number alone, and the words between them, in runs of `CHUNK_WORDS` drawn from `rng` (all of
    them together without one)."""
    found = []
    for part in _NUMBER_WORD.split(text):
        words = part.replace(",", " ").replace(".", " ").replace(":", " ").split()
        while words:
            size = rng.randint(*CHUNK_WORDS) if rng else len(words)
            found.append(" ".join(words[:size]))
            words = words[size:]
    return found


def speaker_missing() -> str:
    """Why built-in trapping sounds cannot be made here ("" when they can)."""
    if shutil.which(SPEAKER):
        return ""
    return (
        "The built-in trapping sounds need the espeak-ng speech synthesiser "
        "(apt-get install espeak-ng); or upload gold sounds."
    )


def synthesise(text: str, sample_rate: int, arguments: list[str]) -> np.ndarray:
    """`text` spoken by espeak-ng with these arguments (voice, speed, ...), mono at
    `sample_rate`."""
    if missing := speaker_missing():
        raise ListeningError(missing, 409)
    command = [shutil.which(SPEAKER), "--stdout", *arguments, text]
    spoken = subprocess.run(command, capture_output=True, check=True, timeout=60).stdout
    samples, rate = decode_wav(spoken)
    samples = samples.astype(np.float64).mean(axis=1)
    if rate != sample_rate:
        samples = resample(samples[:, None], rate, sample_rate)[:, 0]
    return samples


def speak(text: str, sample_rate: int, frames: int, rng: random.Random) -> np.ndarray:
    """`text` spoken by espeak-ng in a voice, speed and pitch drawn from `rng`, after a pause
    of 0.1 to 0.6 s, at `sample_rate` and `frames` long (the hearing check's digits)."""
    voice = rng.choice(VOICES) + rng.choice(VARIANTS)
    arguments = ["-v", voice, "-s", str(rng.randint(135, 175)), "-p", str(rng.randint(25, 75))]
    samples = synthesise(text, sample_rate, arguments)
    lead = int(rng.uniform(0.1, 0.6) * sample_rate)
    out = np.zeros(frames)
    speech = samples[: max(0, frames - lead)]
    out[lead : lead + speech.size] = speech
    return 0.5 * out / (float(np.max(np.abs(out))) or 1.0)


def _trimmed(samples: np.ndarray) -> np.ndarray:
    """The speech without the synthesiser's silence before and after it."""
    loud = np.flatnonzero(np.abs(samples) > 1e-3 * (float(np.max(np.abs(samples))) or 1.0))
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples


def _convolve(samples: np.ndarray, response: np.ndarray) -> np.ndarray:
    size = samples.size + response.size - 1
    n = 1 << (size - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(samples, n) * np.fft.rfft(response, n), n)[: samples.size]


def _room(samples: np.ndarray, sample_rate: int, rng: random.Random) -> np.ndarray:
    """The speech in a small room: a direct sound and exponentially decaying noise as its
    impulse response (the decay time and the direct sound's share drawn from `rng`)."""
    length = max(1, int(rng.uniform(*ROOM_RT60_S) * sample_rate))
    noise = np.random.default_rng(rng.randrange(2**63)).standard_normal(length)
    response = noise * np.exp(-6.9 * np.arange(length) / length)
    response[0] = rng.uniform(1.0, 3.0)
    wet = _convolve(samples, response)
    return wet * math.sqrt(np.mean(samples**2) / (float(np.mean(wet**2)) or 1.0))


def _background(frames: int, sample_rate: int, rng: random.Random) -> np.ndarray:
    """Noise of a random colour (white to pink) whose level drifts slowly by up to 3 dB either
    way; unit mean power."""
    generator = np.random.default_rng(rng.randrange(2**63))
    spectrum = np.fft.rfft(generator.standard_normal(frames))
    frequencies = np.fft.rfftfreq(frames, 1.0 / sample_rate)
    frequencies[0] = frequencies[1] if frames > 2 else 1.0
    spectrum *= frequencies ** -rng.uniform(0.0, 0.5)
    noise = np.fft.irfft(spectrum, frames)
    t = np.arange(frames) / sample_rate
    drift = sum(
        np.sin(2 * np.pi * rng.uniform(0.2, 2.0) * t + rng.uniform(0, 2 * np.pi)) for _ in range(2)
    )
    noise *= 10 ** (3.0 * drift / 2 / 20)
    return noise / math.sqrt(float(np.mean(noise**2)) or 1.0)


def _speech_power(samples: np.ndarray, sample_rate: int) -> float:
    """Mean power of the speech over the 20-ms frames it speaks in (within 30 dB of its
    loudest): pauses between words do not lower it."""
    size = max(1, int(0.02 * sample_rate))
    frames = samples[: samples.size // size * size].reshape(-1, size)
    power = np.mean(frames**2, axis=1)
    return float(np.mean(power[power > 10 ** (-30 / 10) * power.max()])) if power.size else 0.0


def _voice(rng: random.Random) -> list[str]:
    """espeak-ng's arguments for one stretch of a trapping sound: an accent and voice variant,
    a pitch, and a speed factor (the `-s` the caller fills in)."""
    voice = rng.choice(TRAPPING_VOICES) + rng.choice(TRAPPING_VARIANTS)
    return ["-v", voice, "-p", str(rng.randint(20, 80))]


def _babble(frames: int, sample_rate: int, rng: random.Random) -> np.ndarray:
    """`BABBLE_TALKERS` voices speaking other instructions backwards, each from its own place
    and round again to the clip's end: speech's sounds and rhythm without a word in it (a
    listener hears past it, as past a crowd in another language); unit mean power. One
    rendering, each talker a stretch of it at a formant shift of its own."""
    text = " ".join(instruction(rng)[0] for _ in range(3))
    spoken = _trimmed(synthesise(text, sample_rate, [*_voice(rng), "-s", "170"]))[::-1]
    out = np.zeros(frames)
    for _ in range(BABBLE_TALKERS):
        shift = rng.uniform(1 - BABBLE_SHIFT, 1 + BABBLE_SHIFT)
        talker = resample(spoken[:, None], round(sample_rate * shift), sample_rate)[:, 0]
        out += np.roll(np.resize(talker, frames), rng.randrange(frames))
    return out / math.sqrt(float(np.mean(out**2)) or 1.0)


def _colouring(samples: np.ndarray, sample_rate: int, rng: random.Random) -> np.ndarray:
    """`samples` through a filter that keeps changing: every band's gain drifts on its own
    within `COLOURING_DB` either way (bands a third of an octave apart, new gains every 0.2 s,
    smoothly between), as a voice heard through a moving telephone. A listener hears the same
    words; their spectrum, frame by frame, is another."""
    size = 512 if sample_rate <= 24_000 else 1024
    hop = size // 4
    window = np.hanning(size + 1)[:-1]
    padded = np.concatenate([np.zeros(size), samples, np.zeros(size)])
    count = 1 + (padded.size - size) // hop
    frames = np.stack([padded[k * hop : k * hop + size] * window for k in range(count)])
    spectrum = np.fft.rfft(frames, axis=1)
    frequencies = np.maximum(np.fft.rfftfreq(size, 1 / sample_rate), 50.0)
    octaves = np.log2(frequencies / 50.0)
    band_at = np.arange(0, octaves.max() + 1 / 3, 1 / 3)
    time_at = np.arange(0, count * hop / sample_rate + 0.2, 0.2)
    generator = np.random.default_rng(rng.randrange(2**63))
    grid = generator.uniform(-COLOURING_DB, COLOURING_DB, (time_at.size, band_at.size))
    frame_times = np.arange(count) * hop / sample_rate
    over_time = np.stack([np.interp(frame_times, time_at, column) for column in grid.T], axis=1)
    gains_db = np.stack([np.interp(octaves, band_at, row) for row in over_time])
    filtered = np.fft.irfft(spectrum * 10 ** (gains_db / 20), size, axis=1) * window
    out = np.zeros(padded.size)
    for k in range(count):
        out[k * hop : k * hop + size] += filtered[k]
    # A Hann window squared, overlapped by four, sums to 1.5.
    return out[size : size + samples.size] / 1.5


def trapping_parts(
    text: str, sample_rate: int, frames: int, rng: random.Random
) -> tuple[np.ndarray, np.ndarray]:
    """The speech and the background of one trapping sound, each `frames` long. Every number
    and every stretch of words between them (`chunks`) has a voice and accent, pitch, speed
    and formant shift of its own, all at one loudness, with a pause of `CHUNK_GAP_S` between
    them: a listener hears a sentence passed from speaker to speaker, while the synthesiser's
    rendering of the sentence in any one voice is far from it. The whole speech is in a room
    with a lead-in, whole within the clip (sped up when it would not fit, no faster than
    `FASTEST_WPM`); behind it, noise `SPEECH_SNR_DB` below it and a babble of backward speech
    `BABBLE_SNR_DB` below it."""
    stretches = chunks(text, rng)
    voices = [_voice(rng) for _ in stretches]
    paces = [rng.uniform(0.9, 1.1) for _ in stretches]
    shifts = [rng.uniform(1 - FORMANT_SHIFT, 1 + FORMANT_SHIFT) for _ in stretches]
    gaps = [int(rng.uniform(*CHUNK_GAP_S) * sample_rate) for _ in stretches[1:]]
    speed = rng.randint(130, 185)
    lead_min, tail = int(LEAD_S[0] * sample_rate), int(TAIL_S * sample_rate)
    room_for_speech = max(1, frames - lead_min - tail)

    def render(words_per_minute: int) -> np.ndarray:
        parts = []
        for stretch, voice, pace, shift, gap in zip(
            stretches, voices, paces, shifts, [0, *gaps], strict=True
        ):
            pace_wpm = min(FASTEST_WPM, round(words_per_minute * pace))
            spoken = _trimmed(synthesise(stretch, sample_rate, [*voice, "-s", str(pace_wpm)]))
            # Played back at another rate: every frequency, formants included, scaled by `shift`.
            spoken = resample(spoken[:, None], round(sample_rate * shift), sample_rate)[:, 0]
            parts += [np.zeros(gap), spoken / math.sqrt(_speech_power(spoken, sample_rate) or 1.0)]
        return np.concatenate(parts)

    spoken = render(speed)
    while spoken.size > room_for_speech and speed < FASTEST_WPM:
        speed = min(FASTEST_WPM, math.ceil(speed * spoken.size / room_for_speech * 1.05))
        spoken = render(speed)
    # Cut only where even the fastest speech would not fit (a clip far shorter than DCASE's).
    spoken = _room(spoken[:room_for_speech], sample_rate, rng)
    spoken = _colouring(spoken, sample_rate, rng)
    spare = max(0, frames - tail - spoken.size)
    lead = min(spare, int(rng.uniform(*LEAD_S) * sample_rate))
    speech = np.zeros(frames)
    speech[lead : lead + spoken.size] = spoken
    power = _speech_power(spoken, sample_rate)
    noise = _background(frames, sample_rate, rng) * math.sqrt(
        power / 10 ** (rng.uniform(*SPEECH_SNR_DB) / 10)
    )
    babble = _babble(frames, sample_rate, rng) * math.sqrt(
        power / 10 ** (rng.uniform(*BABBLE_SNR_DB) / 10)
    )
    return speech, noise + babble


def trapping_speech(text: str, sample_rate: int, frames: int, rng: random.Random) -> np.ndarray:
    """One trapping sound saying `text` (`trapping_parts`), at a gain drawn from `rng`."""
    speech, noise = trapping_parts(text, sample_rate, frames, rng)
    out = speech + noise
    gain = 10 ** (rng.uniform(*GAIN_DB) / 20)
    return 0.5 * gain * out / (float(np.max(np.abs(out))) or 1.0)


def trapping_sound(
    challenge: Challenge, rng: random.Random, test: ListeningTest | None = None
) -> GoldSound:
    """A built-in trapping sound, rendered for delivery at once: its first fetch reads a file,
    like a stimulus's. Of the pairs design, one asking for a vote (its ranges span the
    scales)."""
    test = test or selectors.listening_test(challenge)
    if test.design == PAIRS:
        text, vote = vote_instruction(rng)
        quality = fit = (0, 10)
    else:
        text, q, f = instruction(rng)
        vote, quality, fit = "", (q, q), (f, f)
    samples = trapping_speech(text, challenge.sample_rate, challenge.clip_frames, rng)
    audio = delivery.store_samples(samples, challenge.sample_rate)
    gold, _ = GoldSound.objects.get_or_create(
        challenge=challenge,
        audio=audio,
        defaults={
            "label": text,
            "builtin": True,
            "quality_min": quality[0],
            "quality_max": quality[1],
            "fit_min": fit[0],
            "fit_max": fit[1],
            "vote": vote,
        },
    )
    delivery.delivered_audio(audio, test)
    return gold


def pool_wanted(challenge: Challenge, test: ListeningTest) -> int:
    """How many built-in trapping sounds preparation keeps ready: the gold trials of the
    sessions the test expects (each category rated by `target_ratings` sessions, since a
    session hears all of its category's stimuli), and a quarter more. Sessions beyond make
    their own."""
    if not test.gold_per_session:
        return 0
    sessions = challenge.categories.count() * test.target_ratings
    return math.ceil(1.25 * sessions * test.gold_per_session)


def unplaced(challenge: Challenge) -> QuerySet[GoldSound]:
    """The built-in trapping sounds of the test's design that no trial has taken yet."""
    pairs = selectors.listening_test(challenge).design == PAIRS
    found = GoldSound.objects.filter(challenge=challenge, builtin=True, placed_at__isnull=True)
    return found.exclude(vote="") if pairs else found.filter(vote="")


def uses_own(challenge: Challenge) -> bool:
    """Whether the sessions take the organizer's own gold sounds (the slider design, once any
    was uploaded), not built-in trapping sounds: an uploaded one asks for slider values, which
    an A/B trial has none of."""
    test = selectors.listening_test(challenge)
    if test.design == PAIRS:
        return False
    return GoldSound.objects.filter(challenge=challenge, builtin=False).exists()


def make_pool(
    challenge: Challenge,
    rng: random.Random,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> int:
    """Top the pool of built-in trapping sounds up to `pool_wanted` (none while the organizer's
    own gold sounds are used); returns how many were made."""
    test = selectors.listening_test(challenge)
    if uses_own(challenge):
        return 0
    missing = pool_wanted(challenge, test) - unplaced(challenge).count()
    for n in range(max(0, missing)):
        if progress:
            progress(n, missing, "Trapping sounds")
        trapping_sound(challenge, rng, test)
    return max(0, missing)


def _take_from_pool(challenge: Challenge, count: int) -> list[GoldSound]:
    """Up to `count` built-in trapping sounds from the pool, marked placed: under row locks that
    a concurrent session skips, so no two trials take the same one."""
    with transaction.atomic():
        taken = list(unplaced(challenge).select_for_update(skip_locked=True).order_by("id")[:count])
        GoldSound.objects.filter(pk__in=[g.pk for g in taken]).update(placed_at=timezone.now())
    return taken


def _range(name: str, low, high) -> tuple[list[str], tuple[int, int]]:
    problems = []
    values = []
    for label, value in (("lowest", low), ("highest", high)):
        try:
            number = int(str(value).strip())
        except (TypeError, ValueError):
            problems.append(f"{name}: the {label} expected answer must be a whole number 0-10")
            continue
        if not 0 <= number <= 10:
            problems.append(f"{name}: the {label} expected answer must be from 0 to 10")
        values.append(number)
    if len(values) == 2 and not problems and values[0] > values[1]:
        problems.append(f"{name}: the lowest expected answer exceeds the highest")
    return problems, (*values, 0, 0)[:2]


def add_gold_sound(
    challenge: Challenge, data: bytes, *, label: str, quality: tuple, fit: tuple
) -> GoldSound:
    """An organizer's gold sound with the range each scale's answer must fall in. The audio
    must meet the challenge's clip spec (converted like an upload: a gold sound of another
    length or rate would stand out); every problem is named at once and nothing is stored. It is
    rendered for delivery at once."""
    check = inspect_audio(data, clip_spec(challenge), convert=True)
    problems = list(check.errors)
    if check.ok and check.is_silent:
        problems.append("the sound is digital silence")
    range_problems, (quality_min, quality_max) = _range("quality", *quality)
    problems += range_problems
    range_problems, (fit_min, fit_max) = _range("fit", *fit)
    problems += range_problems
    label = (label or "").strip()
    if not label:
        problems.append("say what the sound asks for (label)")
    if problems:
        raise ListeningError("The gold sound was not added: " + "; ".join(problems) + ".")
    with transaction.atomic():
        audio = delivery.store_samples(check.samples, challenge.sample_rate)
        gold, created = GoldSound.objects.get_or_create(
            challenge=challenge,
            audio=audio,
            defaults={
                "label": label[:200],
                "quality_min": quality_min,
                "quality_max": quality_max,
                "fit_min": fit_min,
                "fit_max": fit_max,
            },
        )
        if not created:
            raise ListeningError("This gold sound was added already.", 409)
    # Rendered now, not on its first fetch: a sound that starts late is a gold trial.
    delivery.delivered_audio(audio, selectors.listening_test(challenge))
    return gold


def take_builtin(challenge: Challenge, count: int, rng: random.Random) -> list[GoldSound]:
    """`count` built-in trapping sounds of the test's design for one session, in a drawn order:
    from the pool, and any the pool lacks made now (rendered before the session's first
    page); each marked placed, so no other trial hears it."""
    chosen = _take_from_pool(challenge, count)
    made = [trapping_sound(challenge, rng) for _ in range(count - len(chosen))]
    GoldSound.objects.filter(pk__in=[g.pk for g in made]).update(placed_at=timezone.now())
    chosen += made
    rng.shuffle(chosen)
    return chosen


def place(
    session: CategorySession, trials: list[Trial], count: int, rng: random.Random
) -> list[Trial]:
    """The session's trials with `count` gold trials put in at random positions, never first
    (a first trial is where a rater learns the scales), renumbered. The organizer's gold sounds
    when there are any (those the rater heard in another category last: a sound heard twice
    gives itself away), else built-in trapping sounds from the pool, one trial each, and any the
    pool lacks made now (rendered before the session's first page)."""
    if count <= 0 or not trials:
        return trials
    challenge = session.category.challenge
    if uses_own(challenge):
        pool = list(GoldSound.objects.filter(challenge=challenge, builtin=False).order_by("id"))
        heard = set(
            Trial.objects.filter(session__rater=session.rater, gold__isnull=False).values_list(
                "gold_id", flat=True
            )
        )
        rng.shuffle(pool)
        pool.sort(key=lambda gold: gold.pk in heard)
        chosen = [pool[k % len(pool)] for k in range(count)]
    else:
        chosen = take_builtin(challenge, count, rng)
    items = list(trials)
    for gold in chosen:
        items.insert(
            rng.randint(1, len(items)),
            Trial(session=session, role=Trial.Role.GOLD, gold=gold, audio=gold.audio),
        )
    for position, trial in enumerate(items):
        trial.position = position
    return items
