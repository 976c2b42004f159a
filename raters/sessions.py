"""A rater's sessions: which category comes next, counterbalanced sessions with their anchors and
gold trials, the examples, and every answer stored exactly once with its verdict by the
rater-quality rules."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from stimuli.models import Category, Challenge, Clip

from . import (
    delivery,
    gold,
    listening,
    pair_sessions,
    screening,
    selectors,
    statements,
)
from .design import counterbalanced_order, spread_slots
from .errors import ListeningError
from .models import (
    PAIRS,
    Anchor,
    CategorySession,
    FamiliarizationClip,
    ListeningTest,
    Rater,
    Rating,
    Stimulus,
    Trial,
)

# Blocks of the balanced Latin square over a session.
SESSION_BLOCKS = 8
# An open session holds its place in the assignment while its rater is at work: its first answer
# within this long of its start (the examples take a minute or two), then an answer at least
# this often. A link opened and left, by a careless worker or by someone holding places, frees
# its place soon.
FIRST_ANSWER_WITHIN = timedelta(minutes=10)
ABANDONED_AFTER = timedelta(minutes=15)
# A crowd worker's session holds a place only once the server heard its examples played to
# their ends (screening comes before any session), and then its first answer within this long:
# a throw-away participant id that plays nothing holds no place at all, however many there are.
CROWD_FIRST_ANSWER_WITHIN = timedelta(minutes=5)
KEY_PATTERN = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


def familiarization_pool(challenge: Challenge, category: Category) -> set[int]:
    """The category's examples: development clips spread evenly over the set (uploads are often
    ordered by name, so the first few could all be alike), the same for every rater."""
    test = selectors.listening_test(challenge)
    ids = list(
        Clip.objects.filter(category=category, role=Clip.Role.DEVELOPMENT)
        .order_by("id")
        .values_list("pk", flat=True)
    )
    n = min(test.familiarization_clips, len(ids))
    return {ids[int((k + 0.5) * len(ids) / n)] for k in range(n)}


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
    `FIRST_ANSWER_WITHIN` and not answered yet; a crowd worker's only once its examples were
    heard, in the last `CROWD_FIRST_ANSWER_WITHIN`), and only when the rater is not of
    the stimulus's team (scoring removes ratings of one's own systems). An abandoned or excluded
    session leaves its place to another rater.

    Read from what each answer keeps up to date on its session (`last_answer_at`, `excluded`):
    one row per category and team, never the challenge's ratings. Verdicts assessed by rules
    that have changed since are assessed again first.
    """
    test = selectors.listening_test(challenge)
    if test.design == PAIRS:
        return _pair_sessions_needed(challenge, test)
    teams: dict[int, list[int | None]] = {}
    for category_id, team_id in Stimulus.objects.filter(challenge=challenge).values_list(
        "category_id", "system__team_id"
    ):
        teams.setdefault(category_id, []).append(team_id)
    reassess_stale(challenge)
    moment = timezone.now()
    counting: dict[int, dict[int | None, int]] = {}
    for category_id, team_id, n in (
        CategorySession.objects.filter(rater__challenge=challenge, excluded=False)
        .filter(holding_places(moment))
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


def _pair_sessions_needed(challenge: Challenge, test: ListeningTest) -> dict[int, int]:
    """The pairs design's need: per category, the sessions still wanted for every pair of its
    systems to reach the target in votes (`pair_sessions.sessions_wanted`), less the sessions
    holding places and not excluded (as `category_need` counts them)."""
    wanted = pair_sessions.sessions_wanted(challenge, test)
    reassess_stale(challenge)
    holding = dict(
        CategorySession.objects.filter(rater__challenge=challenge, excluded=False)
        .filter(holding_places(timezone.now()))
        .order_by()
        .values("category_id")
        .annotate(n=Count("id"))
        .values_list("category_id", "n")
    )
    return {category: max(0, n - holding.get(category, 0)) for category, n in wanted.items()}


def holding_places(moment) -> Q:
    """The sessions that hold their places at `moment` (see `category_need`)."""
    unanswered = Q(last_answer_at__isnull=True, state=CategorySession.State.OPEN)
    crowd = Q(rater__kind=Rater.Kind.CROWD)
    return (
        Q(state=CategorySession.State.CLOSED)
        | Q(last_answer_at__gte=moment - ABANDONED_AFTER)
        | (unanswered & ~crowd & Q(created_at__gte=moment - FIRST_ANSWER_WITHIN))
        | (unanswered & crowd & Q(familiarized_at__gte=moment - CROWD_FIRST_ANSWER_WITHIN))
    )


def starting_sessions(challenge: Challenge) -> dict[int, int]:
    """Per category, the crowd sessions begun lately whose examples were not heard yet: they
    hold no place, but spread the next workers over the categories."""
    moment = timezone.now()
    return dict(
        CategorySession.objects.filter(
            rater__challenge=challenge,
            rater__kind=Rater.Kind.CROWD,
            state=CategorySession.State.OPEN,
            familiarized_at__isnull=True,
            created_at__gte=moment - FIRST_ANSWER_WITHIN,
        )
        .order_by()
        .values("category_id")
        .annotate(n=Count("id"))
        .values_list("category_id", "n")
    )


def rated_categories(challenge: Challenge) -> int:
    """How many categories have stimuli (a rater cannot be asked for more)."""
    return (
        Stimulus.objects.filter(challenge=challenge)
        .order_by()
        .values("category_id")
        .distinct()
        .count()
    )


def assess_sessions(
    challenge: Challenge, sessions: list[CategorySession], *, rules=None, closing: int = 0
) -> dict[int, tuple[bool, str]]:
    """Judge these sessions by the rater-quality rules from their own answers only; returns
    {session id: (excluded, rules key)}. `closing` names a session being closed by the answer
    under way (assessed as finished)."""
    rules = rules or selectors.rater_rules(challenge)
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


def reassess_stale(challenge: Challenge) -> int:
    """Judge again the answered sessions whose stored verdict is by other rules than the
    current ones (the organizers changed them, or the session predates stored verdicts)."""
    rules = selectors.rater_rules(challenge)
    key = selectors.rules_key(rules)
    stale = CategorySession.objects.filter(
        rater__challenge=challenge, last_answer_at__isnull=False
    ).exclude(assessed_with=key)
    if not stale.exists():
        return 0
    with transaction.atomic():
        # Locked as a save locks them, so an answer stored meanwhile is assessed with the others,
        # never overwritten by a verdict read before it.
        sessions = list(stale.select_related("rater").select_for_update(of=("self",), no_key=True))
        verdicts = assess_sessions(challenge, sessions, rules=rules)
        for flag in (True, False):  # two statements, however many sessions
            CategorySession.objects.filter(
                pk__in=[pk for pk, (excluded, _) in verdicts.items() if excluded is flag]
            ).update(excluded=flag, assessed_with=key)
    return len(sessions)


def next_session(rater: Rater) -> NextStep:
    """The rater's open session, or a newly assigned one: least-rated categories first, so every
    stimulus reaches the target with as little listening as possible."""
    if rater.diversity_role:
        raise ListeningError("Diversity raters rate no quality or fit.", 403)
    # No category before the screening is cleared (a rater screened out gets none).
    screening.require_cleared(rater)
    test = selectors.listening_test(rater.challenge)
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
        # Ties are broken by the rater's own order, so equal categories spread across raters;
        # crowd workers still at the examples steer the choice but hold no place.
        tie = random.Random(rater.index)
        starting = starting_sessions(rater.challenge)
        shuffled = sorted(wanted, key=lambda c: (-need[c] + starting.get(c, 0), tie.random()))
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
    test = selectors.listening_test(rater.challenge)
    closed = rater.sessions.filter(state=CategorySession.State.CLOSED).count()
    return closed >= min(categories_for(rater, test)[0], rated_categories(rater.challenge))


def can_continue(rater: Rater) -> bool:
    """Whether another category would still be assigned to the rater."""
    test = selectors.listening_test(rater.challenge)
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
            raise ListeningError(
                f"No {kind} anchors for {category.slug}; preparation.prepare the test.", 409
            )
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
    """Create the session with its familiarization clips and counterbalanced trials (the pairs
    design: its A/B trials, `pair_sessions.add_pairs`)."""
    test = selectors.listening_test(rater.challenge)
    with transaction.atomic():
        # Max, not count: a deleted rater's sessions must not make two sessions share a row.
        last = CategorySession.objects.filter(category=category).aggregate(n=Max("ordinal"))["n"]
        ordinal = 0 if last is None else last + 1
        session = CategorySession.objects.create(
            rater=rater, category=category, order=order, ordinal=ordinal, latin_row=ordinal
        )
        if test.design == PAIRS:
            pair_sessions.add_pairs(session, test, blocks=SESSION_BLOCKS)
        else:
            _add_trials(session, test)
        pool = familiarization_pool(rater.challenge, category)
        FamiliarizationClip.objects.bulk_create(
            [
                FamiliarizationClip(session=session, position=n, audio=clip.audio)
                for n, clip in enumerate(
                    Clip.objects.filter(pk__in=pool).select_related("audio").order_by("id")
                )
            ]
        )
    return session


def _add_trials(session: CategorySession, test: ListeningTest) -> None:
    """The slider design's trials of a new session: its stimuli and anchors in counterbalanced
    order, with its gold trials."""
    category = session.category
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


def complete_familiarization(session: CategorySession, *, require_heard: bool = True) -> None:
    """Open the trials once the server can vouch that every example was heard."""
    if session.familiarized_at:
        return
    if require_heard:
        test = selectors.listening_test(session.rater.challenge)
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
        for _, position, token, answer in statements.session_trials(session.pk)
    ]
    pending = [(position, token) for position, token, answer in trials if answer is None]
    if not pending:
        return None
    position, token = pending[0]
    following = next((t for p, t, _ in trials if p > position), None)
    return Resume(token, position, following, len(trials))


