"""The listening test's actions: preparing it, enrolling raters, assigning categories, building
counterbalanced sessions, and storing answers exactly once.

Pages, the API, the demo and the tests all go through these functions.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
import secrets
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Max, Q
from django.http import HttpResponse
from django.utils import timezone

from stimuli.audio import resample
from stimuli.jobs import JobProgress, enqueue, run_job
from stimuli.models import AudioFile, Category, Challenge, Clip, Job, Medoid, Team

from . import anchors, delivery, gold, listening, lookups, selectors
from .design import counterbalanced_order, spread_slots, williams
from .errors import ListeningError
from .models import (
    Anchor,
    CategorySession,
    DiversityItem,
    DiversityRating,
    DiversityTrial,
    FamiliarizationClip,
    GoldSound,
    Heard,
    ListeningTest,
    PromptClip,
    Rater,
    Rating,
    Stimulus,
    TextTrial,
    Trial,
)

# Anchor pool per category and type: sessions draw their anchors from it.
# The job kind that prepares the listening test (registered in apps.py).
PREPARE_JOB = "prepare_listening"
ANCHOR_POOL = 8
# Draws of a challenge's anchors preparation tries before it refuses a set the check separates.
ANCHOR_DRAWS = 4
# A clip quieter than this (integrated loudness, LUFS) is no source for an anchor.
MIN_SOURCE_LUFS = -70.0
# Blocks of the balanced Latin square over a session.
SESSION_BLOCKS = 8
# An open session holds its place in the assignment while its rater is at work: its first answer
# within this long of its start (the examples take a minute or two), then an answer at least
# this often. A link opened and left, by a careless worker or by someone holding places, frees
# its place soon.
FIRST_ANSWER_WITHIN = timedelta(minutes=10)
ABANDONED_AFTER = timedelta(minutes=30)
# Every publication of a challenge is of the same ratings: publishing closes the test for good.
PUBLISHED_CLOSED = (
    "Results are published, so the listening test stays closed: every publication must be of "
    "the same ratings. Collect more ratings in a new challenge."
)
NO_STIMULI = "The listening test has no stimuli yet; prepare it first."
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


# --- Settings and the stimulus set -------------------------------------------------------------


def listening_test(challenge: Challenge) -> ListeningTest:
    """The challenge's listening-test settings (created with the defaults when missing); as read
    with the rater at the start of a rater's request, when it was (`lookups.rater_by_key`)."""
    test = getattr(challenge, "listening_test_of_request", None)
    if test is None:
        test, _ = ListeningTest.objects.get_or_create(challenge=challenge)
    test.challenge = challenge  # read for its sample rate: no second query
    return test


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
        ListeningTest.objects.select_for_update(no_key=True).get(pk=listening_test(challenge).pk)
        current = set(
            Stimulus.objects.filter(challenge=challenge).values_list("clip_id", flat=True)
        )
        wanted = {medoid.clip_id for medoid in medoids}
        if wanted != current and _listening_began(challenge):
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


def _listening_began(challenge: Challenge) -> bool:
    return (
        CategorySession.objects.filter(rater__challenge=challenge).exists()
        or DiversityTrial.objects.filter(rater__challenge=challenge).exists()
    )


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
    test = listening_test(challenge)
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


def check_anchors(challenge: Challenge) -> None:
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
    """
    test = listening_test(challenge)
    measured: dict[int, anchors.Stats] = {}

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


def _familiarization_pool(challenge: Challenge, category: Category) -> set[int]:
    """The category's examples: development clips spread evenly over the set (uploads are often
    ordered by name, so the first few could all be alike), the same for every rater."""
    test = listening_test(challenge)
    ids = list(
        Clip.objects.filter(category=category, role=Clip.Role.DEVELOPMENT)
        .order_by("id")
        .values_list("pk", flat=True)
    )
    n = min(test.familiarization_clips, len(ids))
    return {ids[int((k + 0.5) * len(ids) / n)] for k in range(n)}


def build_diversity_items(challenge: Challenge, *, progress=None) -> int:
    """One continuous file per finalist system and category: its stimuli with short silences.

    A file is rendered again when its sounds change (other medoids, other loudness settings)
    until someone is given it to rate; from then on it stays as heard.
    """
    test = listening_test(challenge)
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


def render_delivered_audio(challenge: Challenge, *, progress=None) -> int:
    """Render (and cache) the delivered version of every sound raters may hear."""
    test = listening_test(challenge)
    sources = {
        s.clip.audio
        for s in Stimulus.objects.filter(challenge=challenge).select_related("clip__audio")
    }
    sources |= {a.audio for a in Anchor.objects.filter(challenge=challenge).select_related("audio")}
    uploaded = GoldSound.objects.filter(challenge=challenge, builtin=False)
    sources |= {g.audio for g in uploaded.select_related("audio")}
    for category in Category.objects.filter(challenge=challenge):
        pool = _familiarization_pool(challenge, category)
        sources |= {c.audio for c in Clip.objects.filter(pk__in=pool).select_related("audio")}
    for n, audio in enumerate(sorted(sources, key=lambda a: a.pk)):
        if progress:
            progress(n, len(sources), "Loudness alignment")
        delivery.delivered_audio(audio, test)
    return len(sources)


def prepare(challenge: Challenge, *, progress=None, seed: int | None = None) -> dict:
    """Everything the listening test needs before raters come: idempotent, safe to rerun.
    `seed` fixes the anchors' draws (random otherwise: no one can reproduce them)."""
    listening_test(challenge)
    stimuli = build_stimulus_set(challenge)
    anchors = build_anchors(challenge, seed=seed, progress=progress)
    if (
        listening_test(challenge).gold_per_session
        and not GoldSound.objects.filter(challenge=challenge, builtin=False).exists()
        and (missing := gold.speaker_missing())
    ):
        raise ListeningError(missing, 409)
    rendered = render_delivered_audio(challenge, progress=progress)
    for attempt in range(1, ANCHOR_DRAWS + 1):
        try:
            check_anchors(challenge)
            break
        except ListeningError:
            # Each low-quality anchor's degradation is drawn at random: a set that a statistic
            # happens to separate is drawn again, while no rater has heard any of it.
            if attempt == ANCHOR_DRAWS or not anchors or _listening_began(challenge):
                raise
            challenge.anchors.all().delete()
            anchors = build_anchors(
                challenge, seed=None if seed is None else seed + attempt, progress=progress
            )
            rendered += render_delivered_audio(challenge, progress=progress)
    items = build_diversity_items(challenge, progress=progress)
    return {"stimuli": stimuli, "anchors_added": anchors, "rendered": rendered, "diversity": items}


