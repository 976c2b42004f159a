"""Time from a submitted prompt to five playable clips, with the procedural baseline's text
variant (the demo's text-prompt study, 4 s clips at 22,050 Hz).

A prompt is submitted as a judge's page does (`submit_prompt`: the request is stored and its job
queued); a worker's job serves it (`run_text_job`, the body of the gpu-queue task, run here in
this process: the benchmark measures the work, not the broker); the clips are playable once the
judge's page has taken them in and each has been served once, loudness-aligned
(`collect` + `serve_audio`).

- one judge: prompts one after another, one job each;
- concurrent judges, batched: J judges submit at the same moment; one job serves them all (one
  generator load);
- concurrent judges, one job per prompt (the reference): the same prompts, each served by its
  own job in turn, as a queue without batching would.

    python benchmarks/bench_text_prompts.py [--judges 4] [--repeats 5]

Runs on a throw-away SQLite database and media folder unless DATABASE_URL is set. Figures are
medians and 95th percentiles over every prompt of every repeat.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scratch_site import django_in_scratch  # noqa: E402  (beside this script)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    django_in_scratch()
    from foley_platform.celery import app
    from raters import listening, text_prompts
    from stimuli.demo import seed_text_demo
    from stimuli.generators import text_prompts as text_generation
    from stimuli.job_kinds import GENERATE_TEXT
    from stimuli.models import Job

    challenge, _ = seed_text_demo(per_category=2)
    text_prompts.study_of(challenge).delete()  # the demo's own counts: the benchmark sets its own
    study = text_prompts.create_study(
        challenge,
        list(challenge.systems.all()),
        judges=args.judges + 1,
        interpretability_clips=1,
        realism_clips=2,
        prompts=50,
    )
    text_prompts.set_open(study, True)
    judges = [text_prompts.invite_judge(study) for _ in range(args.judges + 1)]
    keys = iter(f"bench-{n:08d}" for n in range(10**8))
    for judge in judges:
        text_prompts.start(judge)  # in-process: the first two tests' clips are made here
        while (step := text_prompts.next_step(judge)).test != "prompt":
            if step.test == "interpretability":
                text_prompts.save_description(judge, step.trial.token, text="x", key=next(keys))
            elif step.test == "reveal":
                for trial in text_prompts.reveal_rows(judge):
                    text_prompts.save_mark(judge, trial.token, correct="no", key=next(keys))
                text_prompts.submit_marks(judge)
            else:
                text_prompts.save_realism(judge, step.trial.token, says_real="real", key=next(keys))

    # From here on a job is queued, not run, when a prompt is submitted (an in-memory broker
    # nobody reads); the benchmark runs the queued jobs itself, as a worker would.
    app.conf.update(task_always_eager=False, broker_url="memory://")

    def submit(judge, prompt: str):
        prompt_set, _ = text_prompts.submit_prompt(judge, prompt, key=next(keys))
        return prompt_set

    def queued() -> list[int]:
        return list(
            Job.objects.filter(kind=GENERATE_TEXT, state=Job.State.QUEUED).values_list(
                "pk", flat=True
            )
        )

    def playable(judge, prompt_set) -> None:
        text_prompts.collect(judge)
        clips = list(prompt_set.clips.all())
        assert len(clips) == study.clips_per_prompt, prompt_set.generation.error
        for clip in clips:
            assert listening.serve_audio(judge.rater, clip.token).status_code == 200

    prompts = ["a dog barking in the rain", "fast footsteps on gravel", "a distant gunshot"]
    single, batched, one_by_one, jobs_batched = [], [], [], []
    for repeat in range(args.repeats):
        text = f"{prompts[repeat % len(prompts)]} {repeat}"
        # One judge.
        started = time.perf_counter()
        prompt_set = submit(judges[-1], text)
        for job in queued():
            text_generation.run_text_job(job)
        playable(judges[-1], prompt_set)
        single.append(time.perf_counter() - started)
        # Concurrent judges, batched: one queued job takes every judge's prompt.
        started = time.perf_counter()
        sets = [submit(judge, f"{text} (judge {n})") for n, judge in enumerate(judges[:-1])]
        waiting = queued()
        jobs_batched.append(len(waiting))
        for job in waiting:
            text_generation.run_text_job(job)
        for judge, prompt_set in zip(judges[:-1], sets, strict=True):
            playable(judge, prompt_set)
            batched.append(time.perf_counter() - started)
        # The reference: the same prompts, one job each, served in turn.
        started = time.perf_counter()
        sets = []
        for n, judge in enumerate(judges[:-1]):
            sets.append(submit(judge, f"{text} (judge {n}, alone)"))
            for job in queued():
                text_generation.run_text_job(job)
        for judge, prompt_set in zip(judges[:-1], sets, strict=True):
            playable(judge, prompt_set)
            one_by_one.append(time.perf_counter() - started)

    def figures(seconds: list[float]) -> str:
        return (
            f"median {statistics.median(seconds):6.2f} s   p95 {np.percentile(seconds, 95):6.2f} s"
        )

    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"prompt -> {study.clips_per_prompt} playable clips of {challenge.clip_duration_s:g} s at "
        f"{challenge.sample_rate:,} Hz, procedural baseline's text variant, {args.repeats} "
        f"repeats; {os.cpu_count()} cores, load {load}"
    )
    print(f"  one judge                               {figures(single)}")
    print(
        f"  {args.judges} concurrent judges, batched          {figures(batched)}"
        f"   (jobs per round: {statistics.median(jobs_batched):g})"
    )
    print(f"  {args.judges} concurrent judges, one job per prompt {figures(one_by_one)}")


if __name__ == "__main__":
    main()
