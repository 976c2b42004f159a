"""Raters' pages: consent, instructions, familiarization, trials (and A/B trials), breaks, the
end, and diversity.

Thin: every action is a service call. A rater is found from a signed cookie (set by the invitation
and crowd links) or the logged-in account; pages show only that rater's own sessions.
"""

from __future__ import annotations

import secrets
from functools import wraps

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from stimuli.models import Challenge
from stimuli.permissions import may_read

from . import (
    delivery,
    diversity,
    enrolment,
    listening,
    screening,
    selectors,
    sessions,
    statements,
    votes,
)
from .errors import ListeningError
from .models import PAIRS, CategorySession, Rater, TextJudge
from .workload import workload

# A rater's browser is known by a signed cookie holding its access key (the secret of its
# invitation link), scoped to the challenge's pages: the hot pages find the rater and the
# challenge in one query, without reading a server-side session.
RATER_COOKIE = "rater-{}"  # by the challenge's slug
RATER_SALT = "raters.identity"


def _rater_path(slug: str) -> str:
    return reverse("raters:home", args=[slug])


def _cookie_rater(request: HttpRequest, slug: str, token: str | None = None) -> Rater | None:
    key = request.get_signed_cookie(
        RATER_COOKIE.format(slug),
        default=None,
        salt=RATER_SALT,
        max_age=settings.SESSION_COOKIE_AGE,
    )
    if not key:
        return None
    # With the challenge and its text-prompt judge role, if any, in the same query (and the
    # trial of `token`, where the request names one).
    return statements.rater_by_key(key, slug, token)


def _account_rater(request: HttpRequest, challenge: Challenge) -> Rater | None:
    if not request.user.is_authenticated:
        return None
    rater = Rater.objects.filter(challenge=challenge, user=request.user).first()
    if rater is None and may_read(request.user, challenge):
        # Only organizers enrol themselves. A participant account rates in the challenge it
        # was made for, with its team: enrolled anywhere else it would have no team, and its
        # ratings of its own team's systems could not be removed.
        rater = enrolment.enrol_user(challenge, request.user, kind=Rater.Kind.ORGANIZER)
    return rater


def _remember(response: HttpResponse, rater: Rater, slug: str) -> HttpResponse:
    response.set_signed_cookie(
        RATER_COOKIE.format(slug),
        rater.access_key,
        salt=RATER_SALT,
        max_age=settings.SESSION_COOKIE_AGE,
        path=_rater_path(slug),
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )
    return response


def _refuse(
    request: HttpRequest,
    challenge: Challenge,
    message: str,
    status: int,
    *,
    rater: bool = False,
    crowd: bool = False,
) -> HttpResponse:
    """The refusal page: a rater's (`rater`) without the site's navigation, a crowd worker's at
    the link (`crowd`) without a way into a test they are not in."""
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"detail": message}, status=status)
    context = {"challenge": challenge, "message": message, "rater": rater or crowd, "crowd": crowd}
    return render(request, "raters/refused.html", context, status=status)


def rater_view(view=None, *, token=None):
    """Resolve the challenge and the rater; anyone else gets a page that says how to join.
    `token(request, kwargs)`, where given, names the sound the request is about: its trial, if
    it is one, is read with the rater (`statements.rater_by_key`)."""
    if view is None:
        return lambda view: rater_view(view, token=token)

    @wraps(view)
    def wrapper(request: HttpRequest, slug: str, *args, **kwargs):
        rater = _cookie_rater(request, slug, token(request, kwargs) if token else None)
        if rater is not None:
            challenge = rater.challenge
        else:
            challenge = get_object_or_404(Challenge, slug=slug)
            rater = _account_rater(request, challenge)
        if rater is None and view.__name__ == "home" and request.method == "GET":
            # The public's way in (the home page links here): how to take part, not a 403.
            return render(request, "raters/how_to_join.html", {"challenge": challenge})
        if rater is None:
            return _refuse(
                request,
                challenge,
                "To take part, open your invitation link or log in with your participant account.",
                403,
            )
        try:
            response = view(request, challenge, rater, *args, **kwargs)
        except ListeningError as exc:
            response = _refuse(request, challenge, exc.message, exc.status, rater=True)
        if not response.has_header("Cache-Control"):
            # Pages are per rater and per moment; only audio sets its own caching.
            add_never_cache_headers(response)
        return response

    return wrapper


