"""The procedural baseline's text variant: keyword-driven synthesis, seeded, valid."""

from __future__ import annotations

import numpy as np
import pytest

from sandbox.process import Limits
from stimuli.audio import ClipSpec
from stimuli.generators import baseline
from stimuli.generators.contract import check_output
from stimuli.generators.validate import validate_target


def test_prompt_words_pick_categories_and_modifiers():
    slugs, shift = baseline.text_plan("A distant dog barking in the heavy rain")
    assert slugs == ["dog_bark", "rain"]
    assert shift["level_db"] < 0 and shift["density"] > 1
    assert baseline.text_plan("something nobody knows")[0] == ["rain"]
    assert baseline.text_plan("Typing on a keyboard, then a cough")[0] == [
        "keyboard",
        "sneeze_cough",
    ]


def test_text_clips_are_seeded_valid_and_differ_by_prompt():
    model = baseline.load_model(None)
    a = baseline.generate_from_text(model, "a car engine passing by", 3, 5)
    assert check_output(a, 3, ClipSpec()) == []
    np.testing.assert_array_equal(
        a, baseline.generate_from_text(model, "a car engine passing by", 3, 5)
    )
    # Clip k does not depend on how many clips the call asked for.
    np.testing.assert_array_equal(
        a[:1], baseline.generate_from_text(model, "a car engine passing by", 1, 5)
    )
    assert not np.array_equal(
        a, baseline.generate_from_text(model, "a car engine passing by", 3, 6)
    )
    assert not np.array_equal(
        a, baseline.generate_from_text(model, "a truck engine passing by", 3, 5)
    )
    assert not np.array_equal(a[0], a[1])


def test_quiet_prompt_is_quieter():
    model = baseline.load_model(None)
    loud = baseline.generate_from_text(model, "loud gunshot", 4, 1)
    quiet = baseline.generate_from_text(model, "quiet gunshot", 4, 1)
    assert np.abs(quiet).max() < np.abs(loud).max()


@pytest.mark.sandbox
def test_validator_accepts_the_text_variant():
    report = validate_target(
        "stimuli.generators.baseline",
        limits=Limits(load_timeout_s=60, call_timeout_s=30, memory_mb=600),
        categories=["rain"],
    )
    assert report.ok, report.problems
    assert report.has_text and "generate_from_text" in report.checks
    assert "prompts asked for together give their own clips" in report.checks
