"""A category session of the pairs design: its A/B trials, chosen by the pair schedule.

A session holds the test's `pairs_per_session` A/B trials of its category, spread over the
category's tracks by how many pairs of systems each has (a vote compares two systems of one
track). Which systems meet, and which goes on the left (A), is `pair_schedule.next_pairs`'s:
every pair of systems once before any pair twice, then pairs whose order the votes so far leave
uncertain, with each system's share of the votes capped and sides counterbalanced; its seed is
the category's id, so the schedule is reproducible from what was served and voted. Of a system's
stimuli in the category, the one its sessions have served least goes in (then the session's
seed), and the session's A/B trials are ordered as the sliders' trials are (`design`). The
test's `anchor_pairs_per_session` hidden anchors come as A/B trials of their own, an anchor
against a stimulus of the category, spread evenly among the others, the anchor's side
alternating: the poor-fit kinds, whose answers are known (`vote_rules.KNOWN_ANSWERS`). Its
`gold_per_session` gold A/B trials pair a built-in trapping sound asking for a vote (this sound,
the other, or a tie, on both questions) with a stimulus, at places and on sides drawn from the
session's secret seed, never first.

A rater of a team is never served a pair with one of the team's systems: the scoring would
remove the vote (a self-vote), so the rater's time goes to pairs it can use.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

from django.db.models import Q
from scipy.special import betainc

from stimuli.models import Category, Challenge

from . import gold
from .design import counterbalanced_order, spread_slots
from .errors import ListeningError
from .models import (
    Anchor,
    CategorySession,
    GoldSound,
    ListeningTest,
    Pair,
    Rater,
    Stimulus,
    Trial,
    Vote,
)
from .pair_schedule import next_pairs

# The kinds of hidden anchor an A/B trial pairs with a stimulus: those with a known answer
# (raters.vote_rules.KNOWN_ANSWERS), low quality first.
ANCHOR_PAIR_KINDS = ("lq_poorfit", "hq_poorfit")


def pairs_of_systems(k: int) -> int:
    return k * (k - 1) // 2


def _systems_by_track(category: Category, rater: Rater | None = None) -> dict[int, list[int]]:
    """Per track, the systems (ids) with stimuli in the category; a rater's own team's left
    out."""
    found: dict[int, set[int]] = defaultdict(set)
    rows = Stimulus.objects.filter(category=category).values_list(
        "system_id", "system__track_id", "system__team_id"
    )
    for system, track, team in rows:
        if rater is None or rater.team_id is None or team != rater.team_id:
            found[track].add(system)
    return {track: sorted(systems) for track, systems in sorted(found.items())}


def sessions_wanted(challenge: Challenge, test: ListeningTest) -> dict[int, int]:
    """Per category, the sessions that give every pair of its systems (within a track) the
    test's `target_votes` votes."""
    systems: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    rows = Stimulus.objects.filter(challenge=challenge).values_list(
        "category_id", "system__track_id", "system_id"
    )
    for category, track, system in rows:
        systems[category][track].add(system)
    return {
        category: math.ceil(
            test.target_votes
            * sum(pairs_of_systems(len(s)) for s in tracks.values())
            / test.pairs_per_session
        )
        for category, tracks in systems.items()
    }


def split(count: int, weights: dict[int, int]) -> dict[int, int]:
    """`count` spread over the keys in proportion to their weights (largest remainders, ties
    by key): every key with a weight gets its share, and the shares add up to `count`."""
    total = sum(weights.values())
    exact = {key: count * w / total for key, w in weights.items()}
    shares = {key: math.floor(x) for key, x in exact.items()}
    left = count - sum(shares.values())
    for key in sorted(exact, key=lambda key: (shares[key] - exact[key], key))[:left]:
        shares[key] += 1
    return shares


def _counted(category: Category) -> Q:
    """The A/B trials of the category that count as served: voted in a session the
    rater-quality rules keep, or still to be voted in an open session."""
    return Q(session__category=category, left__role="trial", right__role="trial") & (
        Q(vote__isnull=False, session__excluded=False)
        | Q(vote__isnull=True, session__state=CategorySession.State.OPEN)
    )


def served(category: Category) -> dict[tuple[str, str], int]:
    """Per (left, right) system ids as text, the A/B trials served so far."""
    rows = Pair.objects.filter(_counted(category)).values_list(
        "left__stimulus__system_id", "right__stimulus__system_id"
    )
    return dict(Counter((str(left), str(right)) for left, right in rows))


def uncertainty(category: Category) -> dict[tuple[str, str], float] | None:
    """Per pair of systems with votes, the probability that its votes so far order the two
    wrong: under a uniform prior on the share of answers the first system wins (a tie half to
    each), the posterior mass on the other side of one half. None before any vote: the schedule
    keeps to coverage. The scoring's own fit is not read here (the raters' app cannot import the
    scoring's); a pair's own votes say how settled its order is."""
    tally: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    rows = Vote.objects.filter(
        pair__session__category=category,
        pair__session__excluded=False,
        pair__left__role="trial",
        pair__right__role="trial",
    ).values_list(
        "pair__left__stimulus__system_id", "pair__right__stimulus__system_id", "quality", "fit"
    )
    for left, right, *answers in rows:
        a, b = sorted((str(left), str(right)))
        for winner in answers:
            if winner == "tie":
                tally[(a, b)][0] += 0.5
                tally[(a, b)][1] += 0.5
            else:
                won = str(left) if winner == "left" else str(right)
                tally[(a, b)][0 if won == a else 1] += 1
    if not tally:
        return None
    out = {}
    for pair, (wins_a, wins_b) in tally.items():
        below = float(betainc(1 + wins_a, 1 + wins_b, 0.5))  # P(a's share < 1/2)
        out[pair] = min(below, 1.0 - below)
    return out


