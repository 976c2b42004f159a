"""The pairs design's A/B trials: sessions built by the pair schedule (coverage, then where the
votes leave the order uncertain; sides counterbalanced; never a rater's own team), votes stored
exactly once and refused until the server heard both sides, and the rater-quality rules on
votes. The clock is the test's, so nothing sleeps."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from django.db import IntegrityError, transaction

from raters import (
    enrolment,
    gold,
    listening,
    pair_sessions,
    preparation,
    selectors,
    sessions,
    votes,
)
from raters.errors import ListeningError
from raters.models import GOLD_VOTES, CategorySession, Pair, Rating, Stimulus, Trial, Vote
from raters.pair_schedule import next_pairs
from raters.rules import RaterRules, assess
from raters.vote_rules import PAIR
from scoring.rules import Rules
from scoring.votes import score_votes
from tests.listening_setup import Clock, deliver
from tests.pairs_setup import build_pairs_challenge, vote_session

pytestmark = pytest.mark.django_db

DURATION = 1.0


@pytest.fixture
def pairs(db):
    challenge = build_pairs_challenge(duration=DURATION)
    preparation.set_open(challenge, True)
    return challenge


def _rater(challenge, n: int = 0, team=None):
    rater = enrolment.invite(challenge, label=f"voter {n}")
    if team is not None:
        rater.team = team
        rater.save(update_fields=["team"])
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    return rater


def _at_first_pair(challenge, n: int = 0):
    rater = _rater(challenge, n)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    return rater, session


def _systems(pair: Pair) -> tuple[int, int]:
    return pair.left.stimulus.system_id, pair.right.stimulus.system_id


def _hear(rater, trial: Trial, clock: Clock) -> None:
    """A side delivered whole and played once to its end in real time (the test's clock)."""
    deliver(rater, trial.token)
    listening.player_event(rater, trial.token, "play", 0)
    clock.advance(DURATION)
    assert listening.player_event(rater, trial.token, "ended", DURATION).ok


# --- Sessions ------------------------------------------------------------------------------------


def test_a_session_holds_its_a_b_trials_two_systems_of_one_track_and_its_examples(pairs):
    _, session = _at_first_pair(pairs)
    test = selectors.listening_test(pairs)
    made = list(session.pairs.select_related("left__stimulus__system", "right__stimulus__system"))
    assert len(made) == test.pairs_per_session == 6
    assert [p.position for p in made] == list(range(6))
    # Each side a trial of the session, A at 2k and B at 2k + 1; no anchors, no gold yet.
    trials = list(session.trials.order_by("position"))
    assert len(trials) == 12 and {t.role for t in trials} == {"trial"}
    for pair in made:
        assert (pair.left.position, pair.right.position) == (
            2 * pair.position,
            2 * pair.position + 1,
        )
        left, right = pair.left.stimulus, pair.right.stimulus
        assert left.category_id == right.category_id == session.category_id
        assert left.system_id != right.system_id
        assert left.system.track_id == right.system.track_id
        assert pair.token not in (pair.left.token, pair.right.token)
    assert session.familiarization.count() == test.familiarization_clips


def test_coverage_first_then_every_pair_again_with_its_sides_swapped(pairs):
    category = pairs.categories.order_by("position").first()
    seen = Counter()
    for n in range(2):
        # Open sessions not voted yet: their A/B trials count as served, and with no vote the
        # schedule keeps to coverage rounds.
        session = sessions.build_session(_rater(pairs, n), category, order=0)
        served = [
            _systems(p) for p in session.pairs.select_related("left__stimulus", "right__stimulus")
        ]
        # Three systems a track, two tracks: the six pairs, each once, in every session.
        assert len({frozenset(p) for p in served}) == 6
        seen.update(served)
    # Over the two sessions each pair was served once with each system on the left (A).
    assert set(seen.values()) == {1} and len(seen) == 12


def test_the_schedule_is_the_pair_schedules_from_the_categorys_seed(pairs):
    category = pairs.categories.order_by("position").first()
    rater = _rater(pairs)
    session = sessions.build_session(rater, category, order=0)
    expected = set()
    for systems in pair_sessions._systems_by_track(category).values():
        names = [str(s) for s in systems]
        expected |= {(int(a), int(b)) for a, b in next_pairs(names, {}, None, 3, seed=category.pk)}
    served = {
        _systems(p) for p in session.pairs.select_related("left__stimulus", "right__stimulus")
    }
    assert served == expected


def test_after_coverage_the_votes_steer_the_schedule(pairs):
    category = pairs.categories.order_by("position").first()
    rater = _rater(pairs)
    session = sessions.build_session(rater, category, order=0)
    order = {s: n for n, s in enumerate(sorted({s.system_id for s in Stimulus.objects.all()}))}

    def by_id(pair):  # the lower system id always wins, on both questions
        left, right = _systems(pair)
        winner = "left" if order[left] < order[right] else "right"
        return winner, winner

    vote_session(rater, session, by_id)
    doubt = pair_sessions.uncertainty(category)
    assert doubt is not None and len(doubt) == 6
    # Two answers each way for one pair: settled but far from certain (under a uniform prior).
    assert all(0 < p < 0.5 for p in doubt.values())
    assert pair_sessions.served(category) and sum(pair_sessions.served(category).values()) == 6


def test_a_rater_of_a_team_is_never_served_its_own_teams_systems(pairs):
    team = Stimulus.objects.select_related("system__team").first().system.team
    rater = _rater(pairs, team=team)
    session = sessions.next_session(rater).session
    teams = set(
        Trial.objects.filter(session=session).values_list("stimulus__system__team_id", flat=True)
    )
    assert team.pk not in teams and teams


def test_the_need_counts_sessions_for_the_votes_wanted_per_pair(pairs):
    test = selectors.listening_test(pairs)
    test.target_votes = 4
    test.save()
    # 6 pairs of systems a category, 4 votes each, 6 A/B trials a session: 4 sessions.
    assert set(pair_sessions.sessions_wanted(pairs, test).values()) == {4}
    assert set(sessions.category_need(pairs).values()) == {4}
    _, session = _at_first_pair(pairs)
    need = sessions.category_need(pairs)
    assert need[session.category_id] == 3


def test_the_design_is_fixed_once_raters_have_begun(pairs):
    assert preparation.design_refusal(pairs, ["design", "pairs_per_session"]) is None
    _at_first_pair(pairs)
    refusal = preparation.design_refusal(pairs, ["design", "pairs_per_session"])
    assert refusal.startswith("design, pairs_per_session cannot change once raters have begun")


def test_split_shares_a_count_by_weight():
    assert pair_sessions.split(6, {1: 3, 2: 3}) == {1: 3, 2: 3}
    assert pair_sessions.split(5, {1: 1, 2: 3}) == {1: 1, 2: 4}
    assert sum(pair_sessions.split(7, {1: 10, 2: 6, 3: 1}).values()) == 7


# --- Votes ---------------------------------------------------------------------------------------


def test_the_same_key_never_makes_a_second_vote(pairs):
    rater, session = _at_first_pair(pairs)
    pair = votes.resume(session).pair
    first, created = votes.save_vote(rater, pair.token, quality="left", fit="tie", key="vote-0001")
    again, created_again = votes.save_vote(
        rater, pair.token, quality="right", fit="right", key="vote-0001"
    )
    assert created and not created_again
    assert again.pk == first.pk and (again.quality, again.fit) == ("left", "tie")
    with pytest.raises(ListeningError) as exc:
        votes.save_vote(rater, pair.token, quality="right", fit="right", key="vote-0002")
    assert exc.value.status == 409 and "already answered" in exc.value.message
    following = votes.resume(session).pair
    with pytest.raises(ListeningError) as exc:
        votes.save_vote(rater, following.token, quality="tie", fit="tie", key="vote-0001")
    assert exc.value.status == 409
    assert Vote.objects.count() == 1 and Vote.objects.get().quality == "left"


def test_the_database_holds_one_vote_per_a_b_trial_and_valid_answers(pairs):
    rater, session = _at_first_pair(pairs)
    pair = votes.resume(session).pair
    votes.save_vote(rater, pair.token, quality="left", fit="left", key="vote-db-01")
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.create(pair=pair, quality="right", fit="right", idempotency_key="vote-db-02")
    other = votes.resume(session).pair
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.create(pair=other, quality="A", fit="left", idempotency_key="vote-db-03")
    with pytest.raises(IntegrityError), transaction.atomic():
        Pair.objects.create(session=session, position=99, left=other.left, right=other.left)


@pytest.mark.parametrize("quality", ["A", "", None, "LEFT ", 1, "both"])
def test_answers_other_than_left_right_or_tie_are_refused(pairs, quality):
    rater, session = _at_first_pair(pairs)
    pair = votes.resume(session).pair
    with pytest.raises(ListeningError) as exc:
        votes.save_vote(rater, pair.token, quality=quality, fit="left", key="vote-bad-1")
    assert exc.value.status == 400
    assert not Vote.objects.exists()


def test_votes_are_given_in_order_after_the_examples_while_the_test_is_open(pairs):
    rater = _rater(pairs)
    session = sessions.next_session(rater).session
    first, second = list(session.pairs.order_by("position"))[:2]
    with pytest.raises(ListeningError, match="examples of this category come first"):
        votes.save_vote(rater, first.token, quality="left", fit="left", key="order-0001")
    sessions.complete_familiarization(session, require_heard=False)
    with pytest.raises(ListeningError, match="in the order they are given"):
        votes.save_vote(rater, second.token, quality="left", fit="left", key="order-0002")
    other = _rater(pairs, 1)
    with pytest.raises(ListeningError) as exc:
        votes.save_vote(other, first.token, quality="left", fit="left", key="order-0003")
    assert exc.value.status == 403
    preparation.set_open(pairs, False)
    with pytest.raises(ListeningError, match="paused"):
        votes.save_vote(rater, first.token, quality="left", fit="left", key="order-0004")
    assert not Vote.objects.exists()


def test_a_side_of_an_a_b_trial_takes_no_slider_answer(pairs):
    rater, session = _at_first_pair(pairs)
    pair = votes.resume(session).pair
    with pytest.raises(ListeningError, match="votes on A/B trials"):
        sessions.save_rating(rater, pair.left.token, quality=5, fit=5, key="slider-001")
    assert not Rating.objects.exists()


def test_the_last_vote_closes_the_session_and_resume_follows_the_votes(pairs):
    rater, session = _at_first_pair(pairs)
    point = votes.resume(session)
    assert point.total == 6 and point.pair.position == 0
    assert point.following == (
        session.pairs.get(position=1).left.token,
        session.pairs.get(position=1).right.token,
    )
    vote_session(rater, session)
    session.refresh_from_db()
    assert votes.resume(session) is None
    assert session.state == CategorySession.State.CLOSED and session.closed_at
    assert session.last_answer_at and session.assessed_with
    assert Vote.objects.filter(pair__session=session).count() == 6


def test_a_vote_is_refused_until_both_sides_were_heard(pairs, clock):
    rater, session = _at_first_pair(pairs)
    pair = votes.resume(session).pair

    def vote(key: str):
        return votes.save_vote(
            rater, pair.token, quality="left", fit="tie", key=key, require_heard=True
        )

    with pytest.raises(ListeningError) as exc:
        vote("heard-0001")
    assert exc.value.status == 409
    assert exc.value.message == "Sound A: Please listen to the sound before rating it."
    _hear(rater, pair.left, clock)
    # B played half-way: what a slider answer given too early is told, naming the side.
    deliver(rater, pair.right.token)
    listening.player_event(rater, pair.right.token, "play", 0)
    clock.advance(DURATION / 2)
    listening.player_event(rater, pair.right.token, "pause", DURATION / 2)
    with pytest.raises(ListeningError) as exc:
        vote("heard-0002")
    assert exc.value.message.startswith("Sound B: You have heard 0.5 s of the 1.0 s sound (50%)")
    assert "Only the time it really played counts" in exc.value.message
    assert not Vote.objects.exists()
    listening.player_event(rater, pair.right.token, "play", DURATION / 2)
    clock.advance(DURATION / 2)
    listening.player_event(rater, pair.right.token, "ended", DURATION)
    stored, created = vote("heard-0003")
    assert created
    stored.refresh_from_db()
    assert (stored.left_plays, stored.right_plays) == (1, 2)
    assert stored.left_heard_fraction == stored.right_heard_fraction == 1.0
    assert stored.answer_s >= 2 * DURATION


# --- Rater-quality rules --------------------------------------------------------------------------


def _vote_rows(winners: list[str], kind: str = "crowd") -> list[dict]:
    return [
        {
            "session": "R1-1",
            "rater": "R1",
            "rater_kind": kind,
            "category": "dog",
            "role": PAIR,
            "question": "quality" if n % 2 == 0 else "fit",
            "winner": winner,
            "heard_fraction": 1.0,
            "answer_s": 9.0,
        }
        for n, winner in enumerate(winners)
    ]


@pytest.mark.parametrize("side, words", [("left", "A (left)"), ("right", "B (right)")])
def test_always_the_same_side_is_straight_lining_on_votes(side, words):
    rules = RaterRules()
    (verdict,) = assess(_vote_rows([side] * 20), rules).values()
    assert verdict.excluded  # a crowd worker's session
    (flag,) = verdict.flags
    assert flag.rule == "same_side" and flag.reason == f"{words} on 20 of 20 answers"
    (invited,) = assess(_vote_rows([side] * 20, "invited"), rules).values()
    assert not invited.excluded and invited.flags[0].action == "flag"


def test_counterbalanced_honest_votes_and_short_sessions_pass():
    rules = RaterRules()
    honest = ["left", "right", "left", "tie", "right"] * 4
    assert all(not v.flags for v in assess(_vote_rows(honest), rules).values())
    assert all(not v.flags for v in assess(_vote_rows(["left"] * 15), rules).values())


def test_a_session_of_votes_is_not_held_to_the_slider_anchors(pairs):
    rater, session = _at_first_pair(pairs)
    alternate = iter(["left", "right"] * 10)
    vote_session(rater, session, lambda pair: (next(alternate), "tie"))
    session.refresh_from_db()
    assert not session.excluded and session.assessed_with
    rows = selectors.answer_rows(pairs, sessions=[session.pk])
    assert len(rows) == 12 and {r["role"] for r in rows} == {PAIR}
    # Voted through the service, with nothing heard: flagged as too fast and not listened, but
    # no anchor rule for a session of votes.
    (verdict,) = selectors.session_verdicts(pairs).values()
    assert verdict.anchors == 0 and "anchors" not in [f.rule for f in verdict.flags]


def test_a_session_voting_always_a_is_excluded_for_a_crowd_worker(pairs):
    rater, session = _at_first_pair(pairs)
    rater.kind, rater.participant_id = "crowd", "PIDsame"
    rater.save()
    test = selectors.listening_test(pairs)
    test.pairs_per_session = 6
    test.rater_rules = {"same_side": {"min_answers": 8}}
    test.save()
    vote_session(rater, session)
    session.refresh_from_db()
    assert session.excluded
    (verdict,) = selectors.session_verdicts(pairs).values()
    same = next(f for f in verdict.flags if f.rule == "same_side")
    assert same.action == "exclude" and same.reason == "A (left) on 12 of 12 answers"


# --- Hidden anchors as A/B trials -----------------------------------------------------------------


@pytest.fixture
def anchored(db):
    challenge = build_pairs_challenge(
        slug="ab-anchored", categories=1, duration=DURATION, anchor_pairs_per_session=2
    )
    preparation.set_open(challenge, True)
    return challenge


def _anchor_side(pair: Pair) -> str | None:
    if pair.left.role != "trial":
        return "left"
    return "right" if pair.right.role != "trial" else None


def test_a_session_holds_its_hidden_anchors_against_stimuli_on_alternate_sides(anchored):
    _, session = _at_first_pair(anchored)
    made = list(session.pairs.select_related("left__anchor", "right__anchor").order_by("position"))
    assert len(made) == 6 + 2
    anchored_pairs = [p for p in made if _anchor_side(p)]
    roles = sorted(getattr(p, _anchor_side(p)).role for p in anchored_pairs)
    assert roles == ["anchor_hq_poorfit", "anchor_lq_poorfit"]
    assert {_anchor_side(p) for p in anchored_pairs} == {"left", "right"}
    for pair in anchored_pairs:
        anchor = getattr(pair, _anchor_side(pair))
        other = pair.right if _anchor_side(pair) == "left" else pair.left
        assert anchor.anchor.category_id == session.category_id and anchor.stimulus_id is None
        assert other.role == "trial" and other.stimulus.category_id == session.category_id
    # Spread among the others, never served as a pair of systems.
    assert made[0] not in anchored_pairs
    assert sum(pair_sessions.served(session.category).values()) == 6


def _answer_anchors(right: bool):
    def choose(pair: Pair):
        side = _anchor_side(pair)
        if side is None:
            return "left", "right"
        stimulus = "right" if side == "left" else "left"
        return (stimulus, stimulus) if right else (side, "tie")

    return choose


def test_anchors_answered_as_known_pass_and_answered_for_the_anchor_exclude(anchored):
    honest, session = _at_first_pair(anchored, 0)
    vote_session(honest, session, _answer_anchors(right=True))
    careless, other = _at_first_pair(anchored, 1)
    vote_session(careless, other, _answer_anchors(right=False))
    for s in (session, other):
        s.refresh_from_db()
    rows = selectors.answer_rows(anchored, sessions=[session.pk])
    known = [(r["role"], r["question"], r["expected"] != "") for r in rows if r["expected"]]
    # The low-quality anchor's two answers and the high-quality one's fit are known.
    assert sorted(known) == [
        ("anchor_pair", "fit", True),
        ("anchor_pair", "fit", True),
        ("anchor_pair", "quality", True),
    ]
    verdicts = selectors.session_verdicts(anchored)
    assert "anchor_pairs" not in [f.rule for f in verdicts[session.pk].flags]
    flag = next(f for f in verdicts[other.pk].flags if f.rule == "anchor_pairs")
    assert flag.action == "exclude"
    assert flag.reason == "3 of 3 answers against a hidden anchor other than known (limit 2)"
    assert other.excluded and not session.excluded


def test_monitoring_counts_a_b_trials_and_votes(anchored):
    rater, session = _at_first_pair(anchored)
    for _ in range(3):
        pair = votes.resume(session).pair
        votes.save_vote(rater, pair.token, quality="left", fit="right", key=f"m-{pair.token}")
    (row,) = [r for r in selectors.rater_progress(anchored) if r["rater"].pk == rater.pk]
    assert (row["answered"], row["trials"]) == (3, 8)


@pytest.fixture
def with_gold(db):
    # A small pool of trapping sounds made ahead (a quarter more than one session's): the
    # second session makes its own.
    challenge = build_pairs_challenge(
        slug="ab-gold", categories=1, duration=DURATION, gold_per_session=2, target_ratings=1
    )
    preparation.set_open(challenge, True)
    return challenge


def _gold_side(pair: Pair) -> str | None:
    if pair.left.role == "gold":
        return "left"
    return "right" if pair.right.role == "gold" else None


SIDES = ("left", "right")


def _golds(session) -> set[int]:
    pairs = session.pairs.select_related("left", "right")
    return {getattr(p, _gold_side(p)).gold_id for p in pairs if _gold_side(p)}


def _answer_gold(as_asked: bool):
    def choose(pair: Pair):
        side = _gold_side(pair)
        if side is None:
            return "left", "right"
        sound = getattr(pair, side).gold
        other = "right" if side == "left" else "left"
        asked = {"this": side, "other": other, "tie": "tie"}[sound.vote]
        wrong = other if asked == side else side
        return (asked, asked) if as_asked else (asked, wrong)

    return choose


def test_gold_a_b_trials_ask_for_a_vote_and_the_gold_rule_judges_it(with_gold):
    honest, session = _at_first_pair(with_gold, 0)
    made = list(session.pairs.select_related("left__gold", "right__gold").order_by("position"))
    gold_pairs = [p for p in made if _gold_side(p)]
    assert len(made) == 6 + 2 and len(gold_pairs) == 2 and made[0] not in gold_pairs
    for pair in gold_pairs:
        side = _gold_side(pair)
        sound = getattr(pair, side).gold
        other = pair.right if side == "left" else pair.left
        # A built-in trapping sound heard by this trial alone, asking for a vote.
        assert sound.builtin and sound.placed_at and sound.vote in GOLD_VOTES
        assert sound.label.endswith(("questions.", "for fit."))
        assert other.role == "trial" and other.stimulus.category_id == session.category_id
    assert sum(pair_sessions.served(session.category).values()) == 6
    vote_session(honest, session, _answer_gold(as_asked=True))
    careless, other = _at_first_pair(with_gold, 1)
    vote_session(careless, other, _answer_gold(as_asked=False))
    # Each built-in sound is heard once: the second session has gold sounds of its own.
    assert not _golds(session) & _golds(other)
    rows = selectors.answer_rows(with_gold, sessions=[session.pk])
    gold_rows = [r for r in rows if r["role"] == "gold_pair"]
    assert len(gold_rows) == 4 and all(r["winner"] == r["expected"] for r in gold_rows)
    verdicts = selectors.session_verdicts(with_gold)
    assert "gold" not in [f.rule for f in verdicts[session.pk].flags]
    flag = next(f for f in verdicts[other.pk].flags if f.rule == "gold")
    assert flag.reason == "2 answer(s) on gold A/B trials other than they ask"
    # Never fitted: the votes' section reads the two stimuli's A/B trials only.
    exported = selectors.export_vote_rows(with_gold)
    sides = {r[f"{s}_stimulus"] for r in exported if r["role"] == "gold_pair" for s in SIDES}
    assert {code.split("/")[0] for code in sides} >= {"gold"}
    section = score_votes(exported, [], Rules(bootstrap=0))
    fitted = sum(entry["votes"] for entry in section["tracks"].values())
    assert fitted == sum(r["role"] == PAIR for r in exported)


def test_a_vote_gold_sentence_says_each_answer():
    rng = random.Random(3)
    said = {gold.vote_instruction(rng) for _ in range(60)}
    assert {vote for _, vote in said} == set(GOLD_VOTES)
    assert gold.vote_sentence("other") == "Please choose the other sound on both questions."
    assert gold.vote_sentence("tie", "Pick", "for quality and for fit") == (
        "Pick a tie for quality and for fit."
    )