def check_value(name: str, value) -> int:
    if isinstance(value, bool):
        raise ListeningError(f"{name} must be an integer from 0 to 10.")
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise ListeningError(f"{name} must be an integer from 0 to 10.") from None
    if str(number) != str(value).strip() or not 0 <= number <= 10:
        raise ListeningError(f"{name} must be an integer from 0 to 10; got {value!r}.")
    return number


def check_key(key) -> str:
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
    quality = check_value("Quality", quality)
    fit = check_value("Fit", fit)
    key = check_key(key)
    test = selectors.listening_test(rater.challenge)
    with transaction.atomic():
        # Answers to one session are stored one at a time (its row is locked with the trial's
        # lookup): the answer that completes the session must see every other one, or the
        # session would stay open with nothing left to rate. The same statement reads the sound
        # as delivered and the test as it is now, held until the answer commits (closing the
        # test, as publishing does, waits for answers under way: none lands after the ratings
        # were read for publication).
        found = statements.trial_to_answer(token, test)
        if found is None:
            raise ListeningError("No such trial.", 404)
        trial, test = found
        session = trial.session
        if session.rater_id != rater.pk:
            raise ListeningError("This trial belongs to another rater.", 403)
        if test.design == PAIRS:
            # Its trials are the sides of A/B trials, answered by votes (`raters.votes`).
            raise ListeningError("This listening test asks for votes on A/B trials.", 409)
        session.rater = rater  # the one already read: no second query
        # Read after the session's lock: an answer with this key stored meanwhile is seen. The
        # first two unanswered trials: the one rated must be first (order), and whether a
        # second exists says if this answer completes the session.
        keyed_trial, pending = statements.keyed_and_unanswered(key, session.pk)
        if keyed_trial is not None:
            if keyed_trial != trial.pk:
                raise ListeningError("This request key was already used for another trial.", 409)
            return Rating.objects.get(idempotency_key=key), False
        # Answers are stored in order, so a trial before the first unanswered one is answered.
        if trial.pk not in [pk for pk, _ in pending] and (
            not pending or trial.position < pending[0][1]
        ):
            raise ListeningError("This trial is already answered.", 409)
        if session.state != CategorySession.State.OPEN:
            raise ListeningError("This session is closed.", 409)
        if not test.is_open:
            raise ListeningError(closed_message(rater.challenge), 409)
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
        values = {
            "trial": trial.pk,
            "quality": quality,
            "fit": fit,
            "idempotency_key": key,
            "created_at": timezone.now(),
            **answer_record(verdict, session.last_answer_at or session.familiarized_at),
        }
        pk = statements.insert(Rating, values)
        rating = Rating(pk=pk, trial=trial, **{k: v for k, v in values.items() if k != "trial"})
        closing = len(pending) == 1
        answered(rater.challenge, session, rating.created_at, closing=closing)
    return rating, True