def request_preparation(challenge: Challenge, user=None) -> Job:
    """Queue `prepare` as a job on a worker (run at once without a broker)."""
    with transaction.atomic():
        job = Job.objects.create(
            challenge=challenge,
            kind=PREPARE_JOB,
            created_by=user if user is not None and user.is_authenticated else None,
        )
        enqueue(job)
    job.refresh_from_db()
    return job


def run_prepare_job(job_id: int) -> Job:
    def work(job: Job, progress: JobProgress) -> dict:
        result = prepare(job.challenge, progress=progress)
        progress(1, 1, "Listening test prepared")
        return result

    return run_job(job_id, work)


def crowd_warning(challenge: Challenge) -> str:
    """What the organizer must know before handing out the crowd link ("" when all is set)."""
    if listening_test(challenge).completion_url:
        return ""
    return (
        "No completion URL is set: crowd workers will see the completion code on the last page "
        "but are not sent back to the recruiting platform. Set the study's completion URL "
        "before handing out the crowd link."
    )


def completion_code(test: ListeningTest) -> str:
    """The run's completion code: the recruiting platform's own when the completion URL carries
    one (Prolific issues it, and pays by it), else the test's."""
    given = dict(parse_qsl(urlsplit(test.completion_url).query)).get("cc", "")
    return given or test.completion_code


def completion_earned(rater: Rater) -> bool:
    """Whether a crowd worker gets the completion code: only for answers the server accepted.
    A worker given nothing to rate (a full test) is asked to return the study instead."""
    return Rating.objects.filter(trial__session__rater=rater).exists()


def completion_link(test: ListeningTest) -> str:
    """The completion URL, with the run's code added as `cc` when it carries none."""
    if not test.completion_url:
        return ""
    parts = urlsplit(test.completion_url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "cc" for key, _ in query):
        return test.completion_url
    query.append(("cc", test.completion_code))
    return urlunsplit(parts._replace(query=urlencode(query)))


def open_refused(challenge: Challenge) -> str:
    """Why the test cannot be opened now ("" when it can): shown beside the disabled button."""
    if challenge.phase == Challenge.Phase.PUBLISHED:
        return PUBLISHED_CLOSED
    if not Stimulus.objects.filter(challenge=challenge).exists():
        return NO_STIMULI
    return ""


def set_open(challenge: Challenge, is_open: bool) -> ListeningTest:
    """Open or close the test; opening moves the challenge to its listening phase."""
    test = listening_test(challenge)
    if is_open and not Stimulus.objects.filter(challenge=challenge).exists():
        raise ListeningError(NO_STIMULI, 409)
    with transaction.atomic():
        # The challenge's lock: imports and generations check the phase under it before they
        # store clips, so none lands after the test has opened.
        locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
        if is_open and locked.phase == Challenge.Phase.PUBLISHED:
            raise ListeningError(PUBLISHED_CLOSED, 409)
        test.is_open = is_open
        test.save(update_fields=["is_open", "updated_at"])
        if is_open and locked.phase in (Challenge.Phase.SETUP, Challenge.Phase.OBJECTIVE):
            locked.phase = Challenge.Phase.LISTENING
            locked.save(update_fields=["phase"])
    challenge.phase = locked.phase
    return test


# --- Enrolment -----------------------------------------------------------------------------------