def _confirm_switch(request: HttpRequest, challenge: Challenge) -> HttpResponse:
    """A link of another rater than the one this browser holds: the switch needs the person's
    own POST from this page, so another site's link (a cross-site GET) cannot make the browser
    someone else."""
    response = render(request, "raters/switch.html", {"challenge": challenge})
    add_never_cache_headers(response)
    return response


@require_http_methods(["GET", "HEAD", "POST"])
def join(request: HttpRequest, slug: str, key: str) -> HttpResponse:
    """An invitation link: the browser becomes this rater (after a confirming POST when it
    already is another one)."""
    challenge = get_object_or_404(Challenge, slug=slug)
    rater = Rater.objects.filter(challenge=challenge, access_key=key).first()
    if rater is None:
        raise Http404("This invitation link is not valid.")
    held = _cookie_rater(request, slug)
    if held is not None and held.pk != rater.pk and request.method != "POST":
        return _confirm_switch(request, challenge)
    return _remember(redirect("raters:home", slug=slug), rater, slug)


@require_http_methods(["GET", "HEAD", "POST"])
def crowd(request: HttpRequest, slug: str, key: str) -> HttpResponse:
    """A crowd-sourcing link, e.g. `...?PROLIFIC_PID=..&STUDY_ID=..&SESSION_ID=..`."""
    challenge = get_object_or_404(Challenge, slug=slug)
    participant = request.GET.get("PROLIFIC_PID", request.GET.get("participant", "")).strip()
    held = _cookie_rater(request, slug)
    if (
        held is not None and participant and held.participant_id == participant
    ):  # this browser's own worker, back through the link
        return redirect("raters:home", slug=slug)
    if held is not None and request.method != "POST":  # another rater: enrol on confirmation
        return _confirm_switch(request, challenge)
    try:
        rater = enrolment.enrol_crowd(
            challenge,
            key,
            participant_id=participant,
            study_id=request.GET.get("STUDY_ID", ""),
            session_id=request.GET.get("SESSION_ID", ""),
            address=getattr(request, "client_ip", ""),  # see foley_platform.limits
            user=request.user,
        )
    except ListeningError as exc:
        return _refuse(request, challenge, exc.message, exc.status, crowd=True)
    return _remember(redirect("raters:home", slug=slug), rater, slug)


def _is_judge(rater: Rater) -> bool:
    try:
        return rater.text_judge is not None
    except TextJudge.DoesNotExist:
        return False


# A pause offered within a category after this many sounds (about 10 minutes of 4-s sounds).
BREAK_EVERY = 40


