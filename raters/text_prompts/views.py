"""Judges' pages of the text-prompt protocol, under /listen/<challenge>/text/.

Thin: every action is a call into `raters.text_prompts`. Judges come in through their invitation
link like any rater (`views.rater_view`); their sounds play through the listening test's audio
and player endpoints, by token. A page shows the judge's answers and their own prompts, never
which clips are real, which system made a clip or where a text came from, until the reveal
step shows the true texts of the interpretability test.
"""

from __future__ import annotations

import secrets

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from stimuli.models import Challenge

from .. import listening, text_prompts
from ..errors import ListeningError
from ..models import Rater, TextJudge
from ..views import rater_view

TEMPLATE = "raters/text/{}.html"


def _judge(rater: Rater) -> TextJudge:
    judge = text_prompts.judge_of(rater)
    if judge is None:
        raise ListeningError("This link is not a judge's link of a text-prompt study.", 403)
    return judge


def _home(challenge: Challenge) -> HttpResponseRedirect:
    # Post/redirect/get: a reload never resubmits an answer.
    return HttpResponseRedirect(reverse("raters:text_home", args=[challenge.slug]), status=303)


def _key() -> str:
    return secrets.token_urlsafe(16)


def _context(challenge: Challenge, judge: TextJudge, **extra) -> dict:
    return {"challenge": challenge, "judge": judge, "study": judge.study, **extra}


def _heard(rater: Rater, rows: list) -> list:
    listening.page_shown(rater)
    for row in rows:
        _, row.listened = listening.listened_now(rater, row.token)
    return rows


@rater_view
def home(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    """The judge's next step, resumed where it was left."""
    judge = _judge(rater)
    if judge.started_at is None:
        return render(request, TEMPLATE.format("start"), _context(challenge, judge))
    if not judge.study.is_open:
        return render(request, TEMPLATE.format("paused"), _context(challenge, judge))
    step = text_prompts.next_step(judge)
    failed = text_prompts.failed_counts(judge)
    if step.test == "reveal":
        rows = text_prompts.reveal_rows(judge)
        for row in rows:
            row.key = _key()
        return render(request, TEMPLATE.format("reveal"), _context(challenge, judge, rows=rows))
    if step.test in (text_prompts.INTERPRETABILITY, text_prompts.REALISM):
        items = list(text_prompts.answerable(judge, step.test))
        context = _context(
            challenge,
            judge,
            step=step,
            number=items.index(step.trial) + 1,
            total=len(items),
            failed=failed[step.test],
            key=_key(),
            shown=_shown(step),
        )
        if not step.waiting:
            context["trial"] = _heard(rater, [step.trial])[0]
        return render(request, TEMPLATE.format(step.test), context)
    if step.test == "prompt":
        clips = []
        if step.prompt_set is not None and not step.waiting:
            clips = _heard(rater, list(step.prompt_set.clips.order_by("index")))
            for number, clip in enumerate(clips, 1):  # numbered and named, one Tab stop each
                clip.player_id = f"sound-{number}"
                clip.short = f"Sound {number}"
                clip.label = f"Sound {number} of {len(clips)}"
        return render(
            request,
            TEMPLATE.format("prompt"),
            _context(
                challenge,
                judge,
                step=step,
                clips=clips,
                all_heard=all(clip.listened.ok for clip in clips),
                key=_key(),
                prompt_key=_key(),
                shown_set=step.prompt_set.token if clips else "",
                **_prompt_progress(judge),
            ),
        )
    return render(request, TEMPLATE.format("done"), _context(challenge, judge, failed=failed))


def _prompt_progress(judge: TextJudge) -> dict:
    sets = list(judge.prompt_sets.select_related("generation").order_by("position"))
    return {
        "sets": sets,
        "counted": text_prompts.prompts_counted(judge),
        "can_type": text_prompts.prompts_counted(judge) < judge.study.prompts,
        "failed_message": text_prompts.FAILED_FOR_JUDGE,
    }


@rater_view
def progress(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    """The htmx partial a waiting page polls: its prompts' progress; the page reloads itself
    (HX-Refresh) once something it waits for is ready."""
    judge = _judge(rater)
    step = text_prompts.next_step(judge)
    # The set whose sounds the page shows gets no link to itself.
    shown_set = request.GET.get("shown_set", "")
    response = render(
        request,
        TEMPLATE.format("_progress"),
        _context(challenge, judge, step=step, shown_set=shown_set, **_prompt_progress(judge)),
    )
    if step.test != "prompt" and request.GET.get("shown", "") != _shown(step):
        # A sound the page waited for is ready (a prompt page instead shows a link, so that a
        # prompt being typed is not lost).
        response["HX-Refresh"] = "true"
    return response


def _shown(step: text_prompts.Step) -> str:
    """What a page shows of the judge's step, as its progress poll compares it."""
    item = step.trial or step.prompt_set
    return f"{step.test}:{item.token if item else ''}:{'waiting' if step.waiting else 'ready'}"


@rater_view
@require_POST
def begin(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    text_prompts.start(_judge(rater))
    return _home(challenge)


@rater_view
@require_POST
def describe(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    text_prompts.save_description(
        _judge(rater),
        request.POST.get("token", ""),
        text=request.POST.get("text", ""),
        key=request.POST.get("key", ""),
        require_heard=True,
    )
    return _home(challenge)


@rater_view
@require_POST
def mark(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    """A mark of the reveal step, changeable until the marks are submitted; htmx gets the row's
    mark cell back, so that nothing reloads."""
    judge = _judge(rater)
    saved, _ = text_prompts.save_mark(
        judge,
        request.POST.get("token", ""),
        correct=request.POST.get("correct", ""),
        key=request.POST.get("key", ""),
    )
    if not request.htmx:
        return _home(challenge)
    row = next(r for r in text_prompts.reveal_rows(judge) if r.pk == saved.trial_id)
    row.key = _key()
    return render(request, TEMPLATE.format("_mark"), {"challenge": challenge, "row": row})


@rater_view
@require_POST
def submit_marks(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    text_prompts.submit_marks(_judge(rater))
    return _home(challenge)


@rater_view
@require_POST
def realism(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    text_prompts.save_realism(
        _judge(rater),
        request.POST.get("token", ""),
        says_real=request.POST.get("answer", ""),
        key=request.POST.get("key", ""),
        require_heard=True,
    )
    return _home(challenge)


@rater_view
@require_POST
def prompt(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    """A typed prompt. htmx gets the progress and a fresh prompt field back instead of a new
    page, so that a sound playing on the page plays on."""
    judge = _judge(rater)
    typed = request.POST.get("prompt", "")
    error = ""
    try:
        text_prompts.submit_prompt(judge, typed, key=request.POST.get("key", ""))
    except ListeningError as exc:
        if not request.htmx:
            raise
        error = exc.message
    if not request.htmx:
        return _home(challenge)
    context = _context(
        challenge,
        judge,
        step=text_prompts.next_step(judge),
        prompt_key=_key(),
        error=error,
        typed=typed if error else "",
        shown_set=request.POST.get("shown_set", ""),
        **_prompt_progress(judge),
    )
    return render(request, TEMPLATE.format("_prompt_sent"), context)


@rater_view
@require_POST
def answer_prompt(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    text_prompts.save_prompt_answer(
        _judge(rater),
        request.POST.get("token", ""),
        match=request.POST.get("match", ""),
        quality=request.POST.get("quality", ""),
        diversity=request.POST.get("diversity", ""),
        key=request.POST.get("key", ""),
        require_heard=True,
    )
    return _home(challenge)
