"""The screening stage's pages (see `raters.screening`): one check at a time, a retry while
attempts are left, and the screen-out page. Thin: every action is a service call."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from stimuli.models import Challenge

from . import listening, screening, selectors, sessions
from .models import Rater
from .views import rater_view

INSTRUCTIONS = {
    "level": "Put on your headphones and play this noise. Set your volume so that it is clearly "
    "audible but comfortable, then leave the volume as it is for the rest of the study.",
    "headphones": "You will hear three noises. One of them has a faint tone inside it. Which "
    "noise held the tone? The check needs headphones: over loudspeakers the tone cannot be heard.",
    "hearing": "You will hear three digits spoken in noise. Type the three digits you heard, in "
    "order. When you are not sure, guess.",
}


def _cleared(challenge: Challenge, rater: Rater) -> HttpResponse:
    """All checks done: the first category is assigned, and the test goes on."""
    if not rater.sessions.exists() and rater.instructed_at is not None:
        sessions.next_session(rater)
    return redirect("raters:home", slug=challenge.slug)


@rater_view
def page(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    if rater.consented_at is None or rater.instructed_at is None:
        return redirect("raters:home", slug=challenge.slug)
    now = screening.begin(rater)
    if now.step is None:
        return _cleared(challenge, rater)
    test = selectors.listening_test(challenge)
    settings = screening.settings_of(test)
    context = {
        "challenge": challenge,
        "step": now.step,
        "step_name": screening.STEP_NAMES[now.step],
        "steps": [screening.STEP_NAMES[s] for s in settings.steps()],
        "step_number": settings.steps().index(now.step) + 1,
    }
    if now.screened_out is not None:
        link = screening.screen_out_link(settings)
        crowd = rater.kind == Rater.Kind.CROWD
        context |= {
            "attempt": now.screened_out,
            "screen_out_url": link if crowd else "",
            "screen_out_code": screening.screen_out_code(settings) if crowd else "",
        }
        return render(request, "raters/screened_out.html", context)
    if now.failed is not None:
        context |= {"attempt": now.failed, "left": now.attempts_left}
        return render(request, "raters/screening_retry.html", context)
    trial = now.trial
    listening.page_shown(rater)
    _, trial.listened = listening.listened_now(rater, trial.token, test)
    total = now.attempt.staircase.get("triplets") or now.attempt.trials.count()
    context |= {
        "attempt": now.attempt,
        "trial": trial,
        "number": trial.position + 1,
        "total": total,
        "instructions": INSTRUCTIONS[now.step],
    }
    return render(request, "raters/screening.html", context)


@rater_view
@require_POST
def answer(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    screening.answer(rater, request.POST.get("token", ""), request.POST.get("answer", ""))
    return HttpResponseRedirect(reverse("raters:screening", args=[challenge.slug]), status=303)


@rater_view
@require_POST
def retry(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    screening.begin(rater, retry=True)
    return HttpResponseRedirect(reverse("raters:screening", args=[challenge.slug]), status=303)
