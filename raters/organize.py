"""Organizers' pages of the listening test: settings, preparation, opening and closing,
enrolment links, monitoring, and the CSV export."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_POST

from raters.job_kinds import PREPARE_LISTENING
from stimuli.exports import to_csv
from stimuli.models import Challenge, Job, Team
from stimuli.permissions import challenge_organizer_or_403, challenge_organizer_required

from . import enrolment, gold, monitoring, platform, preparation, screening, selectors
from .errors import ListeningError
from .models import GoldSound, ListeningTest, Rater, Screening
from .workload import workload


class SettingsForm(forms.ModelForm):
    completion_url = forms.URLField(
        required=False,
        assume_scheme="https",
        validators=[URLValidator(schemes=["https", "http"])],
        help_text="Where crowd-sourced raters are sent at the end (e.g. Prolific).",
    )

    class Meta:
        model = ListeningTest
        fields = [
            "design",
            "pairs_per_session",
            "anchor_pairs_per_session",
            "target_votes",
            "categories_min",
            "categories_max",
            "crowd_categories",
            "target_ratings",
            "anchors_per_session",
            "gold_per_session",
            "familiarization_clips",
            "loudness_alignment",
            "target_lufs",
            "diversity_gap_s",
            "listened_fraction",
            "completion_url",
            "completion_code",
            "consent_text",
            "instructions_text",
        ]
        labels = {
            "categories_min": "Categories per rater, at least",
            "categories_max": "Categories per rater, at most",
            "crowd_categories": "Categories per crowd worker",
            "target_ratings": "Ratings wanted per stimulus",
            "design": "How raters answer",
            "pairs_per_session": "A/B trials per session (pairs)",
            "anchor_pairs_per_session": "Hidden anchors' A/B trials per session (pairs)",
            "target_votes": "Votes wanted per pair of systems (pairs)",
            "anchors_per_session": "Hidden anchors per session",
            "gold_per_session": "Gold (trapping) trials per session",
            "familiarization_clips": "Familiarization examples",
            "target_lufs": "Target loudness (LUFS)",
            "diversity_gap_s": "Silence in diversity files (s)",
            "listened_fraction": "Share of each sound to hear before rating",
            "completion_url": "Completion URL",
        }
        widgets = {
            "consent_text": forms.Textarea(attrs={"rows": 3}),
            "instructions_text": forms.Textarea(attrs={"rows": 3}),
        }

    # The pairs design's settings: a form posted without them (one made before they existed)
    # keeps the test's own, and changes nothing the design's refusal would guard.
    KEPT_WHEN_LEFT_OUT = ("design", "pairs_per_session", "anchor_pairs_per_session", "target_votes")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["gold_per_session"].required = False  # none, as DCASE had, when left out
        if self.is_bound and any(name not in self.data for name in self.KEPT_WHEN_LEFT_OUT):
            data = self.data.copy()
            for name in self.KEPT_WHEN_LEFT_OUT:
                if name not in data:
                    data[name] = getattr(self.instance, name)
            self.data = data

    def clean_gold_per_session(self):
        return self.cleaned_data.get("gold_per_session") or 0

    def clean(self):
        data = super().clean()
        low, high = data.get("categories_min"), data.get("categories_max")
        if low is not None and high is not None and low > high:
            raise ValidationError("The minimum number of categories exceeds the maximum.")
        anchors = data.get("anchors_per_session")
        if anchors is not None and anchors % 3:
            self.add_error("anchors_per_session", "Use a multiple of 3 (one third of each type).")
        if self.instance.pk and (
            refusal := preparation.design_refusal(self.instance.challenge, self.changed_data)
        ):
            raise ValidationError(refusal[0].upper() + refusal[1:] + ".")
        return data


class ScreeningForm(forms.ModelForm):
    """The screening stage's settings; saved with "screening on" only (no row: no screening)."""

    enabled = forms.BooleanField(required=False, label="Screen raters before the first category")
    field_order = ["enabled"]
    screen_out_url = forms.URLField(
        required=False,
        assume_scheme="https",
        validators=[URLValidator(schemes=["https", "http"])],
        label="Screen-out URL",
        help_text="Where a screened-out crowd worker is sent (Prolific: the study's screen-out "
        "completion link); the screen-out code is added as cc unless it carries one.",
    )

    class Meta:
        model = Screening
        fields = [
            "who",
            "level_check",
            "headphone_check",
            "headphone_trials",
            "headphone_pass",
            "hearing_check",
            "hearing_triplets",
            "hearing_pass_db",
            "attempts",
            "screen_out_code",
            "screen_out_url",
        ]
        labels = {
            "who": "Who is screened",
            "headphone_pass": "Headphone trials right to pass",
            "hearing_pass_db": "Hearing check passes below (dB SNR)",
            "attempts": "Attempts per check (per participant id)",
        }

    def clean(self):
        data = super().clean()
        trials, needed = data.get("headphone_trials"), data.get("headphone_pass")
        if trials is not None and needed is not None and needed > trials:
            self.add_error("headphone_pass", "At most the number of trials.")
        if data.get("hearing_check") and (missing := gold.speaker_missing()):
            self.add_error("hearing_check", missing)
        return data


