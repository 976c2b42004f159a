"""The definition's sections that raters own: the listening test (its design, screening and
crowd runs), the rater-quality rules, and the text-prompt study's counts.

The crowd platform's completion and screen-out codes and links are not in the file: it is
published with the results, and a code in it would let anyone claim a completed study.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError
from pydantic import Field

from stimuli.definition.fields import field_of, section_model, values_of
from stimuli.definition.sections import Change, Section, register
from stimuli.errors import Refused
from stimuli.models import Challenge

from . import preparation, selectors
from .models import ListeningTest, Screening, TextPromptStudy
from .organize import ScreeningForm, SettingsForm

SCREENING_FIELDS = [
    "who",
    "level_check",
    "headphone_check",
    "headphone_trials",
    "headphone_pass",
    "hearing_check",
    "hearing_triplets",
    "hearing_pass_db",
    "attempts",
]
ScreeningSection = section_model(
    "Screening",
    "The checks a rater passes before the first category: the playback level, headphones "
    "(Huggins pitch) and a hearing check (digits in noise).",
    Screening,
    SCREENING_FIELDS,
    described={
        "who": "Who is screened: crowd (crowd workers) or everyone (every rater; never "
        "diversity raters or text-prompt judges).",
        "headphone_trials": "Trials of the headphone check.",
        "hearing_triplets": "Digit triplets of the hearing check.",
    },
)
LISTENING_FIELDS = [
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
    "crowd_study_id",
    "consent_text",
    "instructions_text",
]
# Set on the listening test's page only (see the module's docstring).
SECRET_FIELDS = ["completion_url", "completion_code"]
Listening = section_model(
    "Listening",
    "The listening test's design: sliders or A/B trials (pairs), categories per rater, "
    "ratings or votes wanted, hidden anchors (a third of each kind: high quality and fit, low "
    "quality, poor fit), gold trials, the examples heard first, loudness, the share of each "
    "sound to be heard, and screening.",
    ListeningTest,
    LISTENING_FIELDS,
    described={
        "consent_text": "What a rater agrees to before the test; empty: the platform's own "
        "text (what is stored, for how long, that taking part is voluntary).",
        "instructions_text": "Said before the platform's own instructions; empty: only those.",
    },
    screening=(
        ScreeningSection | None,
        Field(None, description="The screening stage; none (null) when raters are not screened."),
    ),
)


def _form_problems(form) -> list[str]:
    return [
        f"{name}: {message}" if name != "__all__" else message
        for name, messages in form.errors.items()
        for message in messages
    ]


def _read_listening(challenge: Challenge) -> dict:
    test = selectors.listening_test(challenge)
    screening = Screening.objects.filter(test=test).first()
    return {
        **values_of(test, LISTENING_FIELDS),
        "screening": values_of(screening, SCREENING_FIELDS) if screening else None,
    }


def _write_listening(challenge: Challenge, value: dict) -> None:
    test = selectors.listening_test(challenge)
    data = {**values_of(test, SECRET_FIELDS), **value}
    data.pop("screening")
    # The settings page's own form: its checks, in its words.
    form = SettingsForm(_form_data(data), instance=test)
    problems = [] if form.is_valid() else _form_problems(form)
    if not problems:
        form.save()
        test.crowd_study_id = value["crowd_study_id"]
        try:
            test.full_clean()
        except ValidationError as exc:
            problems += [f"{k}: {m}" for k, ms in exc.message_dict.items() for m in ms]
        else:
            test.save(update_fields=["crowd_study_id"])
    current = Screening.objects.filter(test=test).first()
    if value["screening"] is None:
        if current is not None:
            current.delete()
    else:
        instance = current or Screening(test=test)
        screening = ScreeningForm(
            _form_data({"enabled": True, **value["screening"], **_screening_secrets(instance)}),
            instance=instance,
        )
        if screening.is_valid():
            screening.save()
        else:
            problems += [f"screening.{p}" for p in _form_problems(screening)]
    if problems:
        raise Refused(problems)


def _screening_secrets(screening: Screening) -> dict:
    return {
        "screen_out_code": screening.screen_out_code,
        "screen_out_url": screening.screen_out_url,
    }


def _form_data(values: dict[str, Any]) -> dict[str, Any]:
    # A form reads an unchecked box as an absent key, and None as empty.
    return {k: v for k, v in values.items() if v is not False and v is not None}


def _listening_refusals(challenge: Challenge, changes: list[Change]) -> list[str]:
    changed = [c.path.split(".")[1] for c in changes if c.path.count(".") >= 1]
    refusal = preparation.design_refusal(challenge, changed)
    return [f"listening: {refusal}"] if refusal else []


register(
    Section(
        key="listening",
        annotation=Listening,
        position=60,
        read=_read_listening,
        write=_write_listening,
        refusals=_listening_refusals,
        default=Field(default_factory=Listening),
    )
)


# --- rater_rules: which sessions and raters are flagged or excluded, and why.

RULE_FIELDS = {
    "low": "low_threshold",
    "high": "high_threshold",
    "misrating": "misrating_rules",
    "exclude_at": "exclude_at",
    "rules": "rater_rules",
}
RaterRulesSection = section_model(
    "RaterRules",
    "The rater-quality rules: the anchor rule (DCASE 2023 Task 7's: a session with `exclude_at` "
    "misrated anchors of its 12 is excluded) and the others (straight-lining, too fast, not "
    "listened, gold trials, the panel's favouritism), each with its action: exclude, flag or "
    "off.",
    ListeningTest,
    [],
    **{key: field_of(ListeningTest, name) for key, name in RULE_FIELDS.items()},
)


def _read_rules(challenge: Challenge) -> dict:
    test = selectors.listening_test(challenge)
    return {key: getattr(test, name) for key, name in RULE_FIELDS.items()}


def _write_rules(challenge: Challenge, value: dict) -> None:
    test = selectors.listening_test(challenge)
    for key, name in RULE_FIELDS.items():
        setattr(test, name, value[key])
    try:
        test.full_clean()
    except ValidationError as exc:
        names = {name: key for key, name in RULE_FIELDS.items()}
        raise Refused(
            [f"{names.get(k, k)}: {m}" for k, ms in exc.message_dict.items() for m in ms]
        ) from None
    test.save(update_fields=list(RULE_FIELDS.values()))


register(
    Section(
        key="rater_rules",
        annotation=RaterRulesSection,
        position=70,
        read=_read_rules,
        write=_write_rules,
        default=Field(default_factory=RaterRulesSection),
    )
)


# --- text_prompts: the text-prompt study's counts (its systems are added on its page).

TEXT_FIELDS = ["judges", "interpretability_clips", "realism_clips", "prompts", "clips_per_prompt"]
TextPrompts = section_model(
    "TextPrompts",
    "The text-prompt study: judges wanted, and what each judge describes, marks and types. "
    "Its systems (text-conditioned generators) are added on the study's page.",
    TextPromptStudy,
    TEXT_FIELDS,
    described={"clips_per_prompt": "Clips the system makes of each prompt a judge types."},
)


def _read_text(challenge: Challenge) -> dict | None:
    study = TextPromptStudy.objects.filter(challenge=challenge).first()
    return values_of(study, TEXT_FIELDS) if study else None


def _write_text(challenge: Challenge, value: dict | None) -> None:
    study = TextPromptStudy.objects.filter(challenge=challenge).first()
    if value is None:
        return  # refused before when a study exists
    study = study or TextPromptStudy(challenge=challenge)
    for name in TEXT_FIELDS:
        setattr(study, name, value[name])
    try:
        study.save()
    except IntegrityError:
        raise Refused(
            "counts out of range: judges 1-1000, interpretability_clips 1-50, realism_clips "
            "2-50, prompts 1-50, clips_per_prompt 1-20"
        ) from None


def _text_refusals(challenge: Challenge, changes: list[Change]) -> list[str]:
    if any(c.path == "text_prompts" and c.new is None for c in changes):
        return ["text_prompts: the study and its judges' answers stay; delete it on its page"]
    return []


register(
    Section(
        key="text_prompts",
        annotation=TextPrompts | None,
        position=90,
        read=_read_text,
        write=_write_text,
        refusals=_text_refusals,
        default=Field(
            None, description="The text-prompt study; none (null) when the challenge has none."
        ),
    )
)
