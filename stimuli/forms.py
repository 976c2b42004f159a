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
