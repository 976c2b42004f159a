"""Publishing results: collect the inputs, score them, freeze a snapshot."""

from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Max
from django.template.defaultfilters import pluralize
from django.utils import timezone

from raters import preparation, selectors
from raters import text_prompts as text_study
from raters.selectors import diversity_rows, rating_rows
from raters.text_prompts.quality import judged_rows as judged_text_prompt_rows
from scoring.job_kinds import PUBLISH
from stimuli import selectors as stimuli_selectors
from stimuli.definition import export as export_definition
from stimuli.definition import sha256 as definition_sha256
from stimuli.jobs import Failed, JobProgress, create_job, enqueue, run_job
from stimuli.models import Challenge, Job
from stimuli.objective.predictor_scores import predictor_summary
from stimuli.permissions import may_read, may_write
from stimuli.phases import advance

from .compute import score
from .definition import rules_from_text
from .inputs import Inputs, ScoringInputError, table_hash
from .models import ScoringSettings, Snapshot, SnapshotPlot
from .rules import Rules
from .selectors import text_prompt_clap
from .text_prompts import score_text_prompts
from .votes import add_pairwise

logger = logging.getLogger(__name__)

TEXT_PROMPT_COLUMNS = {
    "interpretability": ("judge", "system", "is_real", "correct"),
    "realism": ("judge", "system", "is_real", "says_real"),
    "prompts": ("judge", "system", "prompt", "match", "quality", "diversity"),
}


def add_text_prompt_results(challenge: Challenge, result: dict) -> dict:
    """The text-prompt study's results beside the DCASE ones (when the challenge has a study),
    with the hashes of its answer tables among the snapshot's inputs."""
    if text_study.study_of(challenge) is None:
        return result
    # The judges the rater-quality rules exclude are left out, of the CLAP correlation with
    # their answers too; every judge a rule named is listed with the reasons (the
    # "text-prompt-judges-excluded" download).
    rows, judged = judged_text_prompt_rows(challenge)
    excluded = {j["judge"] for j in judged if j["excluded"]}
    clap = text_prompt_clap(challenge)
    clap["sets"] = [s for s in clap["sets"] if s["judge"] not in excluded]
    result["text_prompt"] = score_text_prompts(rows, clap)
    result["text_prompt"]["judged"] = judged
    result.setdefault("inputs", {}).update(
        {
            f"text_prompt_{name}": table_hash(rows[name], cols)
            for name, cols in TEXT_PROMPT_COLUMNS.items()
        }
    )
    result["inputs"]["text_prompt_clap"] = table_hash(
        clap["sets"], ("judge", "system", "match", "best")
    )
    return result


# The job kind that scores and freezes the results (registered in apps.py).


def collect_inputs(challenge: Challenge) -> Inputs:
    """The input tables of a challenge: ratings, votes and diversity from the listening test, FAD
    results, teams and the learned predictors' means (where they ran) from the objective
    stage."""
    return inputs_from_rows(
        ratings=rating_rows(challenge),
        diversity=diversity_rows(challenge),
        pairs=selectors.export_vote_rows(challenge),
        # Every embedding model's FAD, for the league; the leaderboard shows the latest model's.
        fad=stimuli_selectors.fad_rows(challenge, every_model=True),
        teams=stimuli_selectors.team_rows(challenge),
        fad_model=stimuli_selectors.designated_fad_model(challenge) or "",
        predictors=predictor_rows(challenge),
    )


def predictor_rows(challenge: Challenge) -> list[dict]:
    """The predictors' means per system, category and axis, as the scoring reads them (the
    summary's rows without the database's system id); [] where the predictors have not run."""
    return [
        {k: v for k, v in row.items() if k != "system_id"} for row in predictor_summary(challenge)
    ]


