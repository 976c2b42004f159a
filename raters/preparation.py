"""Preparing the listening test before raters come: the stimulus set from the finalists' medoids,
anchors from clips only the organizer holds (and the check that nothing tells them apart), the
built-in trapping sounds, the audio as delivered, the diversity files; opening and closing the
test."""

from __future__ import annotations

import math
import random
import secrets
from collections import Counter

import numpy as np
from django.db import transaction
from django.db.models import Q

from raters.job_kinds import PREPARE_LISTENING
from stimuli.audio import resample
from stimuli.jobs import JobProgress, create_job, enqueue, run_job
from stimuli.models import AudioFile, Category, Challenge, Clip, Job, Medoid
from stimuli.phases import TRANSITIONS, PhaseError, advance

from . import (
    anchors,
    delivery,
    diversity,
    gold,
    selectors,
    sessions,
)
from .errors import ListeningError
from .models import (
    Anchor,
    CategorySession,
    DiversityTrial,
    GoldSound,
    ListeningTest,
    Stimulus,
)

# Anchor pool per category and type: sessions draw their anchors from it.
# The job kind that prepares the listening test (registered in apps.py).
ANCHOR_POOL = 8
# Draws of a challenge's anchors preparation tries before it refuses a set the check separates
# (each draw is refused alone with a small chance on a small set such as the demo's).
ANCHOR_DRAWS = 8
# A clip quieter than this (integrated loudness, LUFS) is no source for an anchor.
MIN_SOURCE_LUFS = -70.0
# Every publication of a challenge is of the same ratings: publishing closes the test for good.
PUBLISHED_CLOSED = TRANSITIONS["open_listening"].refused[Challenge.Phase.PUBLISHED]
NO_STIMULI = "The listening test has no stimuli yet; prepare it first."


def build_stimulus_set(challenge: Challenge) -> int:
    """The stimuli from the medoids of the finalist systems; without medoids the set chosen by
    hand (in the admin) is kept. Returns the number of stimuli.

    Once raters have begun the set is fixed: ratings of different sets cannot be pooled, so
    medoids that changed since are refused with an error rather than mixed in.
    """
    medoids = list(
        Medoid.objects.filter(challenge=challenge, system__is_finalist=True).select_related("clip")
    )
    if not medoids:
        return Stimulus.objects.filter(challenge=challenge).count()
    with transaction.atomic():
        ListeningTest.objects.select_for_update(no_key=True).get(
            pk=selectors.listening_test(challenge).pk
        )
        current = set(
            Stimulus.objects.filter(challenge=challenge).values_list("clip_id", flat=True)
        )
        wanted = {medoid.clip_id for medoid in medoids}
        if wanted != current and listening_began(challenge):
            raise ListeningError(
                f"The stimulus set is fixed since raters began ({len(current)} stimuli); the "
                f"finalists' medoids now give {len(wanted)} clips, {len(wanted - current)} of "
                "them new. Run the listening test again in a new challenge, or restore the "
                "medoids.",
                409,
            )
        for medoid in medoids:
            Stimulus.objects.update_or_create(
                challenge=challenge,
                clip=medoid.clip,
                defaults={
                    "category_id": medoid.category_id,
                    "system_id": medoid.system_id,
                    "position": medoid.position,
                },
            )
        Stimulus.objects.filter(challenge=challenge).exclude(clip_id__in=wanted).delete()
    return Stimulus.objects.filter(challenge=challenge).count()


def listening_began(challenge: Challenge) -> bool:
    return (
        CategorySession.objects.filter(rater__challenge=challenge).exists()
        or DiversityTrial.objects.filter(rater__challenge=challenge).exists()
    )


# What a category session is built from when a rater begins it: changed later, the sessions
# already built would follow another design than those still to come.
DESIGN_FIELDS = (
    "design",
    "pairs_per_session",
    "anchor_pairs_per_session",
    "categories_min",
    "categories_max",
    "crowd_categories",
    "anchors_per_session",
    "gold_per_session",
    "familiarization_clips",
    "loudness_alignment",
    "target_lufs",
    "diversity_gap_s",
    "listened_fraction",
)


def design_refusal(challenge: Challenge, changed: list[str]) -> str | None:
    """Why the listening test's design fields `changed` cannot change now, if they cannot. The
    settings page and the definition file refuse in these words."""
    fixed = [name for name in changed if name in DESIGN_FIELDS]
    if fixed and listening_began(challenge):
        sessions = CategorySession.objects.filter(rater__challenge=challenge).count()
        return (
            f"{', '.join(fixed)} cannot change once raters have begun: {sessions:,} category "
            "sessions were built with the current design"
        )
    return None


