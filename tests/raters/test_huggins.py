"""The screening's signals, checked numerically: the Huggins pitch lives in the interaural phase
of its band only (each ear alone is flat noise; the foils differ between the ears as much, with
no edge in frequency, so no pitch), left minus right does not name the target, and the
digit-triplet staircase finds a simulated listener's known threshold."""

from __future__ import annotations

import itertools

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
    pair = huggins.noise_pair(np.random.default_rng(1), RATE, pitch=True)
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


def _filter_correlations(pair: np.ndarray) -> np.ndarray:
    """The mean interaural phase cosine in each third-octave band from 100 Hz to 4 kHz: what
    the ears' filters compare (a pitch needs one band unlike its neighbours)."""
    cosine, freqs = huggins.interaural_phase(pair, RATE)
    edges = 100 * 2 ** (np.arange(17) / 3)
    return np.array(
        [np.mean(cosine[(freqs >= lo) & (freqs < hi)]) for lo, hi in itertools.pairwise(edges)]
    )


def test_a_foil_differs_between_the_ears_as_much_but_carries_no_pitch():
    rng = np.random.default_rng(2)
    foil = huggins.noise_pair(rng, RATE, pitch=False)
    target = huggins.noise_pair(rng, RATE, pitch=True)
    freqs = np.fft.rfftfreq(foil.shape[0], 1 / RATE)
    cosine, _ = huggins.interaural_phase(foil, RATE)
    # As many bins inverted as the target's band holds, and each ear the same flat noise.
    assert np.sum(cosine < -0.999) == np.sum(huggins.band(freqs))
    left, right = (np.abs(np.fft.rfft(foil[:, ch])) for ch in (0, 1))
    np.testing.assert_allclose(left, right, rtol=1e-9, atol=1e-9)
    # Every filter sees the same slight decorrelation: none stands out as the target's does.
    foil_bands, target_bands = _filter_correlations(foil), _filter_correlations(target)
    assert foil_bands.min() > 0.8
    assert target_bands.min() < 0.5


def test_left_minus_right_does_not_name_the_target():
    """The reader that named every target when the foils were the same in both ears: the energy
    of left minus right, per interval, over 400 trials (at the rate of the demo's challenge)."""
    rate = 16_000
    noise, gap = round(huggins.NOISE_S * rate), round(huggins.GAP_S * rate)
    energies, is_target, picked = [], [], 0
    for seed in range(400):
        sound, target = huggins.trial(np.random.default_rng(seed), rate)
        side = [
            float(np.sum((part[:, 0] - part[:, 1]) ** 2) / np.sum(part**2))
            for part in (sound[k * (noise + gap) : k * (noise + gap) + noise] for k in range(3))
        ]
        energies += side
        is_target += [k + 1 == target for k in range(3)]
        picked += int(np.argmax(side)) + 1 == target
    energies, is_target = np.array(energies), np.array(is_target)
    # The best threshold either way round, fitted with every label known.
    above = [
        0.5 * (np.mean(energies[is_target] > t) + np.mean(energies[~is_target] <= t))
        for t in np.unique(energies)
    ]
    accuracy = max(max(above), 1 - min(above))
    assert accuracy <= 0.6, accuracy
    # The interval with the most left-minus-right energy is the target a third of the time.
    assert 0.25 <= picked / 400 <= 0.42, picked


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
                assert inside > 0.8
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
