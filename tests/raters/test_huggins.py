"""The screening's signals, checked numerically: the Huggins pitch lives in the interaural phase
of its band only (each ear alone is flat noise, the diotic noises carry none), and the
digit-triplet staircase finds a simulated listener's known threshold."""

from __future__ import annotations

import numpy as np
import pytest

from raters import hearing_check, huggins

RATE = 48000


def _phase_in_and_out(pair: np.ndarray) -> tuple[float, float]:
    cosine, freqs = huggins.interaural_phase(pair, RATE)
    inside = huggins.band(freqs)
    outside = ~inside & (freqs > 20)
    return float(np.mean(cosine[inside])), float(np.mean(cosine[outside]))


def test_the_dichotic_noise_inverts_its_band_between_the_ears_and_nothing_else():
    pair = huggins.noise_pair(np.random.default_rng(1), RATE, dichotic=True)
    inside, outside = _phase_in_and_out(pair)
    assert inside == pytest.approx(-1.0, abs=1e-9)
    assert outside == pytest.approx(1.0, abs=1e-9)
    # Each ear alone is the same flat noise: no tone to hear without headphones.
    left, right = (np.abs(np.fft.rfft(pair[:, ch])) for ch in (0, 1))
    np.testing.assert_allclose(left, right, rtol=1e-9, atol=1e-9)
    # Mixed in the air (both ears' signals summed, as from loudspeakers), the band cancels.
    freqs = np.fft.rfftfreq(pair.shape[0], 1 / RATE)
    summed = np.abs(np.fft.rfft(pair.sum(axis=1)))
    assert summed[huggins.band(freqs)].max() < 1e-9 * summed.max()


def test_a_diotic_noise_carries_no_pitch():
    pair = huggins.noise_pair(np.random.default_rng(2), RATE, dichotic=False)
    inside, outside = _phase_in_and_out(pair)
    assert inside == pytest.approx(1.0, abs=1e-9)
    assert outside == pytest.approx(1.0, abs=1e-9)
    np.testing.assert_array_equal(pair[:, 0], pair[:, 1])


def test_a_trial_holds_the_pitch_in_its_target_interval_only():
    targets = set()
    for seed in range(12):
        sound, target = huggins.trial(np.random.default_rng(seed), RATE)
        targets.add(target)
        noise = round(huggins.NOISE_S * RATE)
        gap = round(huggins.GAP_S * RATE)
        assert sound.shape == (3 * noise + 2 * gap, 2)
        ramp = int(huggins.RAMP_S * RATE)
        for interval in (1, 2, 3):
            start = (interval - 1) * (noise + gap)
            # The ramped ends smear the spectrum a little: the steady middle is measured.
            core = sound[start + ramp : start + noise - ramp]
            inside, _ = _phase_in_and_out(core)
            if interval == target:
                assert inside < -0.5
            else:
                assert inside == pytest.approx(1.0, abs=1e-9)
        assert np.max(np.abs(sound)) < 1.0
    assert targets == {1, 2, 3}  # the answer is drawn, not fixed


def _listener(threshold: float, rng: np.random.Generator):
    """A simulated listener: a triplet heard right with a logistic probability around its SRT
    (slope 17.5 %/dB at the threshold, as reported for the digit-triplet test)."""

    def hears(snr: float) -> bool:
        return bool(rng.random() < 1 / (1 + np.exp(-0.7 * (snr - threshold))))

    return hears


@pytest.mark.parametrize("threshold", [-12.0, -8.0, -3.0, 2.0])
def test_the_staircase_converges_within_two_db_of_a_known_threshold(threshold):
    errors = []
    for seed in range(40):
        hears = _listener(threshold, np.random.default_rng(seed))
        stairs = hearing_check.Staircase(triplets=24)
        while not stairs.done:
            snr = stairs.next_snr()
            stairs.record(snr, hears(snr))
        errors.append(stairs.threshold() - threshold)
    # Unbiased on average, and each run within 2 dB in all but the rarest cases.
    assert abs(float(np.mean(errors))) < 1.0
    assert float(np.mean(np.abs(errors) <= 2.0)) >= 0.9


def test_the_staircase_round_trips_and_judges_typed_digits():
    stairs = hearing_check.Staircase(triplets=3)
    stairs.record(0.0, True)
    stairs.record(-2.0, False)
    again = hearing_check.Staircase.from_dict(stairs.as_dict())
    assert again.next_snr() == 0.0 and not again.done
    assert hearing_check.heard_right("507", "5 0 7")
    assert not hearing_check.heard_right("507", "570")
    assert len(set(hearing_check.digits(np.random.default_rng(3)))) == 3


def test_speech_in_noise_is_mixed_at_the_asked_snr():
    rng = np.random.default_rng(4)
    speech = np.sin(np.linspace(0, 400 * np.pi, 8000))
    noise = hearing_check.speech_shaped_noise(speech, rng, 12000)
    quiet = hearing_check.mix(speech, noise, -10.0)
    loud = hearing_check.mix(speech, noise, 10.0)
    assert quiet.shape == loud.shape == (12000,)
    # Louder speech against the same noise: the noise-only tail is relatively quieter.
    assert np.std(loud[9000:]) < np.std(quiet[9000:])