# Clips only the organizer holds, by the anchor kind they may become: imported anchor sources
# first (high quality: good fit for their category, poor fit for the others, or degraded into
# low-quality anchors; low quality: poor fit as they are), then the evaluation reference set.
PRIVATE_HQ = (Clip.Role.ANCHOR, Clip.Role.EVALUATION)
PRIVATE_LQ = (Clip.Role.ANCHOR_LQ,)
# What the teams hold: no anchor may come from, or match, a sound of these.
HELD_BY_TEAMS = (Clip.Role.DEVELOPMENT, Clip.Role.SYSTEM)


def build_anchors(challenge: Challenge, *, seed: int | None = None, progress=None) -> int:
    """The anchor pools of every category, for the kinds that have none yet.

    Anchors come only from clips the organizer keeps private (`PRIVATE_HQ`, `PRIVATE_LQ`):
    the development set and the familiarization examples are published, and the systems'
    clips are the teams' own, so a script matching what it receives against them would find
    every anchor. Every source serves one anchor of one category and kind, so no sound is heard
    twice by a rater who rates several categories: high-quality sources of a category are its
    good-fit anchors and other categories' poor-fit anchors; low-quality anchors are imported
    low-quality sources, or high-quality ones degraded by a recipe drawn per anchor
    (`anchors.degrade`). Pools fill round by round across categories and kinds, so scarce
    sources spread evenly; a pool that cannot give a session its anchors without repeats is
    refused, naming every shortfall. Unused anchors of an older version (silent, or made from
    sounds the teams hold) are replaced.
    """
    rng = random.Random(secrets.randbits(62) if seed is None else seed)
    Anchor.objects.filter(challenge=challenge, trials__isnull=True).filter(
        Q(audio__is_silent=True) | ~Q(source__role__in=PRIVATE_HQ + PRIVATE_LQ)
    ).delete()
    categories = list(Category.objects.filter(challenge=challenge))
    used = set(
        Anchor.objects.filter(challenge=challenge).values_list("source__audio_id", flat=True)
    )
    held = set(
        Clip.objects.filter(challenge=challenge, role__in=HELD_BY_TEAMS).values_list(
            "audio_id", flat=True
        )
    )
    hq: dict[int, list[Clip]] = {c.pk: [] for c in categories}
    lq: dict[int, list[Clip]] = {c.pk: [] for c in categories}
    seen = used | held
    clips = Clip.objects.filter(challenge=challenge, role__in=PRIVATE_HQ + PRIVATE_LQ)
    by_role = {role: [] for role in PRIVATE_HQ + PRIVATE_LQ}
    for clip in clips.select_related("audio").order_by("id"):
        by_role[clip.role].append(clip)
    for role, found in by_role.items():
        if role == Clip.Role.EVALUATION:
            rng.shuffle(found)  # imported anchor sources were chosen; the reference set was not
        for clip in found:
            audio = clip.audio
            if audio.pk in seen or audio.is_silent:
                continue
            if (audio.loudness_lufs or -math.inf) < MIN_SOURCE_LUFS:
                continue
            seen.add(audio.pk)
            (lq if role in PRIVATE_LQ else hq)[clip.category_id].append(clip)
    test = selectors.listening_test(challenge)
    kinds = Anchor.Kind.values
    have = {
        (category_id, kind)
        for category_id, kind in Anchor.objects.filter(challenge=challenge).values_list(
            "category_id", "kind"
        )
    }
    pools: dict[tuple[int, str], list[Clip]] = {
        (c.pk, kind): [] for c in categories for kind in kinds if (c.pk, kind) not in have
    }

    def other(index: int, shift: int, sources: dict[int, list[Clip]]) -> Clip | None:
        # Category i draws from category i + shift: a shift other than 0 is a permutation, so
        # each category gives as many poor-fit anchors as it takes, and an exact supply fits.
        # When that one is spent, from the other category with the most left.
        wanted = categories[(index + shift) % len(categories)].pk
        if sources[wanted]:
            return sources[wanted].pop(0)
        own = categories[index].pk
        left = [c for c in sources if c != own and sources[c]]
        if not left:
            return None
        return sources[max(left, key=lambda c: (len(sources[c]), rng.random()))].pop(0)

    for round_ in range(ANCHOR_POOL):
        spread = max(1, len(categories) - 1)
        shifts = {
            Anchor.Kind.HQ_POORFIT: 1 + round_ % spread,
            Anchor.Kind.LQ_POORFIT: 1 + (round_ + 1) % spread,
        }
        # Good-fit anchors first in each round: they can only be the category's own.
        for kind in kinds:
            for index, category in enumerate(categories):
                if (category.pk, kind) not in pools:
                    continue
                if kind == Anchor.Kind.HQ_GOODFIT:
                    clip = hq[category.pk].pop(0) if hq[category.pk] else None
                elif kind == Anchor.Kind.HQ_POORFIT:
                    clip = other(index, shifts[kind], hq)
                else:
                    clip = other(index, shifts[kind], lq) or other(index, shifts[kind], hq)
                if clip is not None:
                    pools[(category.pk, kind)].append(clip)
    per_kind = test.anchors_per_session // 3
    short = [
        f"{category.slug} {kind}: {len(pools[(category.pk, kind)])} of {per_kind}"
        for category in categories
        for kind in kinds
        if (category.pk, kind) in pools and len(pools[(category.pk, kind)]) < per_kind
    ]
    if short:
        raise ListeningError(
            "Too few private anchor sources for every session to hear its anchors once each "
            f"({'; '.join(short)}). Import anchor clips (role anchor or anchor_lq) or the "
            "evaluation set: anchors never come from the development set, the examples or the "
            "systems' clips, which the teams hold.",
            409,
        )
    made = 0
    for n, category in enumerate(categories):
        if progress:
            progress(n, len(categories), f"Anchors of {category.slug}")
        for kind in kinds:
            for clip in pools.get((category.pk, kind), []):
                audio = clip.audio
                if kind == Anchor.Kind.LQ_POORFIT and clip.role not in PRIVATE_LQ:
                    samples, rate = delivery.load_samples(clip.audio)
                    degraded = anchors.degrade(samples, rate, rng.randrange(2**62))
                    audio = delivery.store_samples(degraded, rate)
                Anchor.objects.create(
                    challenge=challenge, category=category, kind=kind, source=clip, audio=audio
                )
                made += 1
    return made