def inputs_from_rows(
    *,
    ratings: list[dict],
    diversity: list[dict],
    fad: list[dict],
    teams: list[dict],
    fad_model: str = "",
    predictors: list[dict] | None = None,
    pairs: list[dict] | None = None,
) -> Inputs:
    return Inputs(
        ratings=list(ratings),
        diversity=list(diversity),
        fad=list(fad),
        teams=list(teams),
        fad_model=fad_model,
        predictors=list(predictors or []),
        pairs=list(pairs or []),
    )


def scoring_settings(challenge: Challenge) -> ScoringSettings:
    settings, _ = ScoringSettings.objects.get_or_create(challenge=challenge)
    return settings


def rules_for(challenge: Challenge) -> Rules:
    return scoring_settings(challenge).rules()


def preview(challenge: Challenge, user, inputs: Inputs | None = None) -> dict:
    """What publishing now would show, for organizers only; nothing is stored."""
    if not may_read(user, challenge):
        raise PermissionDenied("Only the challenge's organizers can preview results.")
    if inputs is None:
        inputs = collect_inputs(challenge)
    rules = rules_for(challenge)
    result = add_pairwise(inputs, score(inputs, rules), rules)
    return add_text_prompt_results(challenge, result)


def publish(
    challenge: Challenge,
    user,
    inputs: Inputs | None = None,
    *,
    final: bool = True,
    public: bool = True,
    job: Job | None = None,
    progress: JobProgress | None = None,
) -> Snapshot:
    """Score the challenge now and freeze the result as its next snapshot (organizers only).

    A final snapshot closes the listening test and the text-prompt study for good; an interim
    one leaves them open and may be shown to organizers only. `inputs` defaults to what
    `collect_inputs` reads from the database.
    """
    if not may_write(user, challenge):
        raise PermissionDenied("Only the challenge's organizers can publish results.")
    if final and not public:
        raise ScoringInputError("final results are public; only interim ones can stay private")
    if not final:
        _refuse_interim_after_final(Challenge.objects.get(pk=challenge.pk))
    was_open = study_was_open = False
    study = None
    if final:
        # Final publication closes the listening test first: the ratings read below are then
        # all there will ever be, so publishing again gives the same numbers.
        was_open = selectors.listening_test(challenge).is_open
        if was_open:
            preparation.set_open(challenge, False)
        # The text-prompt study closes too, for the same reason.
        study = text_study.study_of(challenge)
        study_was_open = study is not None and study.is_open
        if study_was_open:
            text_study.set_open(study, False)
    step = _Steps(progress)
    try:
        step(0)
        if inputs is None:
            inputs = collect_inputs(challenge)
        rules = rules_for(challenge)
        step(1)
        # Scored outside the transaction: it takes seconds and needs no lock.
        result = add_pairwise(inputs, score(inputs, rules, step.within(1)), rules)
        result = add_text_prompt_results(challenge, result)
        if inputs.pairs and not result["pairwise"]["tracks"]:
            # As below, for the pairs design: every vote set aside is no leaderboard.
            excluded = len(result["pairwise"]["excluded_sessions"])
            raise ScoringInputError(
                f"no vote on an A/B trial counts yet ({excluded} session"
                f"{pluralize(excluded)} excluded; see the preview)."
            )
        if (
            not inputs.pairs
            and (inputs.ratings or inputs.diversity)
            and not any(result["tracks"].values())
        ):
            # Results of the objective stage alone may be published; a listening test whose
            # every rating was set aside would publish an empty leaderboard as if it were a
            # finding.
            excluded = result["counts"]["sessions_excluded"]
            raise ScoringInputError(
                "no system has ratings that count in every category yet "
                f"({excluded} session{pluralize(excluded)} excluded; see the preview)."
            )
        from .plots import render  # matplotlib: where results are published, never in web requests

        step(2)
        drawn = render(result, final=final)
        if drawn.missing:  # published without them; the pages name each (render logged why)
            logger.warning(
                "%s: publishing without the plot(s) %s",
                challenge.slug,
                ", ".join(f"{m['kind']} of track {m['track']}" for m in drawn.missing),
            )
        step(3)
        with transaction.atomic():
            # Lock the challenge so that two publications get consecutive numbers.
            locked = Challenge.objects.select_for_update(no_key=True).get(pk=challenge.pk)
            if job is not None and (done := Snapshot.objects.filter(job=job).first()):
                return done
            if not final:  # final results published while this one was scored
                _refuse_interim_after_final(locked)
            # The definition frozen with the result, read where the snapshot is made; it must
            # give the rules the result was scored by (an organizer may have changed them on a
            # page while it was scored).
            definition = export_definition(locked)
            if rules_from_text(definition).to_dict() != rules.to_dict():
                raise ScoringInputError(
                    "the scoring settings changed while the results were scored; publish again"
                )
            last = Snapshot.objects.filter(challenge=challenge).aggregate(n=Max("number"))["n"]
            if final:
                advance(locked, "publish_final")
            snapshot = Snapshot.objects.create(
                challenge=challenge,
                number=(last or 0) + 1,
                result=result,
                input_hashes=result["inputs"],
                settings=result["settings"],
                code_version=result["code_version"],
                published_at=timezone.now(),
                published_by=user,
                job=job,
                final=final,
                public=public,
                definition=definition,
                definition_sha256=definition_sha256(definition),
                plots_missing=drawn.missing,
            )
            SnapshotPlot.objects.bulk_create(
                SnapshotPlot(snapshot=snapshot, track=track, kind=kind, svg=svg, png=png)
                for track, kind, svg, png in drawn.plots
            )
            return snapshot
    except Exception:
        if was_open:  # nothing was published: the test goes on
            preparation.set_open(challenge, True)
        if study_was_open:
            text_study.set_open(study, True)
        raise


