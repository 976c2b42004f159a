"""Gold (trapping) trials: the built-in spoken instructions (espeak-ng) or an organizer's gold
sounds with the answers they ask for, placed at random positions but never first, rendered
before any session needs them and delivered so that nothing the browser receives tells them
apart, and judged by the gold rule."""

from __future__ import annotations

import io
import random
import re
import shutil
import threading
from collections import Counter

import numpy as np
import pytest
import soundfile as sf
from django.db import connection
from django.test import Client

from raters import enrolment, gold, preparation, selectors, sessions
from raters.models import DeliveredAudio, GoldSound, Trial
from raters.selectors import rating_rows, session_verdicts
from stimuli.audio import integrated_loudness
from tests.factories import make_wav
from tests.listening_setup import build_listening_challenge, get_sound, rater_at_trials

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        shutil.which("espeak-ng") is None, reason="espeak-ng is not installed (scripts/lib.sh)"
    ),
]


@pytest.fixture
def gold_test(db):
    """Two categories of 4-s clips with two gold trials per session and no uploaded gold: the
    built-in spoken instructions, one per trial. Six ratings wanted per stimulus: room for the
    twelve raters a test here takes at most, and a pool of 30 to render."""
    challenge = build_listening_challenge(
        slug="trap",
        categories=2,
        duration=4.0,
        gold_per_session=2,
        target_ratings=6,
        listened_fraction=0.0,
    )
    preparation.set_open(challenge, True)
    return challenge