def check_anchors(
    challenge: Challenge,
    *,
    measured: dict[int, anchors.Stats] | None = None,
    quick: bool = False,
) -> None:
    """Refuse an anchor set that a script could pick out of what a rater receives, naming every
    problem at once:

    - within a category, a statistic of the delivered audio that puts every anchor of a kind
      well outside the stimuli's range (silence, distinct sample values, RMS level; for
      good-fit anchors also noise floor, crest factor, bandwidth and flatness, see
      `anchors.separations`);
    - over the whole challenge, as a rater of several categories receives it, one threshold on
      one statistic that sorts a kind of anchor from the stimuli (`anchors.pooled_separations`);
    - a sound heard twice: a source behind two anchors, or an anchor that is a stimulus, or a
      pool too small for a session's anchors;
    - an anchor that matches a clip of the development set or any system's clips (the teams
      hold both) by waveform correlation (`anchors.best_matches`).

    `measured` keeps each delivered sound's statistics for the next check (preparation draws
    the anchors again while a check refuses them; the stimuli stay). `quick` leaves out the
    matching, the check's longest part, when another problem refuses the set already: a draw
    to be replaced anyway.
    """
    test = selectors.listening_test(challenge)
    measured = {} if measured is None else measured

    def stats_of(audio: AudioFile) -> anchors.Stats:
        if audio.pk not in measured:
            samples, rate = delivery.load_samples(delivery.delivered_audio(audio, test))
            measured[audio.pk] = anchors.stats(samples, rate)
        return measured[audio.pk]

    problems = []
    everything: dict[str, list[anchors.Stats]] = {}
    stimuli_all: list[anchors.Stats] = []
    every_anchor = list(
        Anchor.objects.filter(challenge=challenge).select_related("audio", "source", "category")
    )
    for category in Category.objects.filter(challenge=challenge):
        stimuli = [
            stats_of(s.clip.audio)
            for s in Stimulus.objects.filter(category=category).select_related("clip__audio")
        ]
        stimuli_all += stimuli
        kinds: dict[str, list[anchors.Stats]] = {}
        for anchor in every_anchor:
            if anchor.category_id == category.pk:
                kinds.setdefault(anchor.kind, []).append(stats_of(anchor.audio))
        for kind, group in kinds.items():
            everything.setdefault(kind, []).extend(group)
        # Poor-fit anchors are other categories' sounds: their spectra differ from the
        # stimuli's as they should (that is what a listener hears); what a sound is, is judged
        # for good-fit anchors, which must be like the category's stimuli.
        found = anchors.separations(kinds, stimuli, spectral_kinds=(Anchor.Kind.HQ_GOODFIT,))
        problems += [f"{category.slug} {problem}" for problem in found]
    problems += [
        f"over all categories {problem}"
        for problem in anchors.pooled_separations(everything, stimuli_all)
    ]
    problems += _anchor_repeats(challenge, every_anchor, test)
    if not (quick and problems):
        problems += _anchor_matches(challenge, every_anchor, test)
    if problems:
        raise ListeningError(
            "The anchors can be told apart from the stimuli without listening: "
            + "; ".join(problems)
            + ". Import other private anchor clips (role anchor or anchor_lq) or the evaluation "
            "set, and prepare again.",
            409,
        )