def _new_rater(challenge: Challenge, *, unless: Q | None = None, **fields) -> Rater:
    """A rater with the next enrolment index (the test's row is locked while it is taken).

    With `unless`, the challenge's rater matching it is returned instead, looked up under the
    lock: a link opened twice at once enrols one rater.
    """
    with transaction.atomic():
        ListeningTest.objects.select_for_update(no_key=True).get(pk=listening_test(challenge).pk)
        if unless is not None:
            existing = Rater.objects.filter(unless, challenge=challenge).first()
            if existing is not None:
                return existing
        last = Rater.objects.filter(challenge=challenge).aggregate(n=Max("index"))["n"]
        rater = Rater(
            challenge=challenge, index=(last or 0) + 1 if last is not None else 0, **fields
        )
        # The database's unique constraints answer races; full_clean's copy of them would turn
        # one into a ValidationError instead of the IntegrityError the callers handle.
        rater.full_clean(exclude=["user", "team"], validate_constraints=False)
        rater.save()
    return rater


def enrol_user(
    challenge: Challenge,
    user,
    *,
    team: Team | None = None,
    kind: str = Rater.Kind.PARTICIPANT,
    diversity_role: bool = False,
) -> Rater:
    """The user's rater in this challenge, created on first use."""
    if team is not None and team.challenge_id != challenge.pk:
        raise ListeningError("The team belongs to another challenge.")
    existing = Rater.objects.filter(challenge=challenge, user=user).first()
    if existing:
        return existing
    try:
        return _new_rater(
            challenge,
            unless=Q(user=user),
            user=user,
            team=team,
            kind=kind,
            diversity_role=diversity_role,
        )
    except IntegrityError:  # enrolled concurrently
        return Rater.objects.get(challenge=challenge, user=user)


def create_participant_account(
    challenge: Challenge, *, username: str, password: str, team: Team | None
) -> Rater:
    """A login for a member of a team (their ratings of their own team are removed at scoring)."""
    User = get_user_model()
    if User.objects.filter(username=username).exists():
        raise ListeningError(f"The user name {username!r} is taken.")
    with transaction.atomic():
        user = User.objects.create_user(username=username, password=password)
        return enrol_user(challenge, user, team=team)


def enrol_organizer_for_diversity(challenge: Challenge, user) -> Rater:
    """An organizer who rates diversity only; one who rated quality and fit cannot."""
    rater = Rater.objects.filter(challenge=challenge, user=user).first()
    if rater is None:
        return enrol_user(challenge, user, kind=Rater.Kind.ORGANIZER, diversity_role=True)
    if rater.sessions.exists():
        raise ListeningError(
            "This account rated quality and fit, so it cannot rate diversity.", 409
        )
    if not rater.diversity_role:
        rater.diversity_role = True
        rater.save(update_fields=["diversity_role"])
    return rater


def invite(challenge: Challenge, *, label: str = "", team: Team | None = None) -> Rater:
    """An outside listener, who comes in through the link carrying `rater.access_key`."""
    return _new_rater(challenge, kind=Rater.Kind.INVITED, label=label[:120], team=team)


CROWD_RETURN = (
    "You have not been enrolled and nothing was recorded. Please return your submission on the "
    "recruiting platform (on Prolific: open the study and choose to return it) so that your "
    "place is freed; returning is not held against you."
)


def crowd_refusal(challenge: Challenge, test: ListeningTest) -> str:
    """Why a new crowd worker cannot start now ("" when they can): a closed test, or one where
    every sound already has the ratings it needs, is refused at the link, before consent."""
    if not test.is_open:
        return f"This study is closed. {CROWD_RETURN}"
    if not any(n > 0 for n in category_need(challenge).values()):
        return f"This study is full: every sound has the ratings it needs. {CROWD_RETURN}"
    return ""


def enrol_crowd(
    challenge: Challenge,
    crowd_key: str,
    *,
    participant_id: str,
    study_id: str = "",
    session_id: str = "",
) -> Rater:
    """A crowd worker arriving from the recruiting platform (e.g. Prolific's PROLIFIC_PID)."""
    test = listening_test(challenge)
    if crowd_key != test.crowd_key:
        raise ListeningError("This link is not valid.", 404)
    participant_id = participant_id.strip()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", participant_id):
        raise ListeningError("The link lacks a valid participant id (PROLIFIC_PID).")
    existing = Rater.objects.filter(challenge=challenge, participant_id=participant_id).first()
    if existing:
        # The link is the same for every worker, so a participant id alone would let anyone
        # who learns one open that worker's session. From another browser, a worker comes back
        # with the recruiting platform's session id of their first visit too.
        if existing.crowd_session_id and session_id.strip() == existing.crowd_session_id:
            return existing
        raise ListeningError(
            "This participant has started the test already. Please reopen the study's link "
            "from the recruiting platform, in the browser you began in.",
            409,
        )
    if refusal := crowd_refusal(challenge, test):  # before any row: the worker was never here
        raise ListeningError(refusal, 409)
    try:
        return _new_rater(
            challenge,
            unless=Q(participant_id=participant_id),
            kind=Rater.Kind.CROWD,
            participant_id=participant_id,
            study_id=study_id.strip()[:64],
            crowd_session_id=session_id.strip()[:64],
        )
    except IntegrityError:
        return Rater.objects.get(challenge=challenge, participant_id=participant_id)


def record_consent(rater: Rater) -> None:
    if rater.consented_at is None:
        Rater.objects.filter(pk=rater.pk, consented_at__isnull=True).update(
            consented_at=timezone.now()
        )
        rater.refresh_from_db()


