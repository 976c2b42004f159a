"""Gold (trapping) trials in the ITU-T P.808 sense: sounds whose answer is known, placed in
sessions at random positions but never first, and judged by the gold rule of `raters.rules`.

An organizer uploads gold sounds with the range each scale's answer must fall in, or uses the
built-in trapping sounds: spoken instructions ("set both sliders to two") from the espeak-ng
speech synthesiser, at the clip length and the challenge's rate. Each built-in one is heard by
one trial only, so a bot's operator who listened once has nothing to reuse. Its numbers are
drawn at random, and its voice, accent, speed, pitch, formants, room, background noise (the
speech 10 to 20 dB above it), lead-in silence and gain are drawn afresh for it
(`trapping_parts`): the synthesiser's own rendering of the sentence is no longer near it by
MFCC distance, so templates of every sentence no longer read its numbers. A matcher that warps
time still reads some, and a speech recogniser reads them as a person hears them: gold screens
out people who do not listen, not programs.

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
from .models import CategorySession, GoldSound, ListeningTest, Trial

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
SPEAKER = "espeak-ng"
# How far above its background a trapping sound's speech is (dB, its mean power while it
# speaks against the noise's): well clear for a listener (digits are understood near 0 dB and
# below), far enough from clean for a matcher.
SPEECH_SNR_DB = (10.0, 20.0)
# Formants (and pitch, and pace) shifted by resampling: a speaker of another size.
FORMANT_SHIFT = 0.12
# Reverberation time of the room a trapping sound is spoken in (seconds).
ROOM_RT60_S = (0.1, 0.4)
LEAD_S = (0.1, 1.0)
# Speech never closer to the clip's end than this, so the last number is heard whole.
TAIL_S = 0.1
# Speech sped up no further than this to fit the clip (words per minute).
FASTEST_WPM = 260
GAIN_DB = (-6.0, 0.0)


def instruction(rng: random.Random) -> tuple[str, int, int]:
    """What a trapping sound says, and the quality and fit it asks for: both scales alike, or
    each its own (never the same, so copying one scale to the other fails), from 1 to 9."""
    if rng.random() < 0.5:
        n = rng.randint(1, 9)
        return f"Please set both sliders to {NUMBERS[n]}.", n, n
    quality, fit = rng.sample(range(1, 10), 2)
    return (
        f"Please set the quality slider to {NUMBERS[quality]} and the fit slider to "
        f"{NUMBERS[fit]}.",
        quality,
        fit,
    )


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


def trapping_parts(
    text: str, sample_rate: int, frames: int, rng: random.Random
) -> tuple[np.ndarray, np.ndarray]:
    """The speech and the background of one trapping sound, each `frames` long: `text` in a
    voice and accent, speed, pitch and pause between words, formant shift, room and lead-in
    drawn from `rng`, whole within the clip (sped up when it would not fit, no faster than
    `FASTEST_WPM`), and noise `SPEECH_SNR_DB` below it."""
    voice = rng.choice(TRAPPING_VOICES) + rng.choice(TRAPPING_VARIANTS)
    speed, pitch, gap = rng.randint(130, 185), rng.randint(20, 80), rng.randint(0, 4)
    shift = rng.uniform(1 - FORMANT_SHIFT, 1 + FORMANT_SHIFT)
    lead_min, tail = int(LEAD_S[0] * sample_rate), int(TAIL_S * sample_rate)
    room_for_speech = max(1, frames - lead_min - tail)

    def render(words_per_minute: int) -> np.ndarray:
        arguments = ["-v", voice, "-s", str(words_per_minute), "-p", str(pitch), "-g", str(gap)]
        spoken = _trimmed(synthesise(text, sample_rate, arguments))
        # Played back at another rate: every frequency, formants included, scaled by `shift`.
        return resample(spoken[:, None], round(sample_rate * shift), sample_rate)[:, 0]

    spoken = render(speed)
    if spoken.size > room_for_speech:
        faster = min(FASTEST_WPM, math.ceil(speed * spoken.size / room_for_speech * 1.05))
        spoken = render(faster)
    # Cut only where even the fastest speech would not fit (a clip far shorter than DCASE's).
    spoken = _room(spoken[:room_for_speech], sample_rate, rng)
    spare = max(0, frames - tail - spoken.size)
    lead = min(spare, int(rng.uniform(*LEAD_S) * sample_rate))
    speech = np.zeros(frames)
    speech[lead : lead + spoken.size] = spoken
    snr = rng.uniform(*SPEECH_SNR_DB)
    noise = _background(frames, sample_rate, rng)
    return speech, noise * math.sqrt(_speech_power(spoken, sample_rate) / 10 ** (snr / 10))


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
    like a stimulus's."""
    text, quality, fit = instruction(rng)
    samples = trapping_speech(text, challenge.sample_rate, challenge.clip_frames, rng)
    audio = delivery.store_samples(samples, challenge.sample_rate)
    gold, _ = GoldSound.objects.get_or_create(
        challenge=challenge,
        audio=audio,
        defaults={
            "label": text,
            "builtin": True,
            "quality_min": quality,
            "quality_max": quality,
            "fit_min": fit,
            "fit_max": fit,
        },
    )
    delivery.delivered_audio(audio, test or selectors.listening_test(challenge))
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
    """The built-in trapping sounds no trial has taken yet."""
    return GoldSound.objects.filter(challenge=challenge, builtin=True, placed_at__isnull=True)


def make_pool(
    challenge: Challenge,
    rng: random.Random,
    *,
    progress: Callable[[int, int, str], None] | None = None,
) -> int:
    """Top the pool of built-in trapping sounds up to `pool_wanted` (none while the organizer's
    own gold sounds are used); returns how many were made."""
    test = selectors.listening_test(challenge)
    if GoldSound.objects.filter(challenge=challenge, builtin=False).exists():
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
    pool = list(GoldSound.objects.filter(challenge=challenge, builtin=False).order_by("id"))
    if pool:
        heard = set(
            Trial.objects.filter(session__rater=session.rater, gold__isnull=False).values_list(
                "gold_id", flat=True
            )
        )
        rng.shuffle(pool)
        pool.sort(key=lambda gold: gold.pk in heard)
        chosen = [pool[k % len(pool)] for k in range(count)]
    else:
        chosen = _take_from_pool(challenge, count)
        made = [trapping_sound(challenge, rng) for _ in range(count - len(chosen))]
        GoldSound.objects.filter(pk__in=[g.pk for g in made]).update(placed_at=timezone.now())
        chosen += made
        rng.shuffle(chosen)
    items = list(trials)
    for gold in chosen:
        items.insert(
            rng.randint(1, len(items)),
            Trial(session=session, role=Trial.Role.GOLD, gold=gold, audio=gold.audio),
        )
    for position, trial in enumerate(items):
        trial.position = position
    return items
