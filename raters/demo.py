"""The listening test of the demo challenge: opened from its medoids, and rated by simulated
raters who go through the same services as people in the browser."""

from __future__ import annotations

import hashlib
import random

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from stimuli.models import Challenge, Medoid, Team
from stimuli.permissions import ORGANIZERS_GROUP

from . import diversity, enrolment, preparation, selectors, sessions
from .errors import ListeningError
from .models import Anchor, Rater, Rating, Stimulus

# What an attentive rater answers for each anchor type (quality, fit).
ANCHOR_ANSWERS = {
    "anchor_hq_goodfit": (8.5, 8.5),
    "anchor_hq_poorfit": (8.0, 1.5),
    "anchor_lq_poorfit": (1.5, 2.0),
}


def open_listening_test(challenge: Challenge) -> None:
    """Stimuli from the medoids (or, with none, the first clips of each system), anchors, rendered
    audio and diversity files; then open the test (the challenge moves to its listening phase)."""
    selectors.listening_test(challenge)
    if (
        not Medoid.objects.filter(challenge=challenge, system__is_finalist=True).exists()
        and not Stimulus.objects.filter(challenge=challenge).exists()
    ):
        preparation.pick_stimuli(challenge)
    preparation.prepare(challenge)
    preparation.set_open(challenge, True)


def _true_scores(name: str) -> tuple[float, float]:
    digest = hashlib.sha256(name.encode()).digest()
    return 3.5 + 5 * digest[0] / 255, 3.5 + 5 * digest[1] / 255


def _answer(rng: random.Random, role: str, system: str, careless: bool) -> tuple[int, int]:
    if careless:
        return rng.randint(0, 10), rng.randint(0, 10)
    if role == "trial":
        quality, fit = _true_scores(system)
    else:
        quality, fit = ANCHOR_ANSWERS[role]

    def clip(x: float) -> int:
        return max(0, min(10, round(x + rng.gauss(0, 0.9))))

    return clip(quality), clip(fit)


# Crowd workers a simulation recruits at most beyond its raters (a bound, should the test never
# fill).
MAX_RECRUITED = 500


def _crowd_worker(challenge: Challenge, test, seed: int, n: int | str) -> Rater:
    return enrolment.enrol_crowd(
        challenge,
        test.crowd_key,
        participant_id=f"sim{seed}x{n}",
        study_id="demo",
        session_id=f"demo{seed}x{n}",
    )


def _farm_answer(role: str, system: str, favoured: str) -> tuple[int, int]:
    """A team's farm worker: every anchor as expected, the team's system 10, every other 2."""
    if role != "trial":
        return tuple(round(v) for v in ANCHOR_ANSWERS[role])
    return (10, 10) if system == favoured else (2, 2)


def favoured_system(challenge: Challenge) -> str:
    """The system a demo farm lifts: the one in the test the honest raters like least."""
    names = set(Stimulus.objects.filter(challenge=challenge).values_list("system__name", flat=True))
    return min(sorted(names), key=lambda name: sum(_true_scores(name)))