def record_instructions(rater: Rater) -> None:
    if rater.consented_at is None:
        raise ListeningError("Consent comes first.", 409)
    if rater.instructed_at is None:
        Rater.objects.filter(pk=rater.pk, instructed_at__isnull=True).update(
            instructed_at=timezone.now()
        )
        rater.refresh_from_db()


# --- Assignment and sessions ---------------------------------------------------------------------


@dataclass
class NextStep:
    """What a rater does next: a session to (continue to) rate, or why there is none."""

    session: CategorySession | None
    reason: str = ""  # "done", "max", "full", "closed" when session is None


def category_need(challenge: Challenge) -> dict[int, int]:
    """Sessions of each category still needed for every stimulus to reach the target in usable
    ratings.

    A session counts for a stimulus while it is closed and not excluded by the rater-quality
    rules, or open and active (answered in the last `ABANDONED_AFTER`, or begun in the last
    `FIRST_ANSWER_WITHIN` and not answered yet), and only when the rater is not of
    the stimulus's team (scoring removes ratings of one's own systems). An abandoned or excluded
    session leaves its place to another rater.

    Read from what each answer keeps up to date on its session (`last_answer_at`, `excluded`):
    one row per category and team, never the challenge's ratings. Verdicts judged by rules
    that have changed since are judged again first.
    """
    test = listening_test(challenge)
    teams: dict[int, list[int | None]] = {}
    for category_id, team_id in Stimulus.objects.filter(challenge=challenge).values_list(
        "category_id", "system__team_id"
    ):
        teams.setdefault(category_id, []).append(team_id)
    rejudge_stale(challenge)
    moment = timezone.now()
    counting: dict[int, dict[int | None, int]] = {}
    for category_id, team_id, n in (
        CategorySession.objects.filter(rater__challenge=challenge, excluded=False)
        .filter(
            Q(state=CategorySession.State.CLOSED)
            | Q(last_answer_at__gte=moment - ABANDONED_AFTER)
            | Q(last_answer_at__isnull=True, created_at__gte=moment - FIRST_ANSWER_WITHIN)
        )
        .order_by()
        .values("category_id", "rater__team_id")
        .annotate(n=Count("id"))
        .values_list("category_id", "rater__team_id", "n")
    ):
        counting.setdefault(category_id, {})[team_id] = n
    need = {}
    for category_id, stimulus_teams in teams.items():
        raters = counting.get(category_id, {})
        fewest = min(
            sum(n for team, n in raters.items() if team is None or team != owner)
            for owner in stimulus_teams
        )
        need[category_id] = max(0, test.target_ratings - fewest)
    return need


def rated_categories(challenge: Challenge) -> int:
    """How many categories have stimuli (a rater cannot be asked for more)."""
    return (
        Stimulus.objects.filter(challenge=challenge)
        .order_by()
        .values("category_id")
        .distinct()
        .count()
    )


def judge_sessions(
    challenge: Challenge, sessions: list[CategorySession], *, rules=None, closing: int = 0
) -> dict[int, tuple[bool, str]]:
    """Judge these sessions by the rater-quality rules from their own answers only; returns
    {session id: (excluded, rules key)}. `closing` names a session being closed by the answer
    under way (judged as finished)."""
    rules = rules or selectors.quality_rules(challenge)
    key = selectors.rules_key(rules)
    ids = [s.pk for s in sessions]
    open_codes = [
        f"{s.rater.code}-{s.pk}"
        for s in sessions
        if s.state == CategorySession.State.OPEN and s.pk != closing
    ]
    verdicts = selectors.session_verdicts(
        challenge,
        selectors.answer_rows(challenge, sessions=ids),
        rules=rules,
        open_codes=open_codes,
    )
    return {pk: (bool(verdicts[pk].excluded) if pk in verdicts else False, key) for pk in ids}


def rejudge_stale(challenge: Challenge) -> int:
    """Judge again the answered sessions whose stored verdict is by other rules than the
    current ones (the organizers changed them, or the session predates stored verdicts)."""
    rules = selectors.quality_rules(challenge)
    key = selectors.rules_key(rules)
    stale = CategorySession.objects.filter(
        rater__challenge=challenge, last_answer_at__isnull=False
    ).exclude(judged_with=key)
    if not stale.exists():
        return 0
    with transaction.atomic():
        # Locked as a save locks them, so an answer stored meanwhile is judged with the others,
        # never overwritten by a verdict read before it.
        sessions = list(stale.select_related("rater").select_for_update(of=("self",), no_key=True))
        verdicts = judge_sessions(challenge, sessions, rules=rules)
        for flag in (True, False):  # two statements, however many sessions
            CategorySession.objects.filter(
                pk__in=[pk for pk, (excluded, _) in verdicts.items() if excluded is flag]
            ).update(excluded=flag, judged_with=key)
    return len(sessions)


