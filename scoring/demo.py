"""The whole demo challenge on the embedded default (SQLite, in-process tasks), in one call.

Reference sets and seven uploaded systems come from `stimuli.demo`; the procedural baseline and
its two variants generate their clips; the objective stage computes FAD, picks finalists
and medoids; the listening test opens; with `simulate_raters`, simulated raters fill it and the
results are published, so the leaderboard shows computed numbers. Each step is skipped when its
output exists, so running the demo again only prints the links.

The challenges' settings are their definition files' (challenges/demo.yaml and
challenges/demo-text.yaml): the weight-free log-mel embedding for FAD and medoids, as VGGish's
and OpenL3's weights are not shipped with the platform (see the README to add them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from raters import demo as raters_demo
from raters import enrolment, selectors
from raters.models import Rater
from stimuli.demo import (
    DEMO_FILE,
    DEMO_PASSWORD,
    DEMO_USER,
    ensure_organizer,
    seed_demo,
    seed_text_demo,
)
from stimuli.generators import services as generators
from stimuli.job_kinds import GENERATE
from stimuli.models import Challenge, Clip, FadResult, Job, Medoid
from stimuli.objective import config
from stimuli.objective import services as objective

from . import services
from .models import Snapshot

Echo = Callable[[str], None]
Progress = Callable[[int, int, str], None]
DEMO_LISTENER = "Demo listener"


@dataclass
class DemoRun:
    challenge: Challenge
    username: str
    password: str
    listen_path: str
    published: bool
    text_challenge: Challenge | None = None
    text_judge_path: str = ""


DEMO_FARM = 3


def run_demo(
    *,
    clips_per_category: int = 52,
    simulate_raters: bool = False,
    n_raters: int = 6,
    echo: Echo | None = None,
    progress: Progress | None = None,
    objective_settings: Mapping[str, Any] | None = None,
) -> DemoRun:
    """The demo challenge run end to end; `objective_settings` replaces some of its file's
    objective settings (a lighter run: fewer resamples per FAD interval, fewer medoids)."""
    say = echo or (lambda _line: None)
    objective_settings = dict(objective_settings or {})
    medoids = objective_settings.get(
        "medoids_per_category",
        yaml.safe_load(DEMO_FILE.read_text())["objective"]["medoids_per_category"],
    )
    if clips_per_category < medoids:
        raise ValueError(
            f"the listening test takes {medoids} medoids per system and category: at least "
            f"{medoids} clips"
        )
    summary = seed_demo(system_clips=clips_per_category)
    challenge = summary.challenge
    if objective_settings:
        chosen = config.objective_settings(challenge)
        for name, value in objective_settings.items():
            setattr(chosen, name, value)
        chosen.save(update_fields=list(objective_settings))
    say(f"{'Created' if summary.created else 'Found'} the demo challenge '{challenge.name}'.")

    if not Clip.objects.filter(challenge=challenge, source_job__kind=GENERATE).exists():
        say("Generating the procedural baseline and its two variants ...")
        for system in generators.create_baseline_systems(challenge, track_code="B"):
            job = generators.generate_now(system, clips_per_category, 0, progress=progress)
            if job.state != Job.State.SUCCEEDED:
                raise RuntimeError(f"generation of {system.name} failed: {job.error}")

    if not FadResult.objects.filter(challenge=challenge).exists():
        say("Objective stage: embeddings, FAD per system and category, finalists ...")
        # The models, the league and the finalists are challenges/demo.yaml's.
        _with_torchcrepe(challenge)
        job = objective.rank_by_fad_now(challenge, progress=progress)
        if job.state != Job.State.SUCCEEDED:
            raise RuntimeError(f"the objective stage failed: {job.error}")

    if not Medoid.objects.filter(challenge=challenge).exists():
        say(f"Selecting {medoids} medoids per finalist and category (k-means) ...")
        job = objective.select_medoids_now(challenge, progress=progress)
        if job.state != Job.State.SUCCEEDED:
            raise RuntimeError(f"medoid selection failed: {job.error}")

    challenge.refresh_from_db()
    published = Snapshot.objects.filter(challenge=challenge).exists()
    if not published and not selectors.listening_test(challenge).is_open:
        say("Opening the listening test (rendering loudness-aligned stimuli) ...")
        raters_demo.open_listening_test(challenge)

    listener = Rater.objects.filter(challenge=challenge, label=DEMO_LISTENER).first()
    if listener is None:
        listener = enrolment.invite(challenge, label=DEMO_LISTENER)

    if simulate_raters and not published:
        say(f"{n_raters} simulated raters fill the listening test ...")
        # A team's farm of three among them: the results show it named and excluded, and how
        # much each rank rests on a few raters.
        raters_demo.simulate_raters(challenge, n_raters=n_raters, farm=DEMO_FARM)
        say("Scoring and publishing the results ...")
        services.publish(challenge, ensure_organizer())
        published = True
    challenge.refresh_from_db()
    text_challenge, created = seed_text_demo()
    say(f"{'Created' if created else 'Found'} the text-prompt study '{text_challenge.name}'.")
    return DemoRun(
        challenge=challenge,
        username=DEMO_USER,
        password=DEMO_PASSWORD,
        listen_path=f"/listen/{challenge.slug}/join/{listener.access_key}/",
        published=published,
        text_challenge=text_challenge,
        text_judge_path=raters_demo.open_text_study(text_challenge),
    )


TORCHCREPE = "hearbaseline.torchcrepe"


def _with_torchcrepe(challenge: Challenge) -> None:
    """The HEAR baseline torchcrepe (real weights shipped with the package) joins the league of
    challenges/demo.yaml where it can be imported: the file cannot say what is installed."""
    import importlib

    try:
        importlib.import_module(TORCHCREPE)
    except ImportError:  # torchcrepe needs torchaudio, not a dependency of the platform
        return
    league = config.objective_settings(challenge).league_models
    if all(entry["name"] != TORCHCREPE for entry in league):
        config.set_models(challenge, league_models=[*league, {"name": TORCHCREPE}])
