"""Organizers' page of the text-prompt protocol: the described reference set, the study, its
judges and their progress, and every prompt a system failed on. Thin: services do the work."""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_POST

from stimuli.generators.text_prompts import TextPromptError, import_described_clips
from stimuli.models import Challenge, DescribedClip, System
from stimuli.objective.prompt_scores import clap_setup, request_scores, stored_scores
from stimuli.permissions import challenge_organizer_required

from .. import text_prompts
from ..errors import ListeningError
from ..models import PromptClip, TextJudge, TextPromptStudy
from . import quality


class StudyForm(forms.Form):
    systems = forms.ModelMultipleChoiceField(
        queryset=System.objects.none(), widget=forms.CheckboxSelectMultiple
    )
    judges = forms.IntegerField(min_value=1, max_value=1000, initial=10)
    interpretability_clips = forms.IntegerField(min_value=1, max_value=50, initial=10)
    realism_clips = forms.IntegerField(min_value=2, max_value=50, initial=10)
    prompts = forms.IntegerField(min_value=1, max_value=50, initial=10)
    clips_per_prompt = forms.IntegerField(min_value=1, max_value=20, initial=5)

    def __init__(self, *args, challenge: Challenge, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["systems"].queryset = System.objects.filter(
            challenge=challenge, kind=System.Kind.GENERATOR
        )


class ReferenceForm(forms.Form):
    audio = forms.FileField(help_text="A zip with one folder per category, as the development set.")
    descriptions = forms.FileField(help_text="A CSV of file,text (file as category/name.wav).")


class GoldForm(forms.Form):
    gold_clips = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Described clips (their file names, one a line) anyone listening can tell are "
        "real: each judge's realism test holds one as a gold item. Before judges begin.",
    )


def _context(challenge: Challenge, **extra) -> dict:
    study = text_prompts.study_of(challenge)
    judges = []
    if study is not None:
        verdicts = quality.verdicts(challenge)
        for judge in TextJudge.objects.filter(study=study).select_related("rater", "system"):
            judge.link = reverse("raters:join", args=[challenge.slug, judge.rater.access_key])
            judge.answers = text_prompts.answer_counts(judge)
            judge.verdict = verdicts.get(judge.rater.code)
            judges.append(judge)
    return {
        "challenge": challenge,
        "study": study,
        "described": DescribedClip.objects.filter(challenge=challenge).count(),
        "judges": judges,
        "failures": text_prompts.failures(study) if study else [],
        "clap": _clap_state(study),
        "study_form": StudyForm(challenge=challenge),
        "reference_form": ReferenceForm(),
        "gold_form": GoldForm(
            initial={
                "gold_clips": "\n".join(study.gold_clips.values_list("name", flat=True))
                if study
                else ""
            }
        ),
        **extra,
    }


@challenge_organizer_required
def page(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    return render(request, "raters/text/organize.html", _context(challenge))


@challenge_organizer_required
@require_POST
def create(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    form = StudyForm(request.POST, challenge=challenge)
    if form.is_valid():
        data = dict(form.cleaned_data)
        try:
            text_prompts.create_study(challenge, list(data.pop("systems")), **data)
        except ListeningError as exc:
            form.add_error(None, exc.message)
    if form.errors:
        context = _context(challenge, study_form=form)
        return render(request, "raters/text/organize.html", context, status=400)
    messages.success(request, "The text-prompt study is created.")
    return redirect("text_prompts:page", slug=slug)


@challenge_organizer_required
@require_POST
def reference(request: HttpRequest, slug: str) -> HttpResponse:
    """The described reference set: checked and stored all at once, or not at all."""
    challenge = get_object_or_404(Challenge, slug=slug)
    form = ReferenceForm(request.POST, request.FILES)
    if form.is_valid():
        with tempfile.TemporaryDirectory(prefix="foley-described-") as scratch:
            path = Path(scratch) / "reference.zip"
            with open(path, "wb") as handle:
                for chunk in form.cleaned_data["audio"].chunks():
                    handle.write(chunk)
            try:
                if not zipfile.is_zipfile(path):
                    raise TextPromptError("The audio must be a zip archive.")
                data = form.cleaned_data["descriptions"].read()
                stored = import_described_clips(challenge, path, data)
            except (TextPromptError, UnicodeDecodeError) as exc:
                form.add_error(None, getattr(exc, "message", "The CSV must be UTF-8 text."))
    if form.errors:
        context = _context(challenge, reference_form=form)
        return render(request, "raters/text/organize.html", context, status=400)
    messages.success(request, f"Stored {stored} described clips.")
    return redirect("text_prompts:page", slug=slug)


def _study(challenge: Challenge) -> TextPromptStudy:
    study = text_prompts.study_of(challenge)
    if study is None:
        raise ListeningError("Create the study first.", 409)
    return study


@challenge_organizer_required
@require_POST
def set_open(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    try:
        text_prompts.set_open(_study(challenge), request.POST.get("open") == "1")
    except ListeningError as exc:
        messages.error(request, exc.message)
    return redirect("text_prompts:page", slug=slug)


@challenge_organizer_required
@require_POST
def invite(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    try:
        judge = text_prompts.invite_judge(_study(challenge), label=request.POST.get("label", ""))
    except ListeningError as exc:
        messages.error(request, exc.message)
    else:
        link = request.build_absolute_uri(
            reverse("raters:join", args=[slug, judge.rater.access_key])
        )
        messages.success(request, f"Invitation for judge {judge.rater.code}: {link}")
    return redirect("text_prompts:page", slug=slug)


def _clap_pairs(study: TextPromptStudy) -> list[tuple[int, str]]:
    """(audio id, prompt) of every clip the systems generated for a judge's prompt."""
    clips = PromptClip.objects.filter(prompt_set__judge__study=study)
    return list(clips.values_list("audio_id", "prompt_set__prompt"))


def _clap_state(study: TextPromptStudy | None) -> dict:
    pairs = _clap_pairs(study) if study else []
    return {"setup": clap_setup(), "clips": len(pairs), "scored": len(stored_scores(pairs)[0])}


@challenge_organizer_required
@require_POST
def clap_scores(request: HttpRequest, slug: str) -> HttpResponse:
    """Queue the CLAP score of every generated clip that has none (a GPU worker computes it)."""
    challenge = get_object_or_404(Challenge, slug=slug)
    setup = clap_setup()
    try:
        study = _study(challenge)
        if not setup.enabled:
            raise ListeningError(setup.needs, 409)
    except ListeningError as exc:
        messages.error(request, exc.message)
    else:
        job = request_scores(challenge, _clap_pairs(study))
        queued = len(job.params["score_ids"]) if job else 0
        messages.success(request, f"{queued} clip{pluralize(queued)} queued for a CLAP score.")
    return redirect("text_prompts:page", slug=slug)


@challenge_organizer_required
@require_POST
def gold(request: HttpRequest, slug: str) -> HttpResponse:
    """The realism test's gold clips, named by file; every name must be a described clip."""
    challenge = get_object_or_404(Challenge, slug=slug)
    form = GoldForm(request.POST)
    try:
        study = _study(challenge)
        names = [n.strip() for n in form.data.get("gold_clips", "").splitlines() if n.strip()]
        text_prompts.set_gold_clips(study, names)
    except ListeningError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"{len(names)} gold clip(s) set.")
    return redirect("text_prompts:page", slug=slug)