def next_session(rater: Rater) -> NextStep:
    """The rater's open session, or a newly assigned one: least-rated categories first, so every
    stimulus reaches the target with as little listening as possible."""
    if rater.diversity_role:
        raise ListeningError("Diversity raters rate no quality or fit.", 403)
    test = listening_test(rater.challenge)
    open_session = rater.sessions.filter(state=CategorySession.State.OPEN).order_by("order").first()
    if open_session:
        return NextStep(open_session)
    if not test.is_open:
        return NextStep(None, "closed")
    with transaction.atomic():
        # One assignment at a time per challenge, so two raters never both take the last slot.
        ListeningTest.objects.select_for_update(no_key=True).get(pk=test.pk)
        # A second request of the same rater (a double click, two tabs) waited for the lock
        # while the first assigned a session: that session is the answer.
        open_session = (
            rater.sessions.filter(state=CategorySession.State.OPEN).order_by("order").first()
        )
        if open_session:
            return NextStep(open_session)
        done = set(rater.sessions.values_list("category_id", flat=True))
        fewest, most = categories_for(rater, test)
        if len(done) >= most:
            return NextStep(None, "max")
        every = category_need(rater.challenge)
        need = {c: n for c, n in every.items() if c not in done}
        wanted = [c for c, n in need.items() if n > 0]
        if not wanted:
            # Everything reached the target; a rater below the minimum still helps the least rated.
            if len(done) >= fewest or not any(n > 0 for n in every.values()):
                return NextStep(None, "full" if len(done) < fewest else "done")
            wanted = list(need)
        if not wanted:
            return NextStep(None, "done")
        # Ties are broken by the rater's own order, so equal categories spread across raters.
        tie = random.Random(rater.index)
        shuffled = sorted(wanted, key=lambda c: (-need[c], tie.random()))
        session = build_session(rater, Category.objects.get(pk=shuffled[0]), order=len(done))
    return NextStep(session)


def categories_for(rater: Rater, test: ListeningTest) -> tuple[int, int]:
    """The fewest and most categories `rater` rates: a crowd worker exactly the run's number
    (a paid study has one workload, announced before consent), anyone else between the test's
    minimum and maximum."""
    if rater.kind == Rater.Kind.CROWD:
        return test.crowd_categories, test.crowd_categories
    return test.categories_min, test.categories_max


def rater_done(rater: Rater) -> bool:
    """Whether the rater has rated enough categories to finish now (the minimum, or every
    category there is when the challenge has fewer)."""
    test = listening_test(rater.challenge)
    closed = rater.sessions.filter(state=CategorySession.State.CLOSED).count()
    return closed >= min(categories_for(rater, test)[0], rated_categories(rater.challenge))


def can_continue(rater: Rater) -> bool:
    """Whether another category would still be assigned to the rater."""
    test = listening_test(rater.challenge)
    if not test.is_open or rater.sessions.count() >= categories_for(rater, test)[1]:
        return False
    done = set(rater.sessions.values_list("category_id", flat=True))
    every = category_need(rater.challenge)
    need = {c: n for c, n in every.items() if c not in done}
    if any(n > 0 for n in need.values()):
        return True
    return bool(need) and not rater_done(rater) and any(n > 0 for n in every.values())


def session_items(
    category: Category, test: ListeningTest, seed: int
) -> list[tuple[str, Stimulus | Anchor]]:
    """The canonical item list of a category session: its stimuli in a fixed, track-mixing order,
    with the session's anchors (drawn by `seed`) spread evenly among them."""
    stimuli = list(
        Stimulus.objects.filter(category=category).select_related("clip__audio").order_by("id")
    )
    # A fixed shuffle per category mixes systems and tracks within every block.
    random.Random(category.pk).shuffle(stimuli)
    per_kind = test.anchors_per_session // 3
    rng = random.Random(seed)
    pools: dict[str, list[Anchor]] = {}
    for kind in Anchor.Kind.values:
        pool = list(Anchor.objects.filter(category=category, kind=kind).order_by("id"))
        if not pool and per_kind:
            raise ListeningError(f"No {kind} anchors for {category.slug}; prepare the test.", 409)
        rng.shuffle(pool)
        pools[kind] = pool
    # The types alternate, so each block of the session gets a mix.
    anchors: list[tuple[str, Anchor]] = [
        (f"anchor_{kind}", pools[kind][k % len(pools[kind])])
        for k in range(per_kind)
        for kind in Anchor.Kind.values
    ]
    total = len(stimuli) + len(anchors)
    slots = set(spread_slots(total, len(anchors)))
    items: list[tuple[str, Stimulus | Anchor]] = []
    stim_iter, anchor_iter = iter(stimuli), iter(anchors)
    for index in range(total):
        if index in slots:
            items.append(next(anchor_iter))
        else:
            items.append(("trial", next(stim_iter)))
    return items