def test_builtin_trapping_sounds_are_spoken_instructions_at_the_tests_loudness(gold_test):
    rater, session = rater_at_trials(gold_test)
    client = Client()
    client.get(f"/listen/{gold_test.slug}/join/{rater.access_key}/")
    target = selectors.listening_test(gold_test).target_lufs
    trials = list(session.trials.filter(role="gold").select_related("gold"))
    assert len(trials) == 2
    for trial in trials:
        assert trial.gold.builtin and trial.gold.label.startswith(gold.OPENINGS)
        assert trial.gold.label.endswith(".")
        assert 1 <= trial.gold.quality_min == trial.gold.quality_max <= 9
        data = get_sound(client, f"/listen/{gold_test.slug}/audio/{trial.token}/").body
        samples, rate = sf.read(io.BytesIO(data), always_2d=True)
        assert (rate, samples.shape[0]) == (gold_test.sample_rate, gold_test.clip_frames)
        assert abs(integrated_loudness(samples, rate) - target) < 0.5
        # Speech, not silence: a second and more of voiced sound.
        frames = samples[: samples.size // 160 * 160, 0].reshape(-1, 160)
        voiced = np.sqrt(np.mean(frames**2, axis=1)) > 10 ** (-50 / 20)
        assert voiced.sum() * 160 / rate > 1.0


def test_no_two_raters_hear_the_same_trapping_sound(gold_test):
    """One trial per built-in sound: what one rater heard (and its answer) tells nothing about
    another rater's."""
    made = [
        (t.gold.audio_id, t.gold.label)
        for _ in range(6)
        for t in rater_at_trials(gold_test)[1].trials.filter(role="gold").select_related("gold")
    ]
    assert len({audio for audio, _ in made}) == 12
    assert len({label for _, label in made}) >= 6


def test_sessions_place_gold_at_random_positions_never_first(gold_test):
    positions = Counter()
    for _ in range(12):
        _, session = rater_at_trials(gold_test)
        trials = list(session.trials.order_by("position"))
        assert [t.position for t in trials] == list(range(len(trials)))
        gold = [t for t in trials if t.role == "gold"]
        assert len(gold) == 2 and trials[0].role != "gold"
        assert len({t.gold_id for t in gold}) == 2
        positions.update(t.position for t in gold)
    assert 0 not in positions
    assert len(positions) >= 6  # spread over the session, not a fixed slot


def test_a_rater_hears_no_uploaded_gold_sound_twice_while_others_are_left(gold_test):
    for seed in range(4):
        gold.add_gold_sound(
            gold_test,
            make_wav(seconds=4.0, sample_rate=8000, seed=100 + seed),
            label=f"gold {seed}",
            quality=(4, 6),
            fit=(4, 6),
        )
    rater, first = rater_at_trials(gold_test)
    heard = {t.gold_id for t in first.trials.filter(role="gold")}
    assert len(heard) == 2 and not GoldSound.objects.filter(pk__in=heard, builtin=True).exists()
    for trial in first.trials.order_by("position"):
        sessions.save_rating(rater, trial.token, quality=5, fit=5, key=f"k-{trial.token}")
    second = sessions.next_session(rater).session
    assert not heard & {t.gold_id for t in second.trials.filter(role="gold")}


def test_nothing_the_browser_receives_tells_a_gold_trial(gold_test):
    rater, session = rater_at_trials(gold_test)
    client = Client()
    client.get(f"/listen/{gold_test.slug}/join/{rater.access_key}/")
    headers, pages = set(), []
    trials = list(session.trials.order_by("position"))
    for trial in trials:
        response = client.get(f"/listen/{gold_test.slug}/audio/{trial.token}/")
        headers.add(tuple(sorted(response.headers.items())))
    assert len(headers) == 1  # same type, caching and size for gold, anchors and stimuli
    for trial in trials:
        page = client.get(f"/listen/{gold_test.slug}/").content.decode()
        assert trial.token in page
        # Tokens (the sound's, the next one's, the form's) are random per page and rater.
        pages.append(re.sub(r"[A-Za-z0-9_-]{22,}", "TOKEN", page))
        pages[-1] = re.sub(r"\d+", "N", pages[-1])
        sessions.save_rating(rater, trial.token, quality=5, fit=5, key=f"k-{trial.token}")
    # A gold trial's page is the page of a stimulus in the same place (the last one has no
    # next sound to preload, whatever it is).
    last = len(trials) - 1
    others = {p for n, (p, t) in enumerate(zip(pages, trials, strict=True)) if t.role != "gold"}
    for n, (page, trial) in enumerate(zip(pages, trials, strict=True)):
        if trial.role == "gold":
            assert n == last or page in others
            assert "gold" not in page.lower()


def _answer(rater, session, *, gold_right: bool) -> None:
    for trial in session.trials.select_related("gold").order_by("position"):
        quality, fit = 6, 4
        if trial.role == "anchor_hq_goodfit":
            quality, fit = 9, 9
        elif trial.role == "anchor_hq_poorfit":
            quality, fit = 9, 1
        elif trial.role == "anchor_lq_poorfit":
            quality, fit = 1, 1
        elif trial.role == "gold":
            quality, fit = trial.gold.quality_min, trial.gold.fit_min
            if not gold_right:
                # Far from what it asks whatever it asks (10 - x would be right for a five).
                quality, fit = (quality + 5) % 11, (fit + 5) % 11
        sessions.save_rating(rater, trial.token, quality=quality, fit=fit, key=f"k-{trial.token}")


def test_gold_answers_are_judged_by_the_gold_rule(gold_test):
    careful, careful_session = rater_at_trials(gold_test)
    _answer(careful, careful_session, gold_right=True)
    careless, careless_session = rater_at_trials(gold_test)
    _answer(careless, careless_session, gold_right=False)
    verdicts = session_verdicts(gold_test)
    assert not [f for f in verdicts[careful_session.pk].flags if f.rule == "gold"]
    flags = [f for f in verdicts[careless_session.pk].flags if f.rule == "gold"]
    assert flags and "2 gold trial(s)" in flags[0].reason
    # The export says what each gold trial asked for; scoring leaves gold rows out.
    rows = [r for r in rating_rows(gold_test) if r["role"] == "gold"]
    assert len(rows) == 4 and all(r["system"] == "" for r in rows)
    asked = {
        (t.gold.quality_min, t.gold.fit_max)
        for t in Trial.objects.filter(role="gold", rating__isnull=False).select_related("gold")
    }
    assert {(r["expected_quality_min"], r["expected_fit_max"]) for r in rows} == asked
    assert all(t.role != "gold" or t.position for t in Trial.objects.all())


def test_an_organizer_uploads_gold_with_ranges_and_bad_input_stores_nothing(
    gold_test, organizer_client
):
    url = f"/organize/{gold_test.slug}/listen/gold/"
    bad = {
        "file": io.BytesIO(b"not audio"),
        "label": "",
        "quality_min": "7",
        "quality_max": "3",
        "fit_min": "x",
        "fit_max": "11",
    }
    bad["file"].name = "gold.wav"
    response = organizer_client.post(url, bad)
    assert response.status_code == 400
    text = response.content.decode()
    for problem in (
        "not readable",
        "lowest expected answer exceeds",
        "whole number",
        "0 to 10",
        "(label)",
    ):
        assert problem in text, problem
    assert not GoldSound.objects.filter(challenge=gold_test, builtin=False).exists()
    wav = make_wav(seconds=4.0, sample_rate=8000, seed=3)
    good = {
        "file": io.BytesIO(wav),
        "label": "a voice asking for 9 and 9",
        "quality_min": "8",
        "quality_max": "10",
        "fit_min": "8",
        "fit_max": "10",
    }
    good["file"].name = "gold.wav"
    assert organizer_client.post(url, good).status_code == 302
    uploaded = GoldSound.objects.get(challenge=gold_test, builtin=False)
    assert (uploaded.quality_min, uploaded.quality_max, uploaded.fit_max) == (8, 10, 10)
    # Sessions from now on hear the organizer's gold, not spoken instructions.
    _, session = rater_at_trials(gold_test)
    assert {t.gold_id for t in session.trials.filter(role="gold")} == {uploaded.pk}
    page = organizer_client.get(f"/organize/{gold_test.slug}/listen/").content.decode()
    assert "a voice asking for 9 and 9" in page


def test_gold_asked_for_after_preparation_is_placed_too(db):
    challenge = build_listening_challenge(slug="gold-late", categories=2, duration=4.0)
    assert not GoldSound.objects.filter(challenge=challenge).exists()
    preparation.set_open(challenge, True)
    selectors.listening_test(challenge).__class__.objects.filter(challenge=challenge).update(
        gold_per_session=1
    )
    _, session = rater_at_trials(challenge)
    assert session.trials.filter(role="gold", gold__builtin=True).count() == 1


def _rendered(audio_ids) -> set[int]:
    test = DeliveredAudio.objects.values_list("source_id", flat=True)
    return set(test.filter(source_id__in=list(audio_ids)))


def test_preparation_renders_the_trapping_sounds_before_any_session(gold_test, organizer_client):
    """The pool holds the gold trials of the sessions the test expects, each rendered for
    delivery; a session takes its own from it, and its first fetch renders nothing."""
    test = selectors.listening_test(gold_test)
    ready = list(gold.unplaced(gold_test).values_list("audio_id", flat=True))
    assert len(ready) == gold.pool_wanted(gold_test, test) == 30  # 2 categories x 6 x 2, +25%
    assert _rendered(ready) == set(ready)
    rater, session = rater_at_trials(gold_test)
    taken = list(session.trials.filter(role="gold").select_related("gold"))
    assert {t.gold.audio_id for t in taken} <= set(ready)
    assert all(t.gold.placed_at is not None for t in taken)
    assert gold.unplaced(gold_test).count() == 28
    page = organizer_client.get(f"/organize/{gold_test.slug}/listen/").content.decode()
    assert "Built-in spoken instructions: 28 ready, 2 placed in sessions." in page
    client = Client()
    client.get(f"/listen/{gold_test.slug}/join/{rater.access_key}/")
    before = DeliveredAudio.objects.count()
    for trial in session.trials.all():
        assert get_sound(client, f"/listen/{gold_test.slug}/audio/{trial.token}/").body
    assert DeliveredAudio.objects.count() == before
    # Rerun, preparation tops the pool up again.
    assert preparation.prepare(gold_test, seed=1)["trapping_sounds"] == 2
    assert gold.unplaced(gold_test).count() == 30


def test_a_session_beyond_the_pool_makes_its_own_rendered_at_once(gold_test):
    gold.unplaced(gold_test).update(placed_at="2026-01-01T00:00:00Z")
    _, session = rater_at_trials(gold_test)
    made = [t.gold for t in session.trials.filter(role="gold").select_related("gold")]
    assert len(made) == 2 and all(g.builtin and g.placed_at is not None for g in made)
    assert _rendered(g.audio_id for g in made) == {g.audio_id for g in made}
    assert not gold.unplaced(gold_test).exists()


def test_sessions_made_at_once_never_share_a_trapping_sound(db):
    """Raters arriving together take different sounds from the pool (row locks they skip)."""
    challenge = build_listening_challenge(
        slug="trap-race", categories=1, duration=4.0, gold_per_session=4, target_ratings=4
    )
    preparation.set_open(challenge, True)
    # Eight left of twenty: half the sessions' gold comes from the pool, half is made.
    spent = list(gold.unplaced(challenge).values_list("pk", flat=True)[:12])
    GoldSound.objects.filter(pk__in=spent).update(placed_at="2026-01-01T00:00:00Z")
    assert gold.unplaced(challenge).count() == 8
    raters = []
    for _ in range(4):
        rater = enrolment.invite(challenge)
        enrolment.record_consent(rater)
        enrolment.record_instructions(rater)
        raters.append(rater)
    barrier, errors = threading.Barrier(len(raters)), []

    def start(rater) -> None:
        try:
            barrier.wait()
            sessions.next_session(rater)
        except Exception as exc:  # reported below: a thread's failure is the test's
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=start, args=(rater,)) for rater in raters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    golds = list(Trial.objects.filter(role="gold").values_list("gold_id", flat=True))
    assert len(golds) == 16 and len(set(golds)) == 16
    assert not set(golds) & set(spent)
    assert not gold.unplaced(challenge).exists()


