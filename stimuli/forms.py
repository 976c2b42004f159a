from django import forms

from .models import Challenge, Clip, System, Team, Track


class ChallengeForm(forms.ModelForm):
    class Meta:
        model = Challenge
        fields = [
            "name",
            "slug",
            "description",
            "contact_email",
            "clip_duration_s",
            "sample_rate",
            "channels",
            "bit_depth",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


class TeamForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ["name", "affiliation"]


class SystemForm(forms.Form):
    name = forms.CharField(max_length=120)
    team = forms.ModelChoiceField(queryset=Team.objects.none())
    track = forms.ModelChoiceField(queryset=Track.objects.none())
    kind = forms.ChoiceField(choices=System.Kind.choices)

    def __init__(self, *args, challenge: Challenge, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = challenge.teams.all()
        self.fields["track"].queryset = challenge.tracks.all()


class UploadForm(forms.Form):
    role = forms.ChoiceField(choices=Clip.Role.choices)
    system = forms.ModelChoiceField(
        queryset=System.objects.none(), required=False, help_text="Only for system output."
    )
    convert = forms.BooleanField(
        required=False,
        label="Convert like DCASE",
        help_text="Mix to mono, resample and pad or cut to the clip duration instead of rejecting.",
    )
    strict = forms.BooleanField(
        required=False,
        label="Strict",
        help_text="Reject the upload if it holds files that are not audio, instead of skipping "
        "them with a note.",
    )
    file = forms.FileField(help_text="A zip with one folder per category.")

    def __init__(self, *args, challenge: Challenge, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["system"].queryset = challenge.systems.all()


class DefinitionForm(forms.Form):
    """A challenge's definition file to check against the challenge: uploaded, or pasted (the
    text is read and checked by stimuli/definition_files.py, as the API's is)."""

    file = forms.FileField(
        required=False,
        label="The file",
        widget=forms.FileInput(attrs={"accept": ".yaml,.yml,application/yaml,text/yaml"}),
    )
    text = forms.CharField(
        required=False,
        strip=False,
        label="Or paste it",
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "definition-text"}),
    )

    def clean(self):
        data = super().clean()
        upload, pasted = data.get("file"), data.get("text") or ""
        if upload and pasted.strip():
            raise forms.ValidationError("Choose a file or paste its text, not both.")
        if not upload and not pasted.strip():
            raise forms.ValidationError("Choose the file, or paste its text.")
        data["name"] = upload.name if upload else "the pasted text"
        return data


class DefinitionApplyForm(forms.Form):
    """The checked file, posted back with the sha256 of its text and of the challenge's own
    file when its changes were shown: what is applied is what was checked, against the
    challenge as it was then."""

    text = forms.CharField(strip=False, widget=forms.HiddenInput)
    sha256 = forms.CharField(widget=forms.HiddenInput)
    base = forms.CharField(widget=forms.HiddenInput)
    name = forms.CharField(required=False, widget=forms.HiddenInput)
