"""Listening test services: assignment, counterbalanced sessions, anchors, idempotent answers,
resume, and every refused request."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from itertools import pairwise

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from raters import diversity, enrolment, preparation, selectors, sessions
from raters.design import counterbalanced_order, williams
from raters.errors import ListeningError
from raters.models import CategorySession, ListeningTest, Rater, Rating, Trial
from stimuli.models import Category
from tests.listening_setup import answer_session, build_listening_challenge, deliver

pytestmark = pytest.mark.django_db


@pytest.fixture
def listening(db):
    challenge = build_listening_challenge()
    preparation.set_open(challenge, True)
    return challenge


def _rater(challenge, n: int = 0) -> Rater:
    rater = enrolment.invite(challenge, label=f"listener {n}")
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    return rater


# --- Design --------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 4, 7, 8])
def test_williams_square_puts_every_element_in_every_place_and_after_every_other(n):
    rows = williams(n)
    assert len(rows) == (n if n % 2 == 0 else 2 * n)
    for row in rows:
        assert sorted(row) == list(range(n))
    for place in range(n):
        counts = Counter(row[place] for row in rows)
        assert set(counts.values()) == {len(rows) // n}
    pairs = Counter((a, b) for row in rows for a, b in pairwise(row))
    assert len(pairs) == n * (n - 1)
    assert len(set(pairs.values())) == 1


def test_order_is_reproducible_from_seed_and_row():
    a = counterbalanced_order(32, blocks=8, row=3, seed=42)
    assert a == counterbalanced_order(32, blocks=8, row=3, seed=42)
    assert a != counterbalanced_order(32, blocks=8, row=3, seed=43)
    assert sorted(a) == list(range(32))


# --- Sessions ------------------------------------------------------------------------------------


def test_session_holds_every_stimulus_of_its_category_and_four_anchors_of_each_type(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    trials = list(session.trials.select_related("stimulus__system__track", "anchor__source"))
    stimuli = listening.stimuli.filter(category=session.category)
    assert stimuli.count() == 4  # one system per track, two clips each
    assert {t.stimulus_id for t in trials if t.role == "trial"} == set(
        stimuli.values_list("pk", flat=True)
    )
    assert {t.stimulus.system.track.code for t in trials if t.role == "trial"} == {"A", "B"}
    roles = Counter(t.role for t in trials)
    assert roles == {
        "trial": 4,
        "anchor_hq_goodfit": 4,
        "anchor_hq_poorfit": 4,
        "anchor_lq_poorfit": 4,
    }
    assert [t.position for t in trials] == list(range(16))
    for trial in trials:
        if trial.role == "anchor_hq_goodfit":
            assert trial.anchor.source.category_id == session.category_id
            assert trial.audio_id == trial.anchor.source.audio_id
        elif trial.role in ("anchor_hq_poorfit", "anchor_lq_poorfit"):
            assert trial.anchor.source.category_id != session.category_id
        if trial.role == "anchor_lq_poorfit":
            assert trial.audio_id != trial.anchor.source.audio_id  # degraded rendering
    # Familiarization: development clips of the category, none of them a good-fit anchor.
    examples = list(session.familiarization.all())
    assert len(examples) == 6
    anchor_audio = {t.audio_id for t in trials if t.anchor_id}
    assert not anchor_audio & {e.audio_id for e in examples}


def test_anchor_count_follows_the_setting(db):
    challenge = build_listening_challenge(slug="six-anchors", anchors_per_session=6)
    preparation.set_open(challenge, True)
    session = sessions.next_session(_rater(challenge)).session
    roles = Counter(session.trials.values_list("role", flat=True))
    assert roles["anchor_hq_goodfit"] == roles["anchor_hq_poorfit"] == 2
    assert roles["anchor_lq_poorfit"] == 2
    with pytest.raises(IntegrityError), transaction.atomic():
        ListeningTest.objects.filter(challenge=challenge).update(anchors_per_session=7)


def test_counterbalancing_spreads_every_stimulus_evenly_over_the_session(db):
    # 20 stimuli + 12 anchors = 32 trials in 8 blocks of 4: over 16 raters, every stimulus sits
    # in every eighth of the session exactly twice.
    challenge = build_listening_challenge(
        slug="balance", categories=2, systems_per_track=2, clips_per_system=5, target_ratings=100
    )
    preparation.set_open(challenge, True)
    category = Category.objects.get(challenge=challenge, slug="cat0")
    parts: dict[int, Counter] = defaultdict(Counter)
    orders = set()
    for n in range(16):
        session = sessions.build_session(_rater(challenge, n), category, order=0)
        assert session.ordinal == n
        trials = list(session.trials.order_by("position"))
        assert len(trials) == 32
        orders.add(tuple(t.stimulus_id or -t.pk for t in trials))
        for trial in trials:
            if trial.stimulus_id:
                parts[trial.stimulus_id][trial.position // 4] += 1
        # The stored seed and row rebuild the same order.
        items = sessions.session_items(category, selectors.listening_test(challenge), session.seed)
        rebuilt = counterbalanced_order(
            len(items), blocks=8, row=session.latin_row, seed=session.seed
        )
        assert [items[i][1].pk for i in rebuilt if items[i][0] == "trial"] == [
            t.stimulus_id for t in trials if t.stimulus_id
        ]
    assert len(parts) == 20
    for counts in parts.values():
        assert [counts[p] for p in range(8)] == [2] * 8
    assert len(orders) == 16  # every rater hears a different order


# --- Assignment ----------------------------------------------------------------------------------


def test_assignment_takes_least_rated_categories_and_stops_at_the_target(db):
    challenge = build_listening_challenge(
        slug="assign", categories=7, clips_per_system=1, dev_per_category=8, target_ratings=10
    )
    preparation.set_open(challenge, True)
    ListeningTest.objects.filter(challenge=challenge).update(categories_min=4, categories_max=7)
    raters = 0
    while True:
        rater = _rater(challenge, raters)
        taken = []
        for _ in range(4):
            step = sessions.next_session(rater)
            if step.session is None:
                break
            taken.append(step.session.category_id)
            CategorySession.objects.filter(pk=step.session.pk).update(
                state="closed", closed_at=timezone.now()
            )
            counts = Counter(
                CategorySession.objects.filter(rater__challenge=challenge).values_list(
                    "category_id", flat=True
                )
            )
            spread = [counts.get(c.pk, 0) for c in challenge.categories.all()]
            assert max(spread) - min(spread) <= 1, spread
        assert len(set(taken)) == len(taken)
        raters += 1
        if not taken:
            break
        assert raters < 40
    counts = Counter(
        CategorySession.objects.filter(rater__challenge=challenge).values_list(
            "category_id", flat=True
        )
    )
    # Every category exactly at the target: 70 sessions, no listening beyond it.
    assert sorted(counts.values()) == [10] * 7
    assert raters == 19  # 17 raters of 4 categories, one of 2, then one who finds it full
    last = sessions.next_session(_rater(challenge, 99))
    assert last.session is None and last.reason in ("full", "done")


def test_failing_and_abandoned_sessions_leave_their_place_to_others(db):
    from datetime import timedelta

    from django.utils import timezone

    challenge = build_listening_challenge(slug="need", categories=1 + 1, target_ratings=1)
    preparation.set_open(challenge, True)
    need = sessions.category_need
    careless = _rater(challenge, 1)
    session = sessions.next_session(careless).session
    category = session.category_id
    assert need(challenge)[category] == 0
    sessions.complete_familiarization(session, require_heard=False)
    while (trial := sessions.next_trial(session)) is not None:
        # Every check answered against its type: the session fails.
        q, f = {"trial": (5, 5), "anchor_hq_goodfit": (0, 0)}.get(trial.role, (10, 10))
        sessions.save_rating(careless, trial.token, quality=q, fit=f, key=f"careless-{trial.pk}")
    assert need(challenge)[category] == 1
    attentive = _rater(challenge, 2)
    taken = sessions.next_session(attentive).session
    other = next(c for c in need(challenge) if c != category)
    assert taken.category_id in (category, other)
    # An open session without answers for hours no longer holds its place.
    stale = taken
    assert need(challenge)[stale.category_id] == 0
    CategorySession.objects.filter(pk=stale.pk).update(
        created_at=timezone.now() - sessions.ABANDONED_AFTER - timedelta(minutes=1)
    )
    assert need(challenge)[stale.category_id] == 1


def test_a_deleted_rater_leaves_no_gap_that_breaks_the_next_session(db):
    challenge = build_listening_challenge(slug="gap", categories=2, target_ratings=10)
    preparation.set_open(challenge, True)
    category = challenge.categories.first()
    first, second = _rater(challenge, 1), _rater(challenge, 2)
    sessions.build_session(first, category, order=0)
    sessions.build_session(second, category, order=0)
    first.delete()
    third = sessions.build_session(_rater(challenge, 3), category, order=0)
    assert third.ordinal == 2 and third.latin_row == 2


def test_a_rater_rates_at_most_the_maximum_of_categories(db):
    challenge = build_listening_challenge(slug="max", categories=3, target_ratings=50)
    preparation.set_open(challenge, True)
    ListeningTest.objects.filter(challenge=challenge).update(categories_min=1, categories_max=2)
    rater = _rater(challenge)
    for _ in range(2):
        session = sessions.next_session(rater).session
        answer_session(rater, session)
    assert sessions.next_session(rater).reason == "max"
    assert sessions.rater_done(rater)


def test_no_sessions_while_the_test_is_closed(db):
    challenge = build_listening_challenge(slug="closed")
    rater = _rater(challenge)
    assert sessions.next_session(rater).reason == "closed"
    with pytest.raises(ListeningError):
        preparation.set_open(build_listening_challenge(slug="empty", systems_per_track=0), True)


# --- Answers ---------------------------------------------------------------------------------------


def test_the_same_key_never_makes_a_second_rating(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    trial = sessions.next_trial(session)
    first, created = sessions.save_rating(rater, trial.token, quality=6, fit=4, key="key-000001")
    again, created_again = sessions.save_rating(
        rater, trial.token, quality=9, fit=9, key="key-000001"
    )
    assert created and not created_again
    assert again.pk == first.pk and (again.quality, again.fit) == (6, 4)
    assert Rating.objects.count() == 1
    # A second answer to the same trial under another key, or the key reused elsewhere: refused.
    with pytest.raises(ListeningError) as exc:
        sessions.save_rating(rater, trial.token, quality=1, fit=1, key="key-000002")
    assert exc.value.status == 409
    other = sessions.next_trial(session)
    with pytest.raises(ListeningError) as exc:
        sessions.save_rating(rater, other.token, quality=1, fit=1, key="key-000001")
    assert exc.value.status == 409
    assert Rating.objects.count() == 1
    assert Rating.objects.get().quality == 6


def test_resume_at_the_first_unanswered_trial_and_close_at_the_end(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    trials = list(session.trials.order_by("position"))
    for trial in trials[:3]:
        sessions.save_rating(rater, trial.token, quality=5, fit=5, key=f"resume-{trial.pk}")
    assert sessions.next_trial(session) == trials[3]
    # The same session comes back, however often the rater asks.
    assert sessions.next_session(rater).session == session
    answer_session(rater, session)
    session.refresh_from_db()
    assert session.state == "closed" and session.closed_at
    assert Rating.objects.filter(trial__session=session).count() == len(trials)
    next_one = sessions.next_session(rater).session
    assert next_one != session and next_one.order == 1


@pytest.mark.parametrize(
    "quality, fit",
    [(11, 5), (-1, 5), (5, 11), ("abc", 5), ("3.5", 5), ("", 5), (None, 5), (True, 5), ("05", 5)],
)
def test_values_outside_0_to_10_are_refused(listening, quality, fit):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    trial = sessions.next_trial(session)
    with pytest.raises(ListeningError) as exc:
        sessions.save_rating(rater, trial.token, quality=quality, fit=fit, key="bad-value-1")
    assert exc.value.status == 400
    assert not Rating.objects.exists()


def test_refused_requests_change_nothing(listening):
    rater, other = _rater(listening, 1), _rater(listening, 2)
    session = sessions.next_session(rater).session
    trial = sessions.next_trial(session)

    def refused(who, token, status, key="refused-01"):
        with pytest.raises(ListeningError) as exc:
            sessions.save_rating(who, token, quality=5, fit=5, key=key)
        assert exc.value.status == status, exc.value.message
        assert not Rating.objects.exists()

    refused(rater, trial.token, 409)  # familiarization first
    sessions.complete_familiarization(session, require_heard=False)
    refused(other, trial.token, 403)  # someone else's trial
    refused(rater, "no-such-token", 404)
    refused(rater, trial.token, 400, key="short")  # no usable key
    CategorySession.objects.filter(pk=session.pk).update(state="closed", closed_at=timezone.now())
    refused(rater, trial.token, 409)  # closed session
    CategorySession.objects.filter(pk=session.pk).update(state="open", closed_at=None)
    preparation.set_open(listening, False)
    refused(rater, trial.token, 409)  # closed test
    preparation.set_open(listening, True)
    sessions.save_rating(rater, trial.token, quality=5, fit=5, key="refused-01")
    assert Rating.objects.count() == 1


def test_database_refuses_what_the_services_refuse(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    trial = sessions.next_trial(session)
    for fields in ({"quality": 11, "fit": 5}, {"quality": 5, "fit": 12}):
        with pytest.raises(IntegrityError), transaction.atomic():
            Rating.objects.create(trial=trial, idempotency_key="x" * 10, **fields)
    Rating.objects.create(trial=trial, quality=1, fit=1, idempotency_key="a" * 10)
    with pytest.raises(IntegrityError), transaction.atomic():
        Rating.objects.create(trial=trial, quality=2, fit=2, idempotency_key="b" * 10)
    anchor_trial = session.trials.exclude(role="trial").first()
    with pytest.raises(IntegrityError), transaction.atomic():
        Trial.objects.filter(pk=anchor_trial.pk).update(role="trial")


def test_familiarization_needs_every_example_fetched(listening):
    selectors.listening_test(listening).__class__.objects.filter(challenge=listening).update(
        listened_fraction=0.0
    )
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    with pytest.raises(ListeningError):
        sessions.complete_familiarization(session)
    for clip in session.familiarization.all():
        deliver(rater, clip.token)
    sessions.complete_familiarization(session)
    assert session.familiarized_at is not None


# --- Rows for scoring ------------------------------------------------------------------------------


def test_rating_rows_are_what_scoring_reads(listening):
    from scoring.compute import score
    from scoring.inputs import DIVERSITY_COLUMNS, RATING_COLUMNS
    from scoring.rules import Rules
    from scoring.services import collect_inputs

    team = listening.teams.get(name="Team A0")
    member = enrolment.create_participant_account(
        listening, username="member", password="member-pass-1", team=team
    )
    enrolment.record_consent(member)
    enrolment.record_instructions(member)
    answer_session(member, sessions.next_session(member).session)
    rows = selectors.rating_rows(listening)
    assert len(rows) == 16
    # Scoring's columns first, then what each answer was given after (for screening raters).
    assert all(tuple(row) == selectors.RATING_COLUMNS for row in rows)
    assert selectors.RATING_COLUMNS[: len(RATING_COLUMNS)] == RATING_COLUMNS
    assert {row["rater"] for row in rows} == {member.code}
    assert {row["rater_team"] for row in rows} == {"Team A0"}
    trials = [r for r in rows if r["role"] == "trial"]
    assert {r["system"] for r in trials} == {"A0", "B0"} and {r["track"] for r in trials} == {
        "A",
        "B",
    }
    anchors = [r for r in rows if r["role"] != "trial"]
    assert all(r["system"] == "" and r["track"] == "" for r in anchors)
    assert {r["category"] for r in rows} <= set(listening.categories.values_list("slug", flat=True))
    assert all(isinstance(r["quality"], int) for r in rows)
    assert selectors.diversity_rows(listening) == []
    assert selectors.DIVERSITY_COLUMNS[: len(DIVERSITY_COLUMNS)] == DIVERSITY_COLUMNS

    inputs = collect_inputs(listening)
    result = score(inputs, Rules(bootstrap=10))
    assert result["counts"]["self_ratings_removed"] == 2  # the member's own team's sounds
    assert result["counts"]["sessions_checked"] == 1
    assert result["counts"]["sessions_excluded"] == 0


def test_careless_sessions_show_as_failing_checks(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    rng = random.Random(1)
    while (trial := sessions.next_trial(session)) is not None:
        # Opposite of every anchor's type: all anchors misrated.
        q, f = {"anchor_hq_goodfit": (1, 1), "anchor_lq_poorfit": (9, 9)}.get(
            trial.role, (rng.randint(0, 2), 9)
        )
        sessions.save_rating(rater, trial.token, quality=q, fit=f, key=f"careless-{trial.pk}")
    verdict = selectors.session_verdicts(listening)[session.pk]
    assert (verdict.anchors, verdict.misrated, verdict.excluded) == (12, 12, True)
    row = next(r for r in selectors.rater_progress(listening) if r["rater"] == rater)
    assert row["failing"] == 1 and row["answered"] == 16


# --- Refusals that keep the record whole -----------------------------------------------------------


def test_one_open_session_per_rater_is_a_database_rule(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    assert sessions.next_session(rater).session == session
    other = listening.categories.exclude(pk=session.category_id).first()
    with pytest.raises(IntegrityError), transaction.atomic():
        sessions.build_session(rater, other, order=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        CategorySession.objects.filter(pk=session.pk).update(state="closed")  # no closing time


def test_trials_are_answered_in_their_order(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    first, second = session.trials.order_by("position")[:2]
    with pytest.raises(ListeningError) as exc:
        sessions.save_rating(rater, second.token, quality=5, fit=5, key="ahead-0001")
    assert exc.value.status == 409 and not Rating.objects.exists()
    sessions.save_rating(rater, first.token, quality=5, fit=5, key="first-0001")
    sessions.save_rating(rater, second.token, quality=5, fit=5, key="second-001")
    assert Rating.objects.count() == 2


def test_the_last_answer_closes_the_session_with_its_time(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    answer_session(rater, session)
    session.refresh_from_db()
    assert session.state == "closed" and session.closed_at is not None


def test_finishing_is_refused_while_work_is_owed(listening):
    ListeningTest.objects.filter(challenge=listening).update(categories_min=2)
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    with pytest.raises(ListeningError, match="category you started"):
        sessions.finish(rater)
    answer_session(rater, session)
    with pytest.raises(ListeningError, match="at least 2"):
        sessions.finish(rater)
    preparation.set_open(listening, False)
    # A paused test is no reason to finish: the rater comes back when it reopens.
    with pytest.raises(ListeningError, match="paused"):
        sessions.finish(rater)
    rater.refresh_from_db()
    assert rater.finished_at is None
    preparation.set_open(listening, True)
    answer_session(rater, sessions.next_session(rater).session)
    sessions.finish(rater)
    assert rater.finished_at is not None


def test_deleting_an_account_never_deletes_its_answers(listening, django_user_model):
    from django.db.models import ProtectedError

    user = django_user_model.objects.create_user("listener", password="x")
    rater = enrolment.enrol_user(listening, user)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    answer_session(rater, sessions.next_session(rater).session)
    answered = Rating.objects.count()
    with pytest.raises(ProtectedError):
        user.delete()
    assert Rating.objects.count() == answered > 0


def test_assignment_assesses_anchors_by_the_tests_rater_rules(listening):
    rater = _rater(listening)
    session = sessions.next_session(rater).session
    sessions.complete_familiarization(session, require_heard=False)
    wrong = 0
    while (trial := sessions.next_trial(session)) is not None:
        q, f = (5, 5)
        if trial.role == "anchor_hq_goodfit" and wrong < 3:
            q, f, wrong = 0, 0, wrong + 1
        elif trial.role == "anchor_hq_goodfit":
            q, f = 9, 9
        elif trial.role == "anchor_lq_poorfit":
            q, f = 1, 1
        elif trial.role == "anchor_hq_poorfit":
            q, f = 9, 1
        sessions.save_rating(rater, trial.token, quality=q, fit=f, key=f"rule-{trial.pk:05d}")
    assert wrong == 3
    verdict = selectors.session_verdicts(listening)[session.pk]
    assert verdict.misrated == 3 and not verdict.excluded  # by default 5 of 12 exclude
    ListeningTest.objects.filter(challenge=listening).update(exclude_at=3)
    assert selectors.session_verdicts(listening)[session.pk].excluded


def test_the_stimulus_set_is_fixed_once_raters_began(listening):
    from stimuli.models import Medoid

    picked = list(listening.stimuli.order_by("id"))

    def medoids_from(clips_per_system: int) -> None:
        Medoid.objects.filter(challenge=listening).delete()
        for stimulus in picked:
            if stimulus.position < clips_per_system:
                Medoid.objects.create(
                    challenge=listening,
                    system=stimulus.system,
                    category=stimulus.category,
                    clip=stimulus.clip,
                    position=stimulus.position,
                )

    before = preparation.build_stimulus_set(listening)
    medoids_from(2)
    assert preparation.build_stimulus_set(listening) == before  # the same clips: nothing to refuse
    # Before anyone listens, new medoids replace the set and the diversity files follow.
    item = listening.diversity_items.order_by("id").first()
    old_audio = item.audio_id
    medoids_from(1)
    assert preparation.build_stimulus_set(listening) == before // 2
    diversity.build_items(listening)
    item.refresh_from_db()
    assert item.n_sounds == 1 and item.audio_id != old_audio
    sessions.next_session(_rater(listening))
    medoids_from(2)
    with pytest.raises(ListeningError, match="fixed") as exc:
        preparation.build_stimulus_set(listening)
    assert exc.value.status == 409
    assert listening.stimuli.count() == before // 2


def test_diversity_files_rendered_later_reach_raters_who_came_early(listening, organizer):
    from raters.models import DiversityItem

    late = listening.diversity_items.order_by("id").last()
    DiversityItem.objects.filter(pk=late.pk).update(audio=None)
    rater = enrolment.enrol_organizer_for_diversity(listening, organizer)
    first = diversity.trials(rater)
    assert late.pk not in {t.item_id for t in first}
    diversity.build_items(listening)
    again = diversity.trials(rater)
    assert [t.pk for t in again[: len(first)]] == [t.pk for t in first]
    assert again[-1].item_id == late.pk and again[-1].position == len(first)
