"""Gold (trapping) trials in the ITU-T P.808 sense: sounds whose answer is known, placed in
sessions at random positions but never first, and judged by the gold rule of `raters.rules`.

An organizer uploads gold sounds with the range each scale's answer must fall in, or uses the
built-in trapping sounds: spoken instructions ("set both sliders to two") from the espeak-ng
speech synthesiser, padded to the clip length, at the challenge's rate. Each built-in one is
heard by one trial only, so a bot's operator who listened once has nothing to reuse; its
numbers, voice, speed, pitch and pause are drawn at random.

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
from django.utils import timezone

from stimuli.audio import decode_wav, inspect_audio, resample
from stimuli.models import Challenge
from stimuli.selectors import clip_spec

from . import delivery, selectors
from .errors import ListeningError
from .models import CategorySession, GoldSound, ListeningTest, Trial

NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-029")
VARIANTS = ("", "+m1", "+m3", "+m5", "+f1", "+f2", "+f4")
SPEAKER = "espeak-ng"


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
    of 0.1 to 0.6 s, at `sample_rate` and `frames` long."""
    voice = rng.choice(VOICES) + rng.choice(VARIANTS)
    arguments = ["-v", voice, "-s", str(rng.randint(135, 175)), "-p", str(rng.randint(25, 75))]
    samples = synthesise(text, sample_rate, arguments)
    lead = int(rng.uniform(0.1, 0.6) * sample_rate)
    out = np.zeros(frames)
    speech = samples[: max(0, frames - lead)]
    out[lead : lead + speech.size] = speech
    return 0.5 * out / (float(np.max(np.abs(out))) or 1.0)


def trapping_sound(
    challenge: Challenge, rng: random.Random, test: ListeningTest | None = None
) -> GoldSound:
    """A built-in trapping sound, rendered for delivery at once: its first fetch reads a file,
    like a stimulus's."""
    text, quality, fit = instruction(rng)
    samples = speak(text, challenge.sample_rate, challenge.clip_frames, rng)
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


def unplaced(challenge: Challenge):
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