def build_session(rater: Rater, category: Category, *, order: int) -> CategorySession:
    """Create the session with its familiarization clips and counterbalanced trials."""
    test = listening_test(rater.challenge)
    with transaction.atomic():
        # Max, not count: a deleted rater's sessions must not make two sessions share a row.
        last = CategorySession.objects.filter(category=category).aggregate(n=Max("ordinal"))["n"]
        ordinal = 0 if last is None else last + 1
        session = CategorySession.objects.create(
            rater=rater, category=category, order=order, ordinal=ordinal, latin_row=ordinal
        )
        items = session_items(category, test, session.seed)
        if not items:
            raise ListeningError(f"No stimuli in {category.slug}.", 409)
        permutation = counterbalanced_order(
            len(items), blocks=SESSION_BLOCKS, row=session.latin_row, seed=session.seed
        )
        trials = [
            Trial(
                session=session,
                position=position,
                role=role,
                stimulus=item if role == "trial" else None,
                anchor=item if role != "trial" else None,
                audio=item.clip.audio if role == "trial" else item.audio,
            )
            for position, (role, item) in enumerate(items[i] for i in permutation)
        ]
        # Drawn from the session's secret seed: where a gold trial sits is no one's to guess.
        rng = random.Random(session.seed ^ 0x601D)
        Trial.objects.bulk_create(gold.place(session, trials, test.gold_per_session, rng))
        pool = _familiarization_pool(rater.challenge, category)
        FamiliarizationClip.objects.bulk_create(
            [
                FamiliarizationClip(session=session, position=n, audio=clip.audio)
                for n, clip in enumerate(
                    Clip.objects.filter(pk__in=pool).select_related("audio").order_by("id")
                )
            ]
        )
    return session


def complete_familiarization(session: CategorySession, *, require_heard: bool = True) -> None:
    """Open the trials once the server can vouch that every example was heard."""
    if session.familiarized_at:
        return
    if require_heard:
        test = listening_test(session.rater.challenge)
        clips = list(session.familiarization.select_related("audio").order_by("position"))
        for clip in clips:
            verdict = listening.listened(
                clip,
                delivery.delivered_audio(clip.audio, test).duration_s,
                test,
                what="example",
                rater=session.rater,
            )
            if not verdict.ok:
                raise ListeningError(
                    f"Example {clip.position + 1} of {len(clips)}: {verdict.reason}", 409
                )
    CategorySession.objects.filter(pk=session.pk, familiarized_at__isnull=True).update(
        familiarized_at=listening.now()
    )
    session.refresh_from_db()


def next_trial(session: CategorySession) -> Trial | None:
    """Where a rater resumes: the first trial without an answer."""
    return session.trials.filter(rating__isnull=True).order_by("position").first()


@dataclass(frozen=True)
class Resume:
    """Where a rater resumes a session: the first unanswered trial's token and position, the
    token of the sound after it (the page preloads it) and the session's length."""

    token: str
    position: int
    following: str | None
    total: int


def resume(session: CategorySession) -> Resume | None:
    """The trial page's view of a session in one query; None when every trial is answered."""
    trials = [
        (position, token, answer)
        for _, position, token, answer in lookups.session_trials(session.pk)
    ]
    pending = [(position, token) for position, token, answer in trials if answer is None]
    if not pending:
        return None
    position, token = pending[0]
    following = next((t for p, t, _ in trials if p > position), None)
    return Resume(token, position, following, len(trials))


def _check_value(name: str, value) -> int:
    if isinstance(value, bool):
        raise ListeningError(f"{name} must be an integer from 0 to 10.")
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise ListeningError(f"{name} must be an integer from 0 to 10.") from None
    if str(number) != str(value).strip() or not 0 <= number <= 10:
        raise ListeningError(f"{name} must be an integer from 0 to 10; got {value!r}.")
    return number


def _check_key(key) -> str:
    if not isinstance(key, str) or not KEY_PATTERN.match(key):
        raise ListeningError("A request key of 8 to 64 letters, digits, '-' or '_' is required.")
    return key


def save_rating(
    rater: Rater, token: str, *, quality, fit, key: str, require_heard: bool = False
) -> tuple[Rating, bool]:
    """Store the answer to one trial exactly once; returns the rating and whether it is new.

    The same key again (a double click, a retry, a resubmitted page) returns the stored rating
    unchanged. Bad values, another rater's trial, a closed session or a closed test are refused
    with nothing changed. With `require_heard` (the pages), the trial's sound must have been
    fetched by the rater's browser.
    """
    quality = _check_value("Quality", quality)
    fit = _check_value("Fit", fit)
    key = _check_key(key)
    test = listening_test(rater.challenge)
    with transaction.atomic():
        # Answers to one session are stored one at a time (its row is locked with the trial's
        # lookup): the answer that completes the session must see every other one, or the
        # session would stay open with nothing left to rate. The same query reads the sound as
        # delivered and the trial of an answer already stored with this key, if any.
        trial = lookups.trial_to_answer(token, test)
        if trial is None:
            raise ListeningError("No such trial.", 404)
        session = trial.session
        if session.rater_id != rater.pk:
            raise ListeningError("This trial belongs to another rater.", 403)
        session.rater = rater  # the one already read: no second query
        # Read after the session's lock: an answer with this key stored meanwhile is seen.
        keyed_trial = lookups.keyed_trial(key)
        if keyed_trial is not None:
            if keyed_trial != trial.pk:
                raise ListeningError("This request key was already used for another trial.", 409)
            return Rating.objects.get(idempotency_key=key), False
        # The first two unanswered trials: the one rated must be first (order), and whether a
        # second exists says if this answer completes the session.
        # Answers are stored in order, so a trial before the first unanswered one is answered.
        pending = lookups.first_unanswered(session.pk, 2)
        if trial.pk not in [pk for pk, _ in pending] and (
            not pending or trial.position < pending[0][1]
        ):
            raise ListeningError("This trial is already answered.", 409)
        if session.state != CategorySession.State.OPEN:
            raise ListeningError("This session is closed.", 409)
        test = _check_open(rater.challenge)
        if session.familiarized_at is None:
            raise ListeningError("The examples of this category come first.", 409)
        if pending[0][0] != trial.pk:
            # The counterbalanced order is part of the design; the page preloads the next
            # sound, so its token is known before its turn.
            raise ListeningError("Please rate the sounds in the order they are given.", 409)
        verdict = listening.listened(
            trial, delivery.delivered_of(trial, test).duration_s, test, rater=rater
        )
        if require_heard and not verdict.ok:
            raise ListeningError(verdict.reason, 409)
        rating = Rating.objects.create(
            trial=trial,
            quality=quality,
            fit=fit,
            idempotency_key=key,
            **_record(verdict, session.last_answer_at or session.familiarized_at),
        )
        closing = len(pending) == 1
        _answered(rater.challenge, session, rating.created_at, closing=closing)
    return rating, True


