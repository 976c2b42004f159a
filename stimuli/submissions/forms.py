"""The forms of the teams' pages: plain fields, checked again (and finally) by the services."""

from __future__ import annotations

from django import forms

from ..parsers import read_json

# Not required here: the services check each field (empty included) and name every problem at
# once; the browser still asks for them.
REQUIRED = {"required": True}


class SignUpForm(forms.Form):
    username = forms.CharField(
        max_length=150, required=False, widget=forms.TextInput(attrs=REQUIRED)
    )
    email = forms.CharField(
        max_length=254, required=False, label="E-mail", widget=forms.EmailInput(attrs=REQUIRED)
    )
    password = forms.CharField(
        required=False, strip=False, widget=forms.PasswordInput(attrs=REQUIRED)
    )


class RegisterTeamForm(SignUpForm):
    team_name = forms.CharField(
        max_length=120, required=False, label="Team name", widget=forms.TextInput(attrs=REQUIRED)
    )
    affiliation = forms.CharField(max_length=200, required=False)


class SubmissionForm(forms.Form):
    system = forms.CharField(max_length=120, label="System name")
    track = forms.CharField(max_length=8)
    archive = forms.FileField(label="Generator archive (.zip or .whl)")
    audio = forms.FileField(required=False, label="Generated audio (.zip, where allowed)")
    licence = forms.CharField(max_length=120)
    external_data = forms.BooleanField(required=False, label="Uses external data")
    external_data_sources = forms.CharField(required=False, label="External data used")
    report_url = forms.CharField(required=False, label="Technical report URL")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    config = forms.CharField(required=False, label="Declared settings (JSON)")

    def clean_config(self) -> dict:
        text = self.cleaned_data.get("config") or ""
        if not text.strip():
            return {}
        try:
            value = read_json(text)
        except ValueError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError('a JSON object, like {"brightness": 0.5}')
        return value