class _Steps:
    """The publication's steps as the job's progress: "Step 2 of 4: scoring …", and within a
    step the scoring's own count (the bootstrap's replicates)."""

    NAMES = (
        "reading the ratings and the FAD results",
        "scoring, with the intervals",
        "drawing the plots",
        "saving the snapshot",
    )

    def __init__(self, progress: JobProgress | None):
        self.progress = progress

    def __call__(self, index: int, detail: str = "") -> None:
        if self.progress is not None:
            n = len(self.NAMES)
            message = f"Step {index + 1} of {n}: {self.NAMES[index]}{detail}"
            self.progress(index, n, message, force=not detail)

    def within(self, index: int):
        def report(done: int, total: int, what: str) -> None:
            self(index, f" ({what.lower()} {done} of {total})")

        return report if self.progress is not None else None


def _refuse_interim_after_final(challenge: Challenge) -> None:
    if challenge.phase == Challenge.Phase.PUBLISHED:
        raise ScoringInputError(
            "the results are final and the listening test is closed; publish final results again "
            "instead of an interim snapshot"
        )


def request_publication(
    challenge: Challenge, user, *, final: bool = True, public: bool = True
) -> Job:
    """The publish action: a job on a worker scores and freezes the results.

    Without a broker the job runs at once and comes back finished.
    """
    if not may_write(user, challenge):
        raise PermissionDenied("Only the challenge's organizers can publish results.")
    job = create_job(
        PUBLISH, challenge=challenge, by=user, params={"final": final, "public": public}
    )
    enqueue(job)
    job.refresh_from_db()
    return job


def run_publish_job(job_id: int) -> Job:
    """Worker side of the publish action; a redelivered job returns the snapshot it made."""

    def work(job: Job, progress: JobProgress) -> dict:
        done = Snapshot.objects.filter(job=job).first()
        if done is None:
            try:
                done = publish(
                    job.challenge,
                    job.created_by,
                    final=job.params.get("final", True),
                    public=job.params.get("public", True),
                    job=job,
                    progress=progress,
                )
            except (ScoringInputError, PermissionDenied) as exc:
                return Failed(str(exc))
        progress(1, 1, f"Published results #{done.number}")
        return {"snapshot": done.number}

    return run_job(job_id, work)
