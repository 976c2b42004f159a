"""Gold (trapping) trials in the ITU-T P.808 sense: sounds whose answer is known, placed in
sessions at random positions but never first, and judged by the gold rule of `raters.quality`.

An organizer uploads gold sounds with the range each scale's answer must fall in, or uses the
built-in trapping sounds: spoken instructions ("set both sliders to two") from the espeak-ng
speech synthesiser, cut or padded to the clip length, at the challenge's rate. They are
delivered like every sound (loudness-aligned to the test's target, dithered, the same WAV), so
nothing a browser receives says which trial is gold.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import numpy as np
from django.db import transaction

from stimuli.audio import decode_wav, inspect_audio, resample
from stimuli.models import Challenge
from stimuli.selectors import clip_spec

from . import delivery
from .errors import ListeningError
from .models import CategorySession, GoldSound, Trial

# (what is said, the quality and the fit it asks for): both scales, and the two far apart, so
# neither a constant answer nor one copied from the other scale passes them all.
INSTRUCTIONS = (
    ("Please set both sliders to two.", 2, 2),
    ("Please set both sliders to eight.", 8, 8),
    ("Please set the quality slider to nine and the fit slider to one.", 9, 1),
    ("Please set the quality slider to one and the fit slider to nine.", 1, 9),
)
SPEAKER = "espeak-ng"


def speak(text: str, sample_rate: int, frames: int) -> np.ndarray:
    """`text` spoken by espeak-ng, at `sample_rate`, `frames` long (the speech at the start of
    the clip). Refused, with what to install, where espeak-ng is missing."""
    program = shutil.which(SPEAKER)
    if program is None:
        raise ListeningError(
            "The built-in trapping sounds need the espeak-ng speech synthesiser "
            "(apt-get install espeak-ng); or upload gold sounds.",
            409,
        )
    spoken = subprocess.run(
        [program, "--stdout", "-s", "150", text], capture_output=True, check=True, timeout=60
    ).stdout
    samples, rate = decode_wav(spoken)
    samples = samples.astype(np.float64).mean(axis=1)
    if rate != sample_rate:
        samples = resample(samples[:, None], rate, sample_rate)[:, 0]
    lead = int(0.2 * sample_rate)  # a breath before the words, as a recording would have
    out = np.zeros(frames)
    speech = samples[: max(0, frames - lead)]
    out[lead : lead + speech.size] = speech
    return 0.5 * out / (float(np.max(np.abs(out))) or 1.0)


def build_trapping_sounds(challenge: Challenge) -> int:
    """The built-in trapping sounds, made once (when the test asks for gold trials and the
    organizer uploaded none); returns how many were made."""
    if GoldSound.objects.filter(challenge=challenge).exists():
        return 0
    made = 0
    for text, quality, fit in INSTRUCTIONS:
        samples = speak(text, challenge.sample_rate, challenge.clip_frames)
        audio = delivery.store_samples(samples, challenge.sample_rate)
        _, created = GoldSound.objects.get_or_create(
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
        made += created
    return made


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
    length or rate would stand out); every problem is named at once and nothing is stored."""
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
        # Uploaded gold replaces the built-in spoken instructions not yet given to anyone.
        GoldSound.objects.filter(challenge=challenge, builtin=True, trials__isnull=True).delete()
    return gold


def place(
    session: CategorySession, trials: list[Trial], count: int, rng: random.Random
) -> list[Trial]:
    """The session's trials with `count` gold trials put in at random positions, never first
    (a first trial is where a rater learns the scales), renumbered. Gold sounds the rater heard
    in another category come last in the draw: a sound heard twice gives itself away."""
    if count <= 0 or not trials:
        return trials
    challenge = session.category.challenge
    if not GoldSound.objects.filter(challenge=challenge).exists():
        build_trapping_sounds(challenge)  # asked for after preparation: made now, once
    pool = list(GoldSound.objects.filter(challenge=challenge).order_by("id"))
    heard = set(
        Trial.objects.filter(session__rater=session.rater, gold__isnull=False).values_list(
            "gold_id", flat=True
        )
    )
    rng.shuffle(pool)
    pool.sort(key=lambda gold: gold.pk in heard)
    chosen = [pool[k % len(pool)] for k in range(count)]
    items = list(trials)
    for gold in chosen:
        items.insert(
            rng.randint(1, len(items)),
            Trial(session=session, role=Trial.Role.GOLD, gold=gold, audio=gold.audio),
        )
    for position, trial in enumerate(items):
        trial.position = position
    return items