def _answered(challenge: Challenge, session: CategorySession, moment, *, closing: bool) -> None:
    """Keep the session's summary up to date in the answer's transaction: its latest answer,
    its verdict by the rater-quality rules (from its own answers), and its state."""
    ((excluded, judged),) = judge_sessions(
        challenge, [session], closing=session.pk if closing else 0
    ).values()
    fields = {"last_answer_at": moment, "excluded": excluded, "judged_with": judged}
    if closing:
        fields |= {"state": CategorySession.State.CLOSED, "closed_at": timezone.now()}
    CategorySession.objects.filter(pk=session.pk).update(**fields)
    for name, value in fields.items():
        setattr(session, name, value)


def closed_message(challenge: Challenge) -> str:
    """What a rater is told while the test is closed: ended for good, or paused."""
    challenge.refresh_from_db(fields=["phase"])
    if challenge.phase == Challenge.Phase.PUBLISHED:
        return (
            "The listening test has ended and its results are published. Thank you for taking part."
        )
    return (
        "The listening test is paused. Your answers are saved: come back through the same link "
        "when it reopens."
    )


def _check_open(challenge: Challenge) -> ListeningTest:
    """Refuse an answer while the test is closed; returns the test's settings. On PostgreSQL
    the test's row is read FOR SHARE and held until the answer commits, so closing the test
    (publishing) waits for answers under way and none lands after the ratings were read for
    publication."""
    test = None
    if connection.vendor == "postgresql":
        table = ListeningTest._meta.db_table
        test = next(
            iter(
                ListeningTest.objects.raw(
                    f"SELECT * FROM {table} WHERE challenge_id = %s FOR SHARE", [challenge.pk]
                )
            ),
            None,
        )
    test = test or listening_test(challenge)
    if not test.is_open:
        raise ListeningError(closed_message(challenge), 409)
    test.challenge = challenge
    return test


def _last_answer_at(answers):
    """When the latest of these answers was stored (None if there is none)."""
    return answers.order_by("-created_at").values_list("created_at", flat=True).first()


def _record(verdict: listening.Listened, turn_began) -> dict:
    """The listening data stored with an answer; time to answer counts from the item's turn (the
    previous answer, or the end of the examples)."""
    moment = listening.now()
    return {
        "plays": verdict.plays,
        "seeks": verdict.seeks,
        "heard_fraction": round(verdict.fraction, 4),
        "answer_s": round((moment - turn_began).total_seconds(), 3) if turn_began else None,
    }


def close_session(session: CategorySession) -> None:
    """Close a session whose trials are all answered (idempotent). Its stored verdict was of an
    unfinished session: it is judged again, as finished, before anything reads it."""
    CategorySession.objects.filter(pk=session.pk, state=CategorySession.State.OPEN).update(
        state=CategorySession.State.CLOSED, closed_at=timezone.now(), excluded=False, judged_with=""
    )
    session.refresh_from_db()


def finish(rater: Rater) -> None:
    """End the rater's part. Refused while work is owed: a category begun, or fewer categories
    than the minimum while more can be assigned; a paused test keeps them waiting, not finished,
    since a crowd worker who finishes is sent to the completion page."""
    if rater.finished_at is None and not rater.diversity_role:
        if rater.sessions.filter(state=CategorySession.State.OPEN).exists():
            raise ListeningError("Please finish the category you started first.", 409)
        if not rater_done(rater):
            test = listening_test(rater.challenge)
            if not test.is_open:
                raise ListeningError(
                    "The listening test is paused. Your answers are saved: come back through "
                    "the same link when it reopens.",
                    409,
                )
            if can_continue(rater):
                raise ListeningError(
                    f"Please rate at least {categories_for(rater, test)[0]} categories before "
                    "finishing.",
                    409,
                )
    if rater.finished_at is None:
        Rater.objects.filter(pk=rater.pk, finished_at__isnull=True).update(
            finished_at=timezone.now()
        )
        rater.refresh_from_db()


# --- Diversity -----------------------------------------------------------------------------------


def diversity_trials(rater: Rater) -> list[DiversityTrial]:
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
            pk=listening_test(rater.challenge).pk
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