def _anchor_repeats(challenge: Challenge, every_anchor: list[Anchor], test) -> list[str]:
    """Sounds a rater could hear twice: a clue no listening is needed for."""
    problems = []
    sources = Counter(a.source.audio_id for a in every_anchor)
    repeated = sum(1 for n in sources.values() if n > 1)
    if repeated:
        problems.append(f"{repeated} source clip(s) behind more than one anchor")
    stimuli = set(
        Stimulus.objects.filter(challenge=challenge).values_list("clip__audio", flat=True)
    )
    doubled = sum(1 for a in every_anchor if {a.audio_id, a.source.audio_id} & stimuli)
    if doubled:
        problems.append(f"{doubled} anchor(s) also a stimulus")
    per_kind = test.anchors_per_session // 3
    pools = Counter((a.category.slug, a.kind) for a in every_anchor)
    small = sorted(f"{slug} {kind}" for (slug, kind), n in pools.items() if n < per_kind)
    if small:
        problems.append(
            f"pools smaller than a session's {per_kind} anchors of a kind: {', '.join(small)}"
        )
    return problems


MATCH_BLOCK = 256


def _anchor_matches(challenge: Challenge, every_anchor: list[Anchor], test) -> list[str]:
    """Anchors whose delivered sound correlates with a development clip or a system's clip."""
    if not every_anchor:
        return []
    frames, rate = challenge.clip_frames, challenge.sample_rate

    def print_of(audio: AudioFile) -> np.ndarray:
        samples, source_rate = delivery.load_samples(audio)
        if source_rate != rate:
            samples = resample(samples, source_rate, rate)
        return anchors.fingerprint(samples, frames)

    queries = np.stack([print_of(delivery.delivered_audio(a.audio, test)) for a in every_anchor])

    def blocks():
        ids = list(
            Clip.objects.filter(challenge=challenge, role__in=HELD_BY_TEAMS)
            .order_by("id")
            .values_list("audio_id", flat=True)
            .distinct()
        )
        for start in range(0, len(ids), MATCH_BLOCK):
            chunk = AudioFile.objects.filter(pk__in=ids[start : start + MATCH_BLOCK])
            yield np.stack([print_of(audio) for audio in chunk])

    best = anchors.best_matches(queries, blocks())
    matched = Counter(
        (a.category.slug, a.kind)
        for a, score in zip(every_anchor, best, strict=True)
        if score >= anchors.MATCH_CORRELATION
    )
    return [
        f"{slug} {kind}: {n} anchor(s) match a development or system clip"
        for (slug, kind), n in sorted(matched.items())
    ]


def render_delivered_audio(challenge: Challenge, *, progress=None) -> int:
    """Render (and cache) the delivered version of every sound raters may hear."""
    test = selectors.listening_test(challenge)
    sources = {
        s.clip.audio
        for s in Stimulus.objects.filter(challenge=challenge).select_related("clip__audio")
    }
    sources |= {a.audio for a in Anchor.objects.filter(challenge=challenge).select_related("audio")}
    uploaded = GoldSound.objects.filter(challenge=challenge, builtin=False)
    sources |= {g.audio for g in uploaded.select_related("audio")}
    # Trapping sounds still in the pool: a changed loudness target renders them again now, not
    # on the first fetch of a gold trial.
    sources |= {g.audio for g in gold.unplaced(challenge).select_related("audio")}
    for category in Category.objects.filter(challenge=challenge):
        pool = sessions.familiarization_pool(challenge, category)
        sources |= {c.audio for c in Clip.objects.filter(pk__in=pool).select_related("audio")}
    for n, audio in enumerate(sorted(sources, key=lambda a: a.pk)):
        if progress:
            progress(n, len(sources), "Loudness alignment")
        delivery.delivered_audio(audio, test)
    return len(sources)