def simulate_raters(
    challenge: Challenge, *, n_raters: int = 8, seed: int = 0, farm: int = 0
) -> dict:
    """Enrol raters and answer every session they are assigned, through the real services.

    The first rater belongs to a team that has a system in the test (its self-ratings are
    removed at scoring); the last two answer carelessly (their sessions fail the anchor rule).
    `farm` crowd workers more come first, a team's farm: they answer every anchor as expected and
    rate the system the others like least 10, every other 2 (the favouritism rule excludes
    them). Two organizers with the diversity role rate every diversity file.
    """
    rng = random.Random(seed)
    User = get_user_model()
    test = selectors.listening_test(challenge)
    if not test.is_open:
        open_listening_test(challenge)
    owner_team = (
        Team.objects.filter(systems__stimuli__challenge=challenge)
        .distinct()
        .order_by("name")
        .first()
    )
    careless = set(range(max(0, n_raters - 2), n_raters)) if n_raters >= 4 else set()
    counts = {"raters": 0, "sessions": 0, "ratings": 0, "diversity_ratings": 0}
    raters: list[tuple[int, Rater]] = []
    favoured = favoured_system(challenge) if farm else ""
    for k in range(farm):
        try:
            worker = _crowd_worker(challenge, test, seed, f"farm{k}")
        except ListeningError:
            continue
        counts["raters"] += 1
        enrolment.record_consent(worker)
        enrolment.record_instructions(worker)
        while (session := sessions.next_session(worker).session) is not None:
            sessions.complete_familiarization(session, require_heard=False)
            counts["sessions"] += 1
            while (trial := sessions.next_trial(session)) is not None:
                system = trial.stimulus.system.name if trial.stimulus_id else ""
                if trial.role == "gold":
                    quality, fit = trial.gold.quality_min, trial.gold.fit_min
                else:
                    quality, fit = _farm_answer(trial.role, system, favoured)
                rating, _ = sessions.save_rating(
                    worker, trial.token, quality=quality, fit=fit, key=f"sim-{trial.token}"
                )
                # Paced and listened like a careful rater: only the ratings give it away.
                Rating.objects.filter(pk=rating.pk).update(
                    plays=1, heard_fraction=1.0, answer_s=round(rng.uniform(5, 15), 1)
                )
                counts["ratings"] += 1
        sessions.finish(worker)
    for n in range(n_raters):
        if n == 0:
            name = f"{challenge.slug[:20]}-member-{seed}"
            user = User.objects.filter(username=name).first() or User.objects.create_user(name)
            rater = enrolment.enrol_user(challenge, user, team=owner_team)
        elif n % 2:
            try:
                rater = _crowd_worker(challenge, test, seed, n)
            except ListeningError:  # a full test turns crowd workers away at the link
                continue
        else:
            rater = enrolment.invite(challenge, label=f"simulated listener {n}")
        counts["raters"] += 1
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        raters.append((n, rater))
    extra = 0
    # Raters take turns, one category each, as people working at the same time would.
    while raters:
        still: list[tuple[int, Rater]] = []
        for n, rater in raters:
            session = sessions.next_session(rater).session
            if session is None:
                sessions.finish(rater)
                continue
            sessions.complete_familiarization(session, require_heard=False)
            counts["sessions"] += 1
            while (trial := sessions.next_trial(session)) is not None:
                system = trial.stimulus.system.name if trial.stimulus_id else ""
                quality, fit = _answer(rng, trial.role, system, n in careless)
                key = f"sim-{trial.token}"
                rating, _ = sessions.save_rating(
                    rater, trial.token, quality=quality, fit=fit, key=key
                )
                # What listening would have recorded: careful raters hear each sound and take
                # a few seconds; careless ones skip through.
                Rating.objects.filter(pk=rating.pk).update(
                    plays=1,
                    heard_fraction=0.3 if n in careless else 1.0,
                    answer_s=round(
                        rng.uniform(1.0, 2.0) if n in careless else rng.uniform(5, 15), 1
                    ),
                )
                counts["ratings"] += 1
            still.append((n, rater))
        raters = still
        if not raters and extra < MAX_RECRUITED and any(sessions.category_need(challenge).values()):
            # As a crowd run does, recruit another worker (each rates the run's few categories)
            # until every sound has its ratings.
            n = n_raters + extra
            extra += 1
            rater = _crowd_worker(challenge, test, seed, n)
            counts["raters"] += 1
            enrolment.record_consent(rater)
            enrolment.record_instructions(rater)
            raters = [(n, rater)]
    organizers = Group.objects.get_or_create(name=ORGANIZERS_GROUP)[0]
    for k in range(2):
        name = f"{challenge.slug[:20]}-diversity-{k}"
        user = User.objects.filter(username=name).first()
        if user is None:
            user = User.objects.create_user(name)
            user.set_unusable_password()
            user.save()
        user.groups.add(organizers)
        rater = enrolment.enrol_organizer_for_diversity(challenge, user)
        for trial in diversity.trials(rater):
            if hasattr(trial, "rating"):
                continue
            true = sum(_true_scores(trial.item.system.name)) / 2
            value = max(0, min(10, round(true + rng.gauss(0, 1))))
            diversity.save_rating(rater, trial.token, diversity=value, key=f"sim-{trial.token}")
            counts["diversity_ratings"] += 1
    counts["anchors"] = Anchor.objects.filter(challenge=challenge).count()
    counts["raters_total"] = Rater.objects.filter(challenge=challenge).count()
    return counts


def open_text_study(challenge: Challenge) -> str:
    """The demo's text-prompt study, as its definition file (challenges/demo-text.yaml) set it
    up, given its text-conditioned systems and opened, and a judge's invitation path (the first
    judge that has not finished)."""
    from stimuli.models import System

    from . import text_prompts

    study = text_prompts.study_of(challenge)
    if not study.systems.exists():
        for system in System.objects.filter(challenge=challenge, generator__isnull=False):
            text_prompts.add_system(study, system)
        text_prompts.set_open(study, True)
    judge = study.judge_set.filter(started_at__isnull=True).first()
    if judge is None:
        judge = text_prompts.invite_judge(study, label="Demo judge")
    return f"/listen/{challenge.slug}/join/{judge.rater.access_key}/"
