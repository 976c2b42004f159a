"""Read-only views of published results: the challenges and snapshots to show, where publishing
stands, and the CLAP scores of the text-prompt study's answers (their tables: scoring.tables)."""

from __future__ import annotations

from django.db.models import Max, Q, QuerySet

from raters.models import CategorySession, ListeningTest, TextPromptStudy
from stimuli.models import Challenge

from .models import Snapshot


def published_challenges() -> QuerySet[Challenge]:
    """Challenges with public results, each with its newest public snapshot's number."""
    return (
        Challenge.objects.filter(snapshots__public=True)
        .annotate(latest_snapshot=Max("snapshots__number", filter=Q(snapshots__public=True)))
        .order_by("name")
    )


def snapshots(challenge: Challenge, *, organizer: bool = False) -> QuerySet[Snapshot]:
    """A challenge's snapshots, newest first: all of them for organizers, else the public ones."""
    found = Snapshot.objects.filter(challenge=challenge)
    if not organizer:
        found = found.filter(public=True)
    return found.order_by("-number")


def latest_snapshot(challenge: Challenge, *, organizer: bool = False) -> Snapshot | None:
    return snapshots(challenge, organizer=organizer).first()


def publication_state(challenge: Challenge) -> dict:
    """What publishing would close and what it keeps, for the organizer's confirmation."""
    test = ListeningTest.objects.filter(challenge=challenge).first()
    study = TextPromptStudy.objects.filter(challenge=challenge).first()
    return {
        "test_open": test is not None and test.is_open,
        "sessions_in_progress": CategorySession.objects.filter(
            rater__challenge=challenge, state=CategorySession.State.OPEN
        ).count(),
        "study_open": study is not None and study.is_open,
        "final_published": challenge.phase == Challenge.Phase.PUBLISHED,
        "snapshot_count": Snapshot.objects.filter(challenge=challenge).count(),
    }


def text_prompt_clap(challenge) -> dict:
    """Per answered prompt set: judge, system, the judge's match and its best clip's CLAP score
    (None until a worker has scored its clips), and what would enable the score if it is not."""
    from raters.models import PromptAnswer, PromptClip
    from stimuli.objective.prompt_scores import clap_setup, stored_scores

    answers = PromptAnswer.objects.filter(
        prompt_set__judge__study__challenge=challenge
    ).select_related("prompt_set__judge__rater", "prompt_set__judge__system")
    answers = list(answers.order_by("prompt_set__judge__rater__index", "prompt_set__position"))
    clips: dict[int, list[int]] = {}
    for set_id, audio_id in PromptClip.objects.filter(
        prompt_set__in=[a.prompt_set_id for a in answers]
    ).values_list("prompt_set_id", "audio_id"):
        clips.setdefault(set_id, []).append(audio_id)
    pairs = [(i, a.prompt_set.prompt) for a in answers for i in clips.get(a.prompt_set_id, [])]
    scores, model_id = stored_scores(pairs)
    sets = []
    for a in answers:
        found = [scores[(i, a.prompt_set.prompt)] for i in clips.get(a.prompt_set_id, [])
                 if (i, a.prompt_set.prompt) in scores]  # fmt: skip
        sets.append(
            {
                "judge": a.prompt_set.judge.rater.code,
                "system": a.prompt_set.judge.system.name,
                "match": a.match,
                "best": round(max(found), 6) if found else None,
            }
        )
    # Published: the files by name, never where the server keeps them.
    return {"sets": sets, "needs": clap_setup().needs_files, "model_id": model_id}
