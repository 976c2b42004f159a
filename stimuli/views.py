"""Organizer pages. Thin: forms in, services and selectors out."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from . import selectors
from .models import Challenge
from .permissions import organizer_required


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"challenges": Challenge.objects.all()})


@organizer_required
def challenges(request: HttpRequest) -> HttpResponse:
    return render(request, "stimuli/challenges.html", {"challenges": Challenge.objects.all()})


@organizer_required
def challenge_detail(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    return render(
        request,
        "stimuli/challenge.html",
        {
            "challenge": challenge,
            "counts": selectors.clip_counts(challenge),
            "systems": selectors.systems_with_counts(challenge),
            "jobs": selectors.recent_jobs(challenge),
        },
    )
