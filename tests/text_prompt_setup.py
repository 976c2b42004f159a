"""A small text-prompt study built through the services: short clips, a described reference set
uploaded as a folder with its CSV, and the baseline's text variant as the system."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from raters import text_prompts
from stimuli.audio import encode_wav
from stimuli.generators.services import set_generator
from stimuli.generators.text_prompts import import_described_clips
from stimuli.models import Challenge, Generator, System
from stimuli.services import create_challenge, create_system, create_team

DESCRIPTIONS = [
    ("dog_bark", "a dog barks twice"),
    ("dog_bark", "a small dog yelping"),
    ("dog_bark", "a big dog barking far away"),
    ("rain", "rain on a tin roof"),
    ("rain", "light rain in a forest"),
    ("rain", "a heavy storm with rain"),
]


def reference_folder(challenge: Challenge, root: Path, count: int = 12) -> tuple[Path, str]:
    """A reference set as uploaded: category folders of WAVs, and the CSV text describing them."""
    rng = np.random.default_rng(0)
    lines = ["file,text"]
    for n in range(count):
        slug, text = DESCRIPTIONS[n % len(DESCRIPTIONS)]
        folder = root / slug
        folder.mkdir(parents=True, exist_ok=True)
        samples = 0.1 * rng.standard_normal((challenge.clip_frames, 1))
        (folder / f"{n:03d}.wav").write_bytes(encode_wav(samples, challenge.sample_rate, 16))
        lines.append(f'{slug}/{n:03d}.wav,"{text} ({n})"')
    return root, "\n".join(lines) + "\n"


def text_system(challenge: Challenge, name: str, module: str) -> System:
    team = create_team(challenge, name=f"Team {name}")
    system = create_system(
        team=team, track=challenge.tracks.first(), name=name, kind=System.Kind.GENERATOR
    )
    generator = set_generator(system, module=module, trusted=True)
    # Validated at once without a broker; with a worker, wait for its verdict.
    deadline = time.monotonic() + 120
    while generator.state == Generator.State.PENDING:
        assert time.monotonic() < deadline, "the generator's validation did not finish"
        time.sleep(0.2)
        generator.refresh_from_db()
    return system


def build_text_study(
    tmp_path: Path,
    *,
    slug: str = "text-study",
    module: str = "stimuli.generators.baseline",
    **counts,
):
    """A challenge with 12 described clips, one text-conditioned system and an open study."""
    challenge = create_challenge(
        name=slug,
        slug=slug,
        categories=[("dog_bark", "Dog bark"), ("rain", "Rain")],
        clip_duration_s=0.5,
        sample_rate=8000,
    )
    folder, csv_text = reference_folder(challenge, tmp_path / "reference")
    import_described_clips(challenge, folder, csv_text)
    system = text_system(challenge, "Text system", module)
    counts = {
        "judges": 3,
        "interpretability_clips": 3,
        "realism_clips": 4,
        "prompts": 2,
        "clips_per_prompt": 3,
        **counts,
    }
    study = text_prompts.create_study(challenge, [system], **counts)
    text_prompts.set_open(study, True)
    return challenge, study, system


def take_study(
    judge,
    *,
    first_key: int = 0,
    correct: Callable = lambda trial: True,
    says_real: Callable = lambda trial: "real",
    match: Callable[[int], str] = lambda n: "yes",
    until: str = "done",
) -> None:
    """`judge` through the study as the services see it, up to the test `until` (the end by
    default): every description, the marks (`correct(trial)` each), the realism answers
    (`says_real(trial)`), a prompt of its own and the prompt sets (`match(n)` for the n-th
    answer); request keys numbered from `first_key`."""
    n = first_key
    while (step := text_prompts.next_step(judge)).test != until:
        n += 1
        key = f"key-{n:06d}"
        if step.test == "interpretability":
            text_prompts.save_description(judge, step.trial.token, text="a sound", key=key)
        elif step.test == "reveal":
            for trial in text_prompts.reveal_rows(judge):
                n += 1
                text_prompts.save_mark(
                    judge, trial.token, correct=correct(trial), key=f"key-{n:06d}"
                )
            text_prompts.submit_marks(judge)
        elif step.test == "realism":
            text_prompts.save_realism(
                judge, step.trial.token, says_real=says_real(step.trial), key=key
            )
        elif step.prompt_set is None:
            text_prompts.submit_prompt(judge, f"a dog barks {n}", key=key)
        else:
            text_prompts.save_prompt_answer(
                judge, step.prompt_set.token, match=match(n), quality="4", diversity="3", key=key
            )