class GoldForm(forms.Form):
    """A gold sound and the answers it asks for. Nothing is required here: the service checks
    it all and names every problem at once (`gold.add_gold_sound`)."""

    file = forms.FileField(label="Gold sound (WAV)", required=False)
    label = forms.CharField(
        max_length=200, required=False, help_text="What it asks, e.g. 'set both to two'."
    )
    quality_min = forms.CharField(label="Quality, lowest expected", max_length=4, required=False)
    quality_max = forms.CharField(label="Quality, highest expected", max_length=4, required=False)
    fit_min = forms.CharField(label="Fit, lowest expected", max_length=4, required=False)
    fit_max = forms.CharField(label="Fit, highest expected", max_length=4, required=False)


class PlatformExportForm(forms.Form):
    file = forms.FileField(
        label="The crowd platform's submissions export (CSV)",
        help_text="On Prolific: the study's submissions, Download CSV. Loaded whole, replacing "
        "the previous one.",
    )


class InviteForm(forms.Form):
    label = forms.CharField(max_length=120, required=False)
    team = forms.ModelChoiceField(queryset=Team.objects.none(), required=False)

    def __init__(self, *args, challenge: Challenge, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = Team.objects.filter(challenge=challenge)


class AccountForm(forms.Form):
    username = forms.CharField(max_length=150)
    password = forms.CharField(min_length=8, widget=forms.PasswordInput)
    team = forms.ModelChoiceField(
        queryset=Team.objects.none(),
        required=False,
        help_text="The team's own systems are left out of this rater's scores.",
    )

    def __init__(self, *args, challenge: Challenge, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = Team.objects.filter(challenge=challenge)


def _context(request: HttpRequest, challenge: Challenge, **extra) -> dict:
    test = selectors.listening_test(challenge)
    crowd_url = request.build_absolute_uri(
        reverse("raters:crowd", args=[challenge.slug, test.crowd_key])
    )
    return {
        "challenge": challenge,
        "test": test,
        "form": SettingsForm(instance=test),
        "invite_form": InviteForm(challenge=challenge),
        "gold_form": GoldForm(),
        "platform_form": PlatformExportForm(),
        "platform_left": platform.unreconciled(challenge),
        "platform_count": test.platform_submissions.count(),
        "screening_form": ScreeningForm(
            instance=screening.settings_of(test) or Screening(test=test),
            initial={"enabled": screening.settings_of(test) is not None},
        ),
        "screening_enabled": screening.settings_of(test) is not None,
        "gold_sounds": GoldSound.objects.filter(challenge=challenge, builtin=False),
        "trapping_ready": gold.unplaced(challenge).count(),
        "trapping_heard": GoldSound.objects.filter(
            challenge=challenge, builtin=True, placed_at__isnull=False
        ).count(),
        "account_form": AccountForm(challenge=challenge),
        "crowd_url": crowd_url + "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"
        "&SESSION_ID={{%SESSION_ID%}}",
        "invited": Rater.objects.filter(challenge=challenge, kind=Rater.Kind.INVITED),
        "jobs": Job.objects.filter(challenge=challenge, kind=PREPARE_LISTENING)[:3],
        "open_refused": preparation.open_refused(challenge),
        "crowd_warning": enrolment.crowd_warning(challenge),
        "completion_code": enrolment.completion_code(test),
        "rules": selectors.rules_table(challenge),
        "sort_options": monitoring.sort_options(),
        "crowd_workload": workload(challenge, test, test.crowd_categories),
        "n_stimuli": challenge.stimuli.count(),
        "n_anchors": challenge.anchors.count(),
        "n_diversity": challenge.diversity_items.filter(audio__isnull=False).count(),
        **_progress_context(challenge),
        **extra,
    }


def _progress_context(challenge: Challenge, query=None) -> dict:
    return {
        "categories": selectors.category_progress(challenge),
        "stimuli": selectors.stimulus_progress(challenge),
        # One row per rater, compact verdicts, filtered and sorted by the page's filter form.
        "monitor": monitoring.table(challenge, query),
        "legend": monitoring.legend(),
    }


@challenge_organizer_required
def monitor(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    context = _context(request, challenge)
    if request.method == "POST":
        form = SettingsForm(request.POST, instance=context["test"])
        if form.is_valid():
            form.save()
            messages.success(request, "Listening-test settings saved.")
            return redirect("listening:monitor", slug=slug)
        context["form"] = form
        return render(request, "raters/organize.html", context, status=400)
    return render(request, "raters/organize.html", context)


@challenge_organizer_required
def progress(request: HttpRequest, slug: str) -> HttpResponse:
    """The monitoring tables alone, for the page's periodic refresh."""
    challenge = get_object_or_404(Challenge, slug=slug)
    return render(
        request,
        "raters/organize_progress.html",
        {
            "challenge": challenge,
            "test": selectors.listening_test(challenge),
            **_progress_context(challenge, request.GET),
        },
    )


@challenge_organizer_required
@require_POST
def prepare(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    job = preparation.request_preparation(challenge, request.user)
    messages.info(request, f"Preparation job #{job.pk}: {job.get_state_display()}.")
    return redirect("listening:monitor", slug=slug)


@challenge_organizer_required
@require_POST
def set_open(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    is_open = request.POST.get("open") == "1"
    try:
        preparation.set_open(challenge, is_open)
    except ListeningError as exc:
        messages.error(request, exc.message)
        return redirect("listening:monitor", slug=slug)
    messages.success(
        request, "The listening test is open." if is_open else "The listening test is closed."
    )
    if is_open and (warning := enrolment.crowd_warning(challenge)):
        messages.warning(request, warning)
    return redirect("listening:monitor", slug=slug)


@challenge_organizer_required
@require_POST
def add_gold(request: HttpRequest, slug: str) -> HttpResponse:
    """Upload a gold sound with the range each scale's answer must fall in."""
    challenge = get_object_or_404(Challenge, slug=slug)
    form = GoldForm(request.POST, request.FILES)
    if form.is_valid():
        data = form.cleaned_data
        try:
            sound = gold.add_gold_sound(
                challenge,
                data["file"].read() if data["file"] else b"",
                label=data["label"],
                quality=(data["quality_min"], data["quality_max"]),
                fit=(data["fit_min"], data["fit_max"]),
            )
        except ListeningError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Gold sound added: {sound.label}.")
            return redirect("listening:monitor", slug=slug)
    return render(
        request, "raters/organize.html", _context(request, challenge, gold_form=form), status=400
    )


@challenge_organizer_required
@require_POST
def platform_export(request: HttpRequest, slug: str) -> HttpResponse:
    """Load the crowd platform's submissions export: the crowd workers it does not list as
    valid leave the scoring (raters.platform)."""
    challenge = get_object_or_404(Challenge, slug=slug)
    form = PlatformExportForm(request.POST, request.FILES)
    if form.is_valid():
        try:
            loaded = platform.load_export(challenge, form.cleaned_data["file"].read())
        except ListeningError as exc:
            form.add_error("file", exc.message)
        else:
            statuses = ", ".join(f"{n} {s.lower()}" for s, n in sorted(loaded.by_status.items()))
            messages.success(
                request,
                f"Loaded {loaded.rows} submissions ({statuses}). {loaded.unknown} crowd "
                f"worker{pluralize(loaded.unknown)} of this test leave{'' if loaded.unknown != 1 else 's'} "
                "the scoring by it (see the reasons below).",
            )
            return redirect("listening:monitor", slug=slug)
    return render(
        request,
        "raters/organize.html",
        _context(request, challenge, platform_form=form),
        status=400,
    )


@challenge_organizer_required
@require_POST
def invite(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    form = InviteForm(request.POST, challenge=challenge)
    if not form.is_valid():
        return render(
            request,
            "raters/organize.html",
            _context(request, challenge, invite_form=form),
            status=400,
        )
    rater = enrolment.invite(challenge, **form.cleaned_data)
    link = request.build_absolute_uri(reverse("raters:join", args=[slug, rater.access_key]))
    messages.success(request, f"Invitation for {rater.code}: {link}")
    return redirect("listening:monitor", slug=slug)


@challenge_organizer_required
@require_POST
def add_account(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    form = AccountForm(request.POST, challenge=challenge)
    if form.is_valid():
        data = form.cleaned_data
        try:
            rater = enrolment.create_participant_account(
                challenge, username=data["username"], password=data["password"], team=data["team"]
            )
        except ListeningError as exc:
            form.add_error("username", exc.message)
        else:
            messages.success(request, f"Account {data['username']} rates as {rater.code}.")
            return redirect("listening:monitor", slug=slug)
    return render(
        request, "raters/organize.html", _context(request, challenge, account_form=form), status=400
    )


@challenge_organizer_required
@require_POST
def rate_diversity(request: HttpRequest, slug: str) -> HttpResponse:
    """The organizer takes the diversity role (allowed only without quality/fit sessions)."""
    challenge = get_object_or_404(Challenge, slug=slug)
    try:
        enrolment.enrol_organizer_for_diversity(challenge, request.user)
    except ListeningError as exc:
        messages.error(request, exc.message)
        return redirect("listening:monitor", slug=slug)
    return redirect("raters:home", slug=slug)


def csv_response(text: str, filename: str) -> HttpResponse:
    response = HttpResponse(text, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@challenge_organizer_or_403
def ratings_csv(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    text = to_csv(selectors.export_rating_rows(challenge), selectors.EXPORT_RATING_COLUMNS)
    return csv_response(text, f"{slug}-ratings.csv")


@challenge_organizer_or_403
def votes_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """The pairs design's votes, one row per vote and question, each with its sides' listening
    record: what the scoring reads (`score_offline --pairs` takes the file as it is)."""
    challenge = get_object_or_404(Challenge, slug=slug)
    text = to_csv(selectors.export_vote_rows(challenge), selectors.VOTE_COLUMNS)
    return csv_response(text, f"{slug}-votes.csv")


@challenge_organizer_or_403
def crowd_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """Each crowd worker's approve or reject decision, to apply on the recruiting platform."""
    challenge = get_object_or_404(Challenge, slug=slug)
    text = to_csv(selectors.crowd_decisions(challenge), selectors.CROWD_COLUMNS)
    return csv_response(text, f"{slug}-crowd.csv")


@challenge_organizer_or_403
def diversity_csv(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = get_object_or_404(Challenge, slug=slug)
    text = to_csv(selectors.diversity_rows(challenge), selectors.DIVERSITY_COLUMNS)
    return csv_response(text, f"{slug}-diversity.csv")


@challenge_organizer_required
@require_POST
def screening_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """Switch the screening stage on (with its settings) or off (its row goes; the attempts
    already made stay)."""
    challenge = get_object_or_404(Challenge, slug=slug)
    test = selectors.listening_test(challenge)
    current = screening.settings_of(test)
    form = ScreeningForm(request.POST, instance=current or Screening(test=test))
    if not form.is_valid():
        context = _context(request, challenge, screening_form=form)
        return render(request, "raters/organize.html", context, status=400)
    if not form.cleaned_data["enabled"]:
        if current is not None:
            current.delete()
        messages.success(request, "Screening is off.")
    else:
        form.save()
        messages.success(request, "Screening settings saved.")
    return redirect("listening:monitor", slug=slug)


@challenge_organizer_or_403
def screening_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """Every attempt at every screening check, one row each."""
    challenge = get_object_or_404(Challenge, slug=slug)
    text = to_csv(screening.export_rows(challenge), screening.EXPORT_COLUMNS)
    return csv_response(text, f"{slug}-screening.csv")