test_sessions_made_at_once_never_share_a_trapping_sound = pytest.mark.django_db(transaction=True)(
    test_sessions_made_at_once_never_share_a_trapping_sound
)


def test_trapping_speech_is_whole_in_the_clip_and_above_its_background(monkeypatch):
    """The words a listener must hear: every sentence fits a 4-s clip whole (sped up where it
    would not, never cut), after a lead-in, and the speech stands 3 to 8 dB above the noise and
    4 to 8 dB above the babble: 0.5 to 5 dB above both together."""
    rate, frames = 16_000, 64_000
    room = frames - int(gold.LEAD_S[0] * rate) - int(gold.TAIL_S * rate)
    sizes, snrs, leads = [], [], []
    real_room = gold._room

    def measured(samples, sample_rate, rng):
        sizes.append(samples.size)
        return real_room(samples, sample_rate, rng)

    monkeypatch.setattr(gold, "_room", measured)
    for seed in range(24):
        rng = random.Random(seed)
        text, _, _ = gold.instruction(rng)
        speech, noise = gold.trapping_parts(text, rate, frames, rng)
        snrs.append(10 * np.log10(gold._speech_power(speech, rate) / np.mean(noise**2)))
        spoken = np.flatnonzero(speech)
        leads.append(spoken[0] / rate)
        assert spoken[-1] < frames - int(gold.TAIL_S * rate)
    assert max(sizes) < room  # nothing was cut to fit
    assert min(snrs) > 0.4 and max(snrs) < 5.5, snrs
    assert min(leads) >= gold.LEAD_S[0] and max(leads) - min(leads) > 0.3  # drawn, not fixed