@rater_view
def home(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    """Where a rater always comes back to: the next thing to do, resumed where it was left."""
    if _is_judge(rater):  # a judge of the text-prompt protocol
        return redirect("raters:text_home", slug=challenge.slug)
    if rater.consented_at is None:
        return redirect("raters:consent", slug=challenge.slug)
    if rater.instructed_at is None:
        return redirect("raters:instructions", slug=challenge.slug)
    if rater.diversity_role:
        return redirect("raters:diversity", slug=challenge.slug)
    if rater.finished_at is not None:
        return _end(request, challenge, rater)
    test = selectors.listening_test(challenge)
    if not test.is_open:
        return _closed(request, challenge)
    # The rater's few sessions in one query: the open one, and how many are closed.
    own, rated = statements.rater_sessions(rater)
    # Headphones, level and hearing are checked before the first category (which the checks
    # assign): a rater with a session has cleared them.
    if not own and screening.pending(rater):
        return redirect("raters:screening", slug=challenge.slug)
    session = next((s for s in own if s.state == CategorySession.State.OPEN), None)
    closed = sum(s.state == CategorySession.State.CLOSED for s in own)
    if session is None:
        return _break(request, challenge, rater)
    if session.familiarized_at is None:
        clips = list(session.familiarization.order_by("position"))
        listening.page_shown(rater)
        for number, clip in enumerate(clips, 1):
            _, clip.listened = listening.listened_now(rater, clip.token, test)
            # Numbered and named: a screen reader's list of buttons says which is which.
            clip.player_id = f"example-{number}"
            clip.short = f"Example {number}"
            clip.label = f"Example {number} of {len(clips)}: {session.category.name}"
        return render(
            request,
            "raters/familiarization.html",
            {
                "challenge": challenge,
                "session": session,
                "clips": clips,
                "all_heard": all(clip.listened.ok for clip in clips),
                **_progress(rater, test, closed, rated),
            },
        )
    if test.design == PAIRS:
        return _pair(request, challenge, rater, session, _progress(rater, test, closed, rated))
    point = sessions.resume(session)
    if point is None:  # every trial answered: the session closes on its last answer
        sessions.close_session(session)
        return redirect("raters:home", slug=challenge.slug)
    trial, listened = listening.shown_now(rater, point.token, test)
    return render(
        request,
        "raters/trial.html",
        {
            "challenge": challenge,
            "session": session,
            "trial": trial,
            "listened": listened,
            "key": secrets.token_urlsafe(16),
            "next_token": point.following,
            "number": point.position + 1,
            "total": point.total,
            "percent": round(100 * point.position / point.total),
            # A long category asks for a pause every BREAK_EVERY sounds: tired ears rate worse.
            "pause": point.position > 0 and point.position % BREAK_EVERY == 0,
            "hold_minutes": int(sessions.ABANDONED_AFTER.total_seconds() // 60),
            **_progress(rater, test, closed, rated),
        },
    )


def _pair(
    request: HttpRequest, challenge: Challenge, rater: Rater, session, progress: dict
) -> HttpResponse:
    """An A/B trial of the pairs design: its two sounds, A and B, and a vote per question."""
    point = votes.resume(session)
    if point is None:  # every A/B trial voted on: the session closes on its last vote
        sessions.close_session(session)
        return redirect("raters:home", slug=challenge.slug)
    pair = point.pair
    listening.page_shown(rater)
    sides = []
    for name, side in votes.SIDES:
        trial, trial.listened = listening.listened_now(rater, getattr(pair, side).token)
        sides.append({"id": f"sound-{name.lower()}", "label": f"Sound {name}", "clip": trial})
    return render(
        request,
        "raters/pair.html",
        {
            "challenge": challenge,
            "session": session,
            "pair": pair,
            "sides": sides,
            "all_heard": all(side["clip"].listened.ok for side in sides),
            "key": secrets.token_urlsafe(16),
            "next_tokens": point.following,
            "number": pair.position + 1,
            "total": point.total,
            "percent": round(100 * pair.position / point.total),
            # Two sounds an A/B trial: a pause every half as many as the sliders'.
            "pause": pair.position > 0 and pair.position % (BREAK_EVERY // 2) == 0,
            "hold_minutes": int(sessions.ABANDONED_AFTER.total_seconds() // 60),
            **progress,
        },
    )


def _closed(request: HttpRequest, challenge: Challenge) -> HttpResponse:
    message = sessions.closed_message(challenge)
    return render(
        request,
        "raters/closed.html",
        {
            "challenge": challenge,
            "message": message,
            "published": challenge.phase == Challenge.Phase.PUBLISHED,
        },
    )


def _progress(rater: Rater, test, closed: int | None = None, rated: int | None = None) -> dict:
    """The progress line: categories done and the minimum, counted without reading anyone
    else's sessions (`closed` and `rated`, the categories with stimuli, where already read)."""
    if closed is None:
        closed = rater.sessions.filter(state=CategorySession.State.CLOSED).count()
    if rated is None:
        rated = sessions.rated_categories(rater.challenge)
    fewest, most = sessions.categories_for(rater, test)
    return {
        "categories_done": closed,
        "category_number": closed + 1,
        "categories_min": min(fewest, rated),
        "categories_max": most,
    }


def _break(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    test = selectors.listening_test(challenge)
    last = rater.sessions.order_by("-order").select_related("category").first()
    return render(
        request,
        "raters/break.html",
        {
            "challenge": challenge,
            "last": last,
            "done": sessions.rater_done(rater),
            "can_continue": sessions.can_continue(rater),
            "is_open": test.is_open,
            "crowd": rater.kind == Rater.Kind.CROWD,
            **_progress(rater, test),
        },
    )


def _end(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    test = selectors.listening_test(challenge)
    crowd = rater.kind == Rater.Kind.CROWD
    paid = crowd and enrolment.completion_earned(rater)
    return render(
        request,
        "raters/end.html",
        {
            "challenge": challenge,
            "rater": rater,
            "completion_url": enrolment.completion_link(test) if paid else "",
            "completion_code": enrolment.completion_code(test) if paid else "",
            "no_code": crowd and not paid,
        },
    )


@rater_view
def consent(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    error = ""
    if request.method == "POST":
        if request.POST.get("agree") == "yes":
            enrolment.record_consent(rater)
            return redirect("raters:instructions", slug=challenge.slug)
        error = "Please tick the box to agree, or close this page to leave."
    test = selectors.listening_test(challenge)
    fewest = sessions.categories_for(rater, test)[0]
    return render(
        request,
        "raters/consent.html",
        {
            "challenge": challenge,
            "rater": rater,
            "test": test,
            "crowd": rater.kind == Rater.Kind.CROWD,
            "workload": workload(challenge, test, fewest),
            "hold": {
                "first_answer": int(sessions.CROWD_FIRST_ANSWER_WITHIN.total_seconds() // 60),
                "between_answers": int(sessions.ABANDONED_AFTER.total_seconds() // 60),
            },
            "error": error,
        },
        status=400 if error else 200,
    )


@rater_view
def instructions(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    if rater.consented_at is None:
        return redirect("raters:consent", slug=challenge.slug)
    if request.method == "POST":
        enrolment.record_instructions(rater)
        if not rater.diversity_role and not rater.sessions.exists():
            if screening.pending(rater):  # the checks first; they assign the first category
                return redirect("raters:screening", slug=challenge.slug)
            sessions.next_session(rater)
        return redirect("raters:home", slug=challenge.slug)
    test = selectors.listening_test(challenge)
    return render(
        request,
        "raters/instructions.html",
        {"challenge": challenge, "rater": rater, "test": test, **_progress(rater, test)},
    )


@rater_view
@require_POST
def start_trials(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    session_id = request.POST.get("session", "")
    if not session_id.isdigit():
        raise ListeningError("The form names no session.")
    session = get_object_or_404(CategorySession, pk=int(session_id), rater=rater)
    sessions.complete_familiarization(session)
    return redirect("raters:home", slug=challenge.slug)


def _store(request: HttpRequest, challenge: Challenge, rater: Rater, save) -> HttpResponse:
    """Store one answer by `save` (a rating, or a vote on an A/B trial), then show the next step
    (post/redirect/get: a reload never resubmits)."""
    stored, created = save(
        rater,
        request.POST.get("token", ""),
        quality=request.POST.get("quality", ""),
        fit=request.POST.get("fit", ""),
        key=request.POST.get("key", ""),
        require_heard=True,
    )
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"created": created, "quality": stored.quality, "fit": stored.fit})
    return HttpResponseRedirect(reverse("raters:home", args=[challenge.slug]), status=303)


@rater_view
@require_POST
def rate(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    return _store(request, challenge, rater, sessions.save_rating)


@rater_view
@require_POST
def vote(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    return _store(request, challenge, rater, votes.save_vote)


@rater_view
@require_POST
def next_category(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    step = sessions.next_session(rater)
    if step.session is None and step.reason in ("done", "max", "full"):
        sessions.finish(rater)
    return redirect("raters:home", slug=challenge.slug)


@rater_view
@require_POST
def finish(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    """End the rater's part, then show the end page (a GET on this site). A form's redirect to
    the crowd platform's origin is a form action the Content-Security-Policy forbids, so the
    end page shows the completion code and leaves by a link and a refresh, which it allows."""
    sessions.finish(rater)
    return HttpResponseRedirect(reverse("raters:home", args=[challenge.slug]), status=303)


@rater_view(token=lambda request, kwargs: kwargs["token"])
@require_GET  # a HEAD sends no byte of the sound, so it is not a delivery
def audio(request: HttpRequest, challenge: Challenge, rater: Rater, token: str) -> HttpResponse:
    return listening.serve_audio(
        rater,
        token,
        request.headers.get("Range", ""),
        sock=request.environ.get("gunicorn.socket"),
        # Handed to the web server in front only when the request came through it: a browser
        # that reaches this process directly gets the bytes from here, and never a receipt.
        accel=getattr(request, "via_proxy", False),
    )


def delivered(request: HttpRequest) -> HttpResponse:
    """The web server in front has finished sending a sound (deploy/nginx.conf's post_action):
    its receipt is redeemed when the file went out whole. Reachable only through that server's
    internal location and from its address (`via_proxy`, set from FOLEY_PROXY_ADDRESSES: a
    browser that reaches this process directly is a 404 here), and a receipt is signed by the
    process that wrote it."""
    if not settings.AUDIO_ACCEL_REDIRECT or not getattr(request, "via_proxy", False):
        raise Http404
    listening.redeem_receipt(
        request.headers.get(delivery.RECEIPT_HEADER, ""),
        request.headers.get("X-Foley-Completion", ""),
        request.headers.get("X-Foley-Bytes-Sent", ""),
    )
    return HttpResponse(status=204)


def _event(request: HttpRequest) -> listening.PlayerEvent:
    """A player event's body, read once per request."""
    if not hasattr(request, "player_event"):
        try:
            request.player_event = listening.read_player_event(request.body)
        except ListeningError as exc:
            request.player_event = exc
    if isinstance(request.player_event, ListeningError):
        raise request.player_event
    return request.player_event


def _event_token(request: HttpRequest, kwargs: dict) -> str | None:
    if request.method != "POST":
        return None
    try:
        return _event(request).token
    except ListeningError:  # said by the view, with the rater known
        return None


@rater_view(token=_event_token)
@require_POST
def player_event(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    """One event of a sound's player; answers the server's verdict on that sound so far."""
    event = _event(request)
    verdict = listening.player_event(
        rater, event.token, event.kind, event.t, seek_from=event.seek_from
    )
    return JsonResponse(verdict.as_dict())


@rater_view
def diversity_page(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    if not rater.diversity_role:
        raise ListeningError("Diversity is rated by organizers with the diversity role.", 403)
    if rater.consented_at is None or rater.instructed_at is None:
        return redirect("raters:consent", slug=challenge.slug)
    trials = diversity.trials(rater)
    trial = diversity.next_trial(rater)
    if trial is not None and not selectors.listening_test(challenge).is_open:
        return _closed(request, challenge)
    if trial is None:
        return render(
            request,
            "raters/diversity_done.html",
            {"challenge": challenge, "count": len(trials)},
        )
    following = next((t.token for t in trials if t.position > trial.position), None)
    trial, listened = listening.shown_now(rater, trial.token)
    return render(
        request,
        "raters/diversity.html",
        {
            "challenge": challenge,
            "trial": trial,
            "listened": listened,
            "item": trial.item,
            "key": secrets.token_urlsafe(16),
            "next_token": following,
            "number": trial.position + 1,
            "total": len(trials),
            "percent": round(100 * trial.position / len(trials)),
        },
    )


@rater_view
@require_POST
def rate_diversity(request: HttpRequest, challenge: Challenge, rater: Rater) -> HttpResponse:
    rating, created = diversity.save_rating(
        rater,
        request.POST.get("token", ""),
        diversity=request.POST.get("diversity", ""),
        key=request.POST.get("key", ""),
        require_heard=True,
    )
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"created": created, "diversity": rating.diversity})
    return HttpResponseRedirect(reverse("raters:diversity", args=[challenge.slug]), status=303)
