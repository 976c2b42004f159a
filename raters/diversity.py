"""The diversity stage: one continuous file per finalist system and category, rated by organizers
in a counterbalanced order."""

from __future__ import annotations

import hashlib

from django.db import transaction

from stimuli.models import Challenge

from . import (
    delivery,
    listening,
    selectors,
    sessions,
)
from .design import williams
from .errors import ListeningError
from .models import (
    DiversityItem,
    DiversityRating,
    DiversityTrial,
    ListeningTest,
    Rater,
    Stimulus,
)


def build_items(challenge: Challenge, *, progress=None) -> int:
    """One continuous file per finalist system and category: its stimuli with short silences.

    A file is rendered again when its sounds change (other medoids, other loudness settings)
    until someone is given it to rate; from then on it stays as heard.
    """
    test = selectors.listening_test(challenge)
    groups: dict[tuple[int, int], list[Stimulus]] = {}
    for stimulus in Stimulus.objects.filter(challenge=challenge).select_related("clip__audio"):
        groups.setdefault((stimulus.system_id, stimulus.category_id), []).append(stimulus)
    for n, ((system_id, category_id), stimuli) in enumerate(sorted(groups.items())):
        if progress:
            progress(n, len(groups), "Diversity files")
        item, _ = DiversityItem.objects.get_or_create(
            challenge=challenge, system_id=system_id, category_id=category_id
        )
        if item.audio_id and item.trials.exists():
            continue
        stimuli.sort(key=lambda s: (s.position, s.pk))
        sounds = [delivery.delivered_audio(s.clip.audio, test) for s in stimuli]
        key = hashlib.sha256(
            f"{test.diversity_gap_s}|{','.join(a.sha256 for a in sounds)}".encode()
        ).hexdigest()
        if item.audio_id and item.sounds_key == key:
            continue
        parts = [delivery.load_samples(sound)[0] for sound in sounds]
        samples = delivery.concatenate(parts, challenge.sample_rate, test.diversity_gap_s)
        item.audio = delivery.store_samples(samples, challenge.sample_rate)
        item.n_sounds = len(stimuli)
        item.sounds_key = key
        item.save(update_fields=["audio", "n_sounds", "sounds_key"])
    # Files of systems that are no longer finalists go, unless someone was given them.
    DiversityItem.objects.filter(challenge=challenge, trials__isnull=True).exclude(
        pk__in=[
            item.pk
            for item in DiversityItem.objects.filter(challenge=challenge)
            if (item.system_id, item.category_id) in groups
        ]
    ).delete()
    return len(groups)


# --- Diversity -----------------------------------------------------------------------------------


def trials(rater: Rater) -> list[DiversityTrial]:
    """The rater's diversity trials, created on first use in a counterbalanced order.

    Files rendered after the rater's first visit (a preparation still running) are added after
    the rater's last trial, so nobody misses one.
    """
    if not rater.diversity_role:
        raise ListeningError("Only raters with the diversity role rate diversity.", 403)
    items = list(
        DiversityItem.objects.filter(challenge=rater.challenge, audio__isnull=False).order_by(
            "category__position", "system__public_id"
        )
    )
    existing = list(rater.diversity_trials.order_by("position"))
    if {t.item_id for t in existing} >= {item.pk for item in items}:
        return existing
    with transaction.atomic():
        ListeningTest.objects.select_for_update(no_key=True).get(
            pk=selectors.listening_test(rater.challenge).pk
        )
        existing = list(rater.diversity_trials.order_by("position"))
        given = {t.item_id for t in existing}
        missing = [item for item in items if item.pk not in given]
        if not existing:
            row = (
                Rater.objects.filter(
                    challenge=rater.challenge, diversity_role=True, diversity_trials__isnull=False
                )
                .distinct()
                .count()
            )
            square = williams(len(missing))
            missing = [missing[i] for i in square[row % len(square)]]
        start = existing[-1].position + 1 if existing else 0
        DiversityTrial.objects.bulk_create(
            [
                DiversityTrial(rater=rater, item=item, position=start + n)
                for n, item in enumerate(missing)
            ]
        )
    return list(rater.diversity_trials.order_by("position"))


def save_rating(
    rater: Rater, token: str, *, diversity, key: str, require_heard: bool = False
) -> tuple[DiversityRating, bool]:
    """Like `sessions.save_rating`, for one diversity file."""
    value = sessions.check_value("Diversity", diversity)
    key = sessions.check_key(key)
    with transaction.atomic():
        trial = DiversityTrial.objects.select_for_update(no_key=True).filter(token=token).first()
        if trial is None:
            raise ListeningError("No such item.", 404)
        if trial.rater_id != rater.pk:
            raise ListeningError("This item belongs to another rater.", 403)
        previous = DiversityRating.objects.filter(idempotency_key=key).first()
        if previous is not None:
            if previous.trial_id != trial.pk:
                raise ListeningError("This request key was already used for another item.", 409)
            return previous, False
        if DiversityRating.objects.filter(trial=trial).exists():
            raise ListeningError("This item is already answered.", 409)
        test = sessions.check_open(rater.challenge)
        verdict = listening.listened(
            trial, trial.item.audio.duration_s, test, what="file", rater=rater
        )
        if require_heard and not verdict.ok:
            raise ListeningError(verdict.reason, 409)
        turn_began = sessions.last_answer_at(DiversityRating.objects.filter(trial__rater=rater))
        rating = DiversityRating.objects.create(
            trial=trial,
            diversity=value,
            idempotency_key=key,
            **sessions.answer_record(verdict, turn_began or rater.instructed_at),
        )
    return rating, True


def next_trial(rater: Rater) -> DiversityTrial | None:
    return rater.diversity_trials.filter(rating__isnull=True).order_by("position").first()
