"""The organizers' page of the text-prompt protocol: the reference set upload, the study (only
text-conditioned systems), judges' invitations and the prompts the systems failed on."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from raters import text_prompts
from raters.models import TextJudge, TextPromptStudy
from stimuli.models import DescribedClip
from stimuli.services import create_challenge
from tests.text_prompt_setup import reference_folder, text_system

pytestmark = [pytest.mark.django_db, pytest.mark.sandbox]


def _zip(folder) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*.wav")):
            archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def test_an_organizer_sets_up_a_study(organizer_client, tmp_path):
    challenge = create_challenge(
        name="Text",
        slug="text-org",
        categories=[("dog_bark", "Dog bark"), ("rain", "Rain")],
        clip_duration_s=0.5,
        sample_rate=8000,
    )
    url = f"/organize/{challenge.slug}/text-prompts/"
    assert Client().get(url).status_code == 302  # to the login page: organizers only
    folder, csv_text = reference_folder(challenge, tmp_path / "ref", count=12)
    data = _zip(folder)

    def upload(csv_text: str):
        return organizer_client.post(
            f"{url}reference/",
            {
                "audio": SimpleUploadedFile("ref.zip", data),
                "descriptions": SimpleUploadedFile("ref.csv", csv_text.encode()),
            },
        )

    response = upload(csv_text + "rain/404.wav,thunder\n")
    assert response.status_code == 400
    assert "rain/404.wav is not in the upload" in response.content.decode()
    assert not DescribedClip.objects.exists()
    assert upload(csv_text).status_code == 302
    assert DescribedClip.objects.filter(challenge=challenge).count() == 12

    plain = text_system(challenge, "Tones", "tests.generator_fixtures.good")
    texty = text_system(challenge, "Texty", "tests.generator_fixtures.text_fails")
    form = {"judges": 2, "interpretability_clips": 2, "realism_clips": 2, "prompts": 1,
            "clips_per_prompt": 2}  # fmt: skip
    response = organizer_client.post(f"{url}create/", {**form, "systems": [plain.pk, texty.pk]})
    assert response.status_code == 400
    assert "has no generate_from_text function" in response.content.decode()
    assert not TextPromptStudy.objects.exists()
    assert (
        organizer_client.post(f"{url}create/", {**form, "systems": [texty.pk]}).status_code == 302
    )
    study = TextPromptStudy.objects.get(challenge=challenge)
    assert organizer_client.post(f"{url}open/", {"open": "1"}).status_code == 302
    for _ in range(3):  # the third is refused: the study wants 2 judges
        organizer_client.post(f"{url}invite/", {"label": "panel"})
    assert TextJudge.objects.filter(study=study).count() == 2

    # A judge's prompt the system fails on shows on the organizers' page, with the reason.
    judge = TextJudge.objects.filter(study=study).first()
    text_prompts.start(judge)
    n = 0
    while (step := text_prompts.next_step(judge)).test in ("interpretability", "realism", "reveal"):
        n += 1
        if step.test == "interpretability":
            text_prompts.save_description(judge, step.trial.token, text="x", key=f"key-{n:06d}")
        elif step.test == "realism":
            text_prompts.save_realism(judge, step.trial.token, says_real="real", key=f"key-{n:06d}")
        else:
            for trial in text_prompts.reveal_rows(judge):
                n += 1
                text_prompts.save_mark(judge, trial.token, correct="no", key=f"key-{n:06d}")
            text_prompts.submit_marks(judge)
    text_prompts.submit_prompt(judge, "let it explode", key="prompt-000001")
    page = organizer_client.get(url).content.decode()
    assert "let it explode" in page and "cannot make that sound" in page
    assert judge.rater.code in page and "Texty" in page
    # Without a CLAP checkpoint and tokenizer the page says which files would give the score.
    assert "CLAP score" in page and "630k-audioset-best.pt" in page and "merges.txt" in page
    response = organizer_client.post(f"{url}clap-scores/", follow=True)
    assert "The CLAP score needs" in response.content.decode()