def answered(challenge: Challenge, session: CategorySession, moment, *, closing: bool) -> None:
    """Keep the session's summary up to date in the answer's transaction: its latest answer,
    its verdict by the rater-quality rules (from its own answers), and its state."""
    ((excluded, key),) = assess_sessions(
        challenge, [session], closing=session.pk if closing else 0
    ).values()
    fields = {"last_answer_at": moment, "excluded": excluded, "assessed_with": key}
    if closing:
        fields |= {"state": CategorySession.State.CLOSED, "closed_at": timezone.now()}
    statements.update(CategorySession, session.pk, fields)
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


def check_open(challenge: Challenge) -> ListeningTest:
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
    test = test or selectors.listening_test(challenge)
    if not test.is_open:
        raise ListeningError(closed_message(challenge), 409)
    test.challenge = challenge
    return test


def last_answer_at(answers):
    """When the latest of these answers was stored (None if there is none)."""
    return answers.order_by("-created_at").values_list("created_at", flat=True).first()


def answer_record(verdict: listening.Listened, turn_began) -> dict:
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
    unfinished session: it is assessed again, as finished, before anything reads it."""
    CategorySession.objects.filter(pk=session.pk, state=CategorySession.State.OPEN).update(
        state=CategorySession.State.CLOSED,
        closed_at=timezone.now(),
        excluded=False,
        assessed_with="",
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
            test = selectors.listening_test(rater.challenge)
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