def prepare(challenge: Challenge, *, progress=None, seed: int | None = None) -> dict:
    """Everything the listening test needs before raters come: idempotent, safe to rerun.
    `seed` fixes the anchors' and trapping sounds' draws (random otherwise: no one can
    reproduce them)."""
    selectors.listening_test(challenge)
    stimuli = build_stimulus_set(challenge)
    anchors = build_anchors(challenge, seed=seed, progress=progress)
    if (
        selectors.listening_test(challenge).gold_per_session
        and not gold.uses_own(challenge)
        and (missing := gold.speaker_missing())
    ):
        raise ListeningError(missing, 409)
    trapping = gold.make_pool(
        challenge,
        random.Random(secrets.randbits(62) if seed is None else seed ^ 0x601D),
        progress=progress,
    )
    rendered = render_delivered_audio(challenge, progress=progress)
    measured: dict = {}  # the delivered sounds' statistics, kept from one draw to the next
    for attempt in range(1, ANCHOR_DRAWS + 1):
        try:
            check_anchors(challenge, measured=measured, quick=attempt < ANCHOR_DRAWS)
            break
        except ListeningError:
            # Each low-quality anchor's degradation is drawn at random: a set that a statistic
            # happens to separate is drawn again, while no rater has heard any of it.
            if attempt == ANCHOR_DRAWS or not anchors or listening_began(challenge):
                raise
            challenge.anchors.all().delete()
            anchors = build_anchors(
                challenge, seed=None if seed is None else seed + attempt, progress=progress
            )
            rendered += render_delivered_audio(challenge, progress=progress)
    items = diversity.build_items(challenge, progress=progress)
    return {
        "stimuli": stimuli,
        "anchors_added": anchors,
        "trapping_sounds": trapping,
        "rendered": rendered,
        "diversity": items,
    }


def request_preparation(challenge: Challenge, user=None) -> Job:
    """Queue `prepare` as a job on a worker (run at once without a broker)."""
    with transaction.atomic():
        job = create_job(PREPARE_LISTENING, challenge=challenge, by=user)
        enqueue(job)
    job.refresh_from_db()
    return job


def run_prepare_job(job_id: int) -> Job:
    def work(job: Job, progress: JobProgress) -> dict:
        result = prepare(job.challenge, progress=progress)
        progress(1, 1, "Listening test prepared")
        return result

    return run_job(job_id, work)


def open_refused(challenge: Challenge) -> str:
    """Why the test cannot be opened now ("" when it can): shown beside the disabled button."""
    if challenge.phase == Challenge.Phase.PUBLISHED:
        return PUBLISHED_CLOSED
    if not Stimulus.objects.filter(challenge=challenge).exists():
        return NO_STIMULI
    return ""


def set_open(challenge: Challenge, is_open: bool) -> ListeningTest:
    """Open or close the test; opening moves the challenge to its listening phase."""
    test = selectors.listening_test(challenge)
    if is_open and not Stimulus.objects.filter(challenge=challenge).exists():
        raise ListeningError(NO_STIMULI, 409)
    with transaction.atomic():
        # The challenge's lock: imports and generations check the phase under it before they
        # store clips, so none lands after the test has opened.
        locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        if is_open:
            try:
                advance(locked, "open_listening")
            except PhaseError as exc:
                raise ListeningError(str(exc), 409) from None
        test.is_open = is_open
        test.save(update_fields=["is_open", "updated_at"])
    challenge.refresh_from_db(fields=["phase"])
    return test


def pick_stimuli(challenge: Challenge, *, per_category: int = 20, systems=None) -> int:
    """A stimulus set chosen without medoids: the first clips of each system and category (all
    finalists, or every system when none is marked). Existing stimuli are kept."""
    from stimuli.models import System

    if systems is None:
        systems = System.objects.filter(challenge=challenge, is_finalist=True)
        if not systems.exists():
            systems = System.objects.filter(challenge=challenge)
    made = 0
    with transaction.atomic():
        for system in systems:
            for category in Category.objects.filter(challenge=challenge):
                clips = Clip.objects.filter(system=system, category=category).order_by("id")
                for position, clip in enumerate(clips[:per_category]):
                    _, created = Stimulus.objects.get_or_create(
                        challenge=challenge,
                        clip=clip,
                        defaults={"category": category, "system": system, "position": position},
                    )
                    made += created
    return made