def _stimulus_for(
    system: int, pool: dict[int, list[Stimulus]], used: Counter, rng: random.Random
) -> Stimulus:
    """The system's stimulus its sessions served least; ties drawn."""
    choices = pool[system]
    fewest = min(used[s.pk] for s in choices)
    stimulus = rng.choice([s for s in choices if used[s.pk] == fewest])
    used[stimulus.pk] += 1
    return stimulus


def add_pairs(session: CategorySession, test: ListeningTest, *, blocks: int) -> list[Pair]:
    """The session's A/B trials, stored: each a pair of trials (A at position 2k, B at 2k + 1)
    and the pair at position k. In the caller's transaction, under the test's lock (one session
    built at a time, so two never take the same place in the schedule)."""
    category = session.category
    tracks = {
        track: systems
        for track, systems in _systems_by_track(category, session.rater).items()
        if len(systems) >= 2
    }
    if not tracks:
        raise ListeningError(f"No two systems to compare in {category.slug}.", 409)
    counts = split(test.pairs_per_session, {t: pairs_of_systems(len(s)) for t, s in tracks.items()})
    so_far, doubt = served(category), uncertainty(category)
    chosen: list[tuple[int, int]] = []
    for track, systems in tracks.items():
        names = [str(s) for s in systems]
        for left, right in next_pairs(names, so_far, doubt, counts[track], seed=category.pk):
            chosen.append((int(left), int(right)))
    pool: dict[int, list[Stimulus]] = defaultdict(list)
    for stimulus in (
        Stimulus.objects.filter(category=category).select_related("clip").order_by("id")
    ):
        pool[stimulus.system_id].append(stimulus)
    used = Counter(
        Trial.objects.filter(session__category=category, stimulus__isnull=False).values_list(
            "stimulus_id", flat=True
        )
    )
    rng = random.Random(session.seed)
    order = counterbalanced_order(
        len(chosen), blocks=blocks, row=session.latin_row, seed=session.seed
    )
    sides: list[tuple[Stimulus | Anchor | GoldSound, Stimulus | Anchor | GoldSound]] = [
        (_stimulus_for(left, pool, used, rng), _stimulus_for(right, pool, used, rng))
        for left, right in (chosen[index] for index in order)
    ]
    anchors = _anchors(category, test.anchor_pairs_per_session, rng)
    slots = set(spread_slots(len(sides) + len(anchors), len(anchors)))
    systems = [system for track in tracks.values() for system in track]
    # The anchor's side alternates from a drawn start, so A and B each hold half of them.
    start = rng.randrange(2)
    items, stimulus_pairs, anchor_pairs = [], iter(sides), iter(enumerate(anchors))
    for position in range(len(sides) + len(anchors)):
        if position not in slots:
            items.append(next(stimulus_pairs))
            continue
        k, anchor = next(anchor_pairs)
        stimulus = _stimulus_for(rng.choice(systems), pool, used, rng)
        items.append((anchor, stimulus) if (start + k) % 2 == 0 else (stimulus, anchor))
    # Gold A/B trials: a trapping sound asking for a vote against a stimulus of the category, at
    # places and on sides drawn from the session's secret seed (never first, as for sliders).
    secret = random.Random(session.seed ^ 0x601D)
    for sound in gold.take_builtin(category.challenge, test.gold_per_session, secret):
        stimulus = _stimulus_for(secret.choice(systems), pool, used, secret)
        both = (sound, stimulus) if secret.random() < 0.5 else (stimulus, sound)
        items.insert(secret.randint(1, len(items)), both)
    trials = [
        _trial(session, 2 * position + side, item)
        for position, pair in enumerate(items)
        for side, item in enumerate(pair)
    ]
    made = Trial.objects.bulk_create(trials)
    return Pair.objects.bulk_create(
        [
            Pair(session=session, position=k, left=made[2 * k], right=made[2 * k + 1])
            for k in range(len(items))
        ]
    )


def _trial(session: CategorySession, position: int, item: Stimulus | Anchor | GoldSound) -> Trial:
    if isinstance(item, GoldSound):
        return Trial(
            session=session,
            position=position,
            role=Trial.Role.GOLD,
            gold=item,
            audio_id=item.audio_id,
        )
    if isinstance(item, Anchor):
        return Trial(
            session=session,
            position=position,
            role=f"anchor_{item.kind}",
            anchor=item,
            audio_id=item.audio_id,
        )
    return Trial(
        session=session,
        position=position,
        role=Trial.Role.TRIAL,
        stimulus=item,
        audio_id=item.clip.audio_id,
    )


def _anchors(category: Category, count: int, rng: random.Random) -> list[Anchor]:
    """The session's hidden anchors for A/B trials: the poor-fit kinds alternating, low quality
    first (their answers are known), each pool drawn in the session's own order."""
    pools = {}
    for kind in ANCHOR_PAIR_KINDS[: min(count, len(ANCHOR_PAIR_KINDS))]:
        pool = list(Anchor.objects.filter(category=category, kind=kind).order_by("id"))
        if not pool:
            raise ListeningError(
                f"No {kind} anchors for {category.slug}; preparation.prepare the test.", 409
            )
        rng.shuffle(pool)
        pools[kind] = pool
    return [
        pools[kind][(k // len(ANCHOR_PAIR_KINDS)) % len(pools[kind])]
        for k in range(count)
        for kind in [ANCHOR_PAIR_KINDS[k % len(ANCHOR_PAIR_KINDS)]]
    ]