def save_diversity_rating(
    rater: Rater, token: str, *, diversity, key: str, require_heard: bool = False
) -> tuple[DiversityRating, bool]:
    """Like `save_rating`, for one diversity file."""
    value = _check_value("Diversity", diversity)
    key = _check_key(key)
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
        test = _check_open(rater.challenge)
        verdict = listening.listened(
            trial, trial.item.audio.duration_s, test, what="file", rater=rater
        )
        if require_heard and not verdict.ok:
            raise ListeningError(verdict.reason, 409)
        turn_began = _last_answer_at(DiversityRating.objects.filter(trial__rater=rater))
        rating = DiversityRating.objects.create(
            trial=trial,
            diversity=value,
            idempotency_key=key,
            **_record(verdict, turn_began or rater.instructed_at),
        )
    return rating, True


def next_diversity_trial(rater: Rater) -> DiversityTrial | None:
    return rater.diversity_trials.filter(rating__isnull=True).order_by("position").first()


# --- Audio by token ------------------------------------------------------------------------------


def _other_sounds(rater: Rater) -> tuple[tuple[type, Q], ...]:
    """The kinds of sound a rater hears besides trials (`lookups.trial_of` reads those), each
    with the filter to the rater's own, in the order a listening test asks for them."""
    return (
        (FamiliarizationClip, Q(session__rater=rater)),
        (DiversityTrial, Q(rater=rater)),
        # The text-prompt protocol's sounds: a generated clip once it is made.
        (TextTrial, Q(judge__rater=rater, audio__isnull=False)),
        (PromptClip, Q(prompt_set__judge__rater=rater)),
    )


def _sound(
    rater: Rater, token: str, test: ListeningTest | None = None
) -> tuple[type, Heard, AudioFile]:
    """The row behind one of the rater's tokens and the audio its browser receives: one query
    for a trial, the most asked for."""
    test = test or listening_test(rater.challenge)
    trial = lookups.trial_of(rater, token, test)
    if trial is not None:
        return Trial, trial, delivery.delivered_of(trial, test)
    for model, owner in _other_sounds(rater):
        rows = model.objects.filter(owner, token=token)
        if model is DiversityTrial:  # rendered from delivered audio already
            row = rows.select_related("item__audio").first()
            if row is not None:
                return model, row, row.item.audio
            continue
        row = rows.select_related("audio").first()
        if row is not None:
            return model, row, delivery.delivered_audio(row.audio, test)
    raise ListeningError("No such audio.", 404)


def serve_audio(rater: Rater, token: str, range_header: str = "", *, sock=None) -> HttpResponse:
    """The delivered audio behind one of the rater's tokens. The bytes are recorded as sent
    once they have left the server (`delivery.Sent`, acknowledged on `sock` where it is known)
    or the web server in front (its receipt); a range already recorded is not written again."""
    model, row, audio = _sound(rater, token)

    def sent(start: int, end: int, size: int) -> None:
        if not listening.recorded(row, start, end, size):
            listening.record_delivery(model, row, start, end, size)

    # A sound already delivered whole (preloaded, then fetched again in its turn) needs no
    # receipt: nginx then skips the report.
    whole = row.delivered_at is not None
    return delivery.audio_response(
        audio,
        range_header,
        sent=None if whole else sent,
        receipt_for=None if whole else (listening.KIND_OF[model], row.pk),
        sock=sock,
    )


def redeem_receipt(value: str, completion: str, bytes_sent: str) -> None:
    """Record a delivery that the web server in front reports finished (`delivery.redeem`)."""
    redeemed = delivery.redeem(value, completion, bytes_sent)
    if redeemed is None:
        return
    kind, pk, start, end, size = redeemed
    model = listening.KINDS[kind]
    row = model.objects.filter(pk=pk).first()
    if row is not None and not listening.recorded(row, start, end, size):
        listening.record_delivery(model, row, start, end, size)


def player_event(rater: Rater, token: str, kind: str, t, *, seek_from=None) -> listening.Listened:
    """One event of the page's player (play, pause, seeking, timeupdate, ended) for one of the
    rater's sounds; returns the server's verdict on it so far."""
    model, row, audio = _sound(rater, token)
    row = listening.record_event(rater, model, row, kind, t, audio.duration_s, seek_from=seek_from)
    what = {FamiliarizationClip: "example", DiversityTrial: "file"}.get(model, "sound")
    return listening.listened(
        row, audio.duration_s, listening_test(rater.challenge), what=what, rater=rater
    )


def page_shown(rater: Rater) -> None:
    """A page of the rater's sounds (re)loaded: nothing is playing any more."""
    listening.page_shown(rater)


def listened_now(
    rater: Rater, token: str, test: ListeningTest | None = None
) -> tuple[Heard, listening.Listened]:
    """One of the rater's sounds (by its token) as it is now, with the server's verdict on it,
    for the page to open its scales."""
    test = test or listening_test(rater.challenge)
    _, row, audio = _sound(rater, token, test)
    return row, listening.listened(row, audio.duration_s, test, rater=rater)


def shown_now(
    rater: Rater, token: str, test: ListeningTest | None = None
) -> tuple[Heard, listening.Listened]:
    """A page showing one of the rater's sounds (re)loaded: whatever was playing stops (written
    only when something was), and the sound as it is now with the server's verdict."""
    listening.page_shown(rater)
    return listened_now(rater, token, test)


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
