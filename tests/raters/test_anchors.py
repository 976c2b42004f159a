"""Anchors no one can spot from the bytes: built from the organizer's private clips (never the
development set, an example or a system's clip), from real sound (never silence), each source
heard once, delivered like every stimulus, organizers' anchor clips first, and a preparation
check that refuses a set a statistic, a repeat or a match against the teams' sounds gives away."""

from __future__ import annotations

import numpy as np
import pytest

from raters import anchors, delivery, enrolment, preparation, selectors, sessions
from raters.errors import ListeningError
from raters.models import Anchor
from stimuli.models import Category, Clip
from tests.listening_setup import build_listening_challenge

pytestmark = pytest.mark.django_db


def _store_clip(challenge, category, role, samples, system=None) -> Clip:
    audio = delivery.store_samples(samples, challenge.sample_rate)
    return Clip.objects.create(
        challenge=challenge, category=category, role=role, system=system, audio=audio
    )


def _high_band(challenge, seed: int) -> np.ndarray:
    """Noise with energy above 3 kHz only (like keyboard or rain clips): a 600 Hz low-pass, as
    anchors were once made, leaves digital silence of it."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(challenge.clip_frames)
    spectrum = np.fft.rfft(noise)
    freqs = np.fft.rfftfreq(noise.size, 1 / challenge.sample_rate)
    spectrum[freqs < 3000] = 0
    return (0.2 * np.fft.irfft(spectrum, n=noise.size) / np.std(noise))[:, None]


@pytest.fixture
def challenge(db):
    """Three categories; the last one's development and evaluation clips have nothing below
    3 kHz, and one of each is digital silence."""
    challenge = build_listening_challenge(
        slug="anchors",
        categories=3,
        dev_per_category=0,
        eval_per_category=0,
        sample_rate=16000,
        prepared=False,
    )
    categories = list(challenge.categories.order_by("position"))
    # The systems' sounds of that category are like its real ones.
    for k, clip in enumerate(Clip.objects.filter(category=categories[2], role=Clip.Role.SYSTEM)):
        clip.audio = delivery.store_samples(_high_band(challenge, 900 + k), challenge.sample_rate)
        clip.save(update_fields=["audio"])
    for n, category in enumerate(categories):
        for role, offset in ((Clip.Role.DEVELOPMENT, 0), (Clip.Role.EVALUATION, 50)):
            for k in range(12):
                rng = np.random.default_rng(100 * n + k + offset)
                if n == 2:
                    samples = _high_band(challenge, 100 * n + k + offset)
                else:
                    samples = 0.1 * rng.standard_normal((challenge.clip_frames, 1))
                _store_clip(challenge, category, role, samples)
            _store_clip(challenge, category, role, np.zeros((challenge.clip_frames, 1)))
    preparation.prepare(challenge, seed=1)
    preparation.set_open(challenge, True)
    return challenge


def _delivered_stats(challenge, audio) -> anchors.Stats:
    test = selectors.listening_test(challenge)
    return anchors.stats(*delivery.load_samples(delivery.delivered_audio(audio, test)))


def test_no_delivered_anchor_is_silent_or_separable_from_the_stimuli(challenge):
    for category in Category.objects.filter(challenge=challenge):
        stimuli = [_delivered_stats(challenge, s.clip.audio) for s in category.stimuli.all()]
        kinds: dict[str, list] = {}
        for anchor in Anchor.objects.filter(category=category):
            assert not anchor.source.audio.is_silent
            assert anchor.source.role == Clip.Role.EVALUATION
            kinds.setdefault(anchor.kind, []).append(_delivered_stats(challenge, anchor.audio))
        assert set(kinds) == {"hq_goodfit", "hq_poorfit", "lq_poorfit"}
        low_distinct = min(s.distinct for s in stimuli)
        rms = [s.rms_db for s in stimuli]
        for kind, group in kinds.items():
            for stat in group:
                assert not stat.silent, (category.slug, kind)
                # Thousands of sample values, like the stimuli, and their level.
                assert stat.distinct >= 0.5 * low_distinct, (category.slug, kind, stat)
                assert min(rms) - 3 <= stat.rms_db <= max(rms) + 3, (category.slug, kind, stat)
        assert anchors.separations(kinds, stimuli) == []
    # The low-quality anchors of the high-band category's neighbours are made from it, and are
    # sound, not silence.
    lq = Anchor.objects.filter(kind="lq_poorfit", source__category__position=2)
    assert lq.exists()
    # Each source behind one anchor only: no rater hears a sound twice across categories.
    sources = list(Anchor.objects.filter(challenge=challenge).values_list("source", flat=True))
    assert len(sources) == len(set(sources)) == 3 * 3 * 4


def test_no_anchor_repeats_a_familiarization_example_of_the_same_rater(challenge):
    rater = enrolment.invite(challenge)
    enrolment.record_consent(rater)
    enrolment.record_instructions(rater)
    heard: set[str] = set()
    anchor_sounds: set[str] = set()
    while (step := sessions.next_session(rater)).session is not None:
        session = step.session
        heard |= {c.audio.sha256 for c in session.familiarization.select_related("audio")}
        for trial in session.trials.exclude(role="trial").select_related("anchor__source__audio"):
            anchor_sounds.add(trial.anchor.source.audio.sha256)
            anchor_sounds.add(trial.audio.sha256)
        from tests.listening_setup import answer_session

        answer_session(rater, session)
    assert rater.sessions.count() == 3
    assert len(heard) == 3 * 6
    assert not heard & anchor_sounds


def test_organizers_anchor_clips_come_first_and_low_quality_ones_serve_as_they_are(db):
    challenge = build_listening_challenge(slug="chosen", categories=2)
    category, other = challenge.categories.order_by("position")
    rng = np.random.default_rng(10_007)  # not a seed the setup used for its clips

    def noise():
        return 0.1 * rng.standard_normal((challenge.clip_frames, 1))

    chosen = [_store_clip(challenge, category, Clip.Role.ANCHOR, noise()) for _ in range(8)]
    crackly = [_store_clip(challenge, category, Clip.Role.ANCHOR_LQ, noise()) for _ in range(4)]
    Anchor.objects.filter(challenge=challenge).delete()
    preparation.prepare(challenge, seed=3)
    good = Anchor.objects.filter(category=category, kind="hq_goodfit").order_by("id")
    poor = Anchor.objects.filter(category=other, kind="hq_poorfit").order_by("id")
    # The organizer's clips, before any evaluation clip, each used once.
    assert {a.source for a in good[:4]} | {a.source for a in poor[:4]} == set(chosen)
    assert all(a.source.role == Clip.Role.EVALUATION for a in list(good[4:]) + list(poor[4:]))
    low = list(Anchor.objects.filter(category=other, kind="lq_poorfit").order_by("id"))
    assert {a.source for a in low[:4]} == set(crackly)
    assert all(a.audio_id == a.source.audio_id for a in low[:4])  # not degraded again
    assert all(a.audio_id != a.source.audio_id for a in low[4:])


def test_no_anchor_comes_from_what_the_teams_hold(db):
    """Without private clips there is no anchor: the development set and the systems' clips
    are refused as sources, and preparation says what to import."""
    challenge = build_listening_challenge(
        slug="no-private", categories=2, eval_per_category=0, prepared=False
    )
    with pytest.raises(ListeningError) as refused:
        preparation.build_anchors(challenge, seed=0)
    message = refused.value.message
    assert "cat0 hq_goodfit: 0 of 4" in message and "cat1 lq_poorfit: 0 of 4" in message
    assert "evaluation set" in message
    assert not Anchor.objects.filter(challenge=challenge).exists()


def test_low_quality_recipes_are_drawn_per_anchor():
    """No constant of the recipe is shared by every low-quality anchor."""
    recipes = [anchors.degradation(16000, seed) for seed in range(200)]
    for field in ("low_hz", "high_hz", "drive", "snr_db", "slope", "follow"):
        values = [getattr(r, field) for r in recipes]
        assert max(values) - min(values) > 0.5 * (max(values) + min(values)) / 2 * 0.5, field
    assert 0.3 < np.mean([r.clip < 1 for r in recipes]) < 0.7


def test_preparation_refuses_an_anchor_set_a_statistic_separates(challenge):
    category = challenge.categories.order_by("position").first()
    # Low-quality anchors made of a few sample values (as a coarse quantiser once made them).
    square = np.sign(np.sin(np.arange(challenge.clip_frames) / 7.0))[:, None] * 0.4
    square = np.round(square * 4) / 4
    audio = delivery.store_samples(square, challenge.sample_rate)
    Anchor.objects.filter(category=category, kind="lq_poorfit").update(audio=audio)
    with pytest.raises(ListeningError) as refused:
        preparation.check_anchors(challenge)
    message = refused.value.message
    assert f"{category.slug} lq_poorfit: distinct sample values" in message
    assert "hq_goodfit" not in message
    # Silence is named as such.
    silence = delivery.store_samples(np.zeros((challenge.clip_frames, 1)), challenge.sample_rate)
    Anchor.objects.filter(category=category, kind="hq_poorfit").update(audio=silence)
    with pytest.raises(ListeningError, match=r"hq_poorfit: (\d+) of \1 anchors are digital"):
        preparation.check_anchors(challenge)


def test_preparation_refuses_repeats_and_anchors_the_teams_hold(challenge):
    """A development clip or a system's clip behind an anchor (even degraded), or one source
    behind two anchors, is refused, each named."""
    categories = list(challenge.categories.order_by("position"))
    dev = Clip.objects.filter(category=categories[0], role=Clip.Role.DEVELOPMENT)
    dev = [c for c in dev if not c.audio.is_silent][:2]
    system_clip = Clip.objects.filter(category=categories[1], role=Clip.Role.SYSTEM).first()
    good = list(Anchor.objects.filter(category=categories[0], kind="hq_goodfit"))
    good[0].audio = dev[0].audio
    good[0].save(update_fields=["audio"])
    samples, rate = delivery.load_samples(dev[1].audio)
    lq = Anchor.objects.filter(category=categories[1], kind="lq_poorfit").first()
    lq.audio = delivery.store_samples(anchors.degrade(samples, rate, 5), rate)
    lq.save(update_fields=["audio"])
    poor = Anchor.objects.filter(category=categories[2], kind="hq_poorfit").first()
    poor.audio = system_clip.audio
    poor.source = good[1].source
    poor.save(update_fields=["audio", "source"])
    with pytest.raises(ListeningError) as refused:
        preparation.check_anchors(challenge)
    message = refused.value.message
    assert "cat0 hq_goodfit: 1 anchor(s) match a development or system clip" in message
    assert "cat1 lq_poorfit: 1 anchor(s) match" in message
    assert "cat2 hq_poorfit: 1 anchor(s) match" in message
    assert "1 source clip(s) behind more than one anchor" in message
    assert "1 anchor(s) also a stimulus" in message


def test_one_threshold_over_the_challenge_separates_a_kind_that_a_recipe_constant_marks():
    """Over everything a rater of several categories receives: a noise floor every low-quality
    anchor shares (a fixed SNR) is refused; the same anchors spread like the stimuli are not."""
    rng = np.random.default_rng(0)

    def sounds(n, floor):
        return [
            anchors.Stats(
                distinct=5000,
                rms_db=-30 + rng.normal(0, 2),
                flatness=0.05,
                noise_floor_db=f,
                crest_db=15 + rng.normal(0, 2),
                bandwidth_hz=800 + rng.normal(0, 200),
            )
            for f in floor(n)
        ]

    stimuli = sounds(300, lambda n: rng.uniform(-90, -30, n))
    marked = sounds(24, lambda n: rng.normal(-40, 1, n))
    spread = sounds(24, lambda n: rng.uniform(-90, -30, n))
    problems = anchors.pooled_separations({"lq_poorfit": marked}, stimuli)
    assert len(problems) == 1 and problems[0].startswith("lq_poorfit: noise floor (dBFS)")
    assert anchors.pooled_separations({"lq_poorfit": spread}, stimuli) == []
    # Too few anchors to tell a tell from the draw: left to the per-category test.
    assert anchors.pooled_separations({"lq_poorfit": marked[:10]}, stimuli) == []
