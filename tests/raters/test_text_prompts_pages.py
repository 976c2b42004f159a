"""The text-prompt protocol over HTTP: a judge's pages from the invitation to the end, and
blindness: the real/generated label, the system and the source of a text reach neither the
pages, nor the audio URLs, nor the headers before the reveal step."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from raters import enrolment, selectors, text_prompts
from raters.models import (
    DescriptionAnswer,
    DescriptionMark,
    PromptAnswer,
    RealismAnswer,
    TextTrial,
)
from stimuli.models import DescribedClip
from tests.listening_setup import get_sound
from tests.text_prompt_setup import build_text_study

pytestmark = [pytest.mark.django_db, pytest.mark.sandbox]


@pytest.fixture
def study(tmp_path):
    challenge, study, _system = build_text_study(tmp_path)
    test = selectors.listening_test(challenge)
    # Listening itself is verified in test_listening_heard.py; here a full fetch is enough.
    test.listened_fraction = 0.0
    test.save()
    return study


def _join(study) -> tuple[Client, text_prompts.TextJudge]:
    client = Client()
    judge = text_prompts.invite_judge(study)
    slug = study.challenge.slug
    assert client.get(f"/listen/{slug}/join/{judge.rater.access_key}/").status_code == 302
    assert client.get(f"/listen/{slug}/").url == f"/listen/{slug}/text/"
    return client, judge


def _form(page: str) -> dict:
    token = re.search(r'name="token" value="([^"]+)"', page).group(1)
    key = re.search(r'name="key" value="([^"]+)"', page).group(1)
    return {"token": token, "key": key}


def _hear(client: Client, slug: str, page: str) -> None:
    for url in re.findall(r'src="(/listen/[^"]+/audio/[^"]+/)"', page):
        assert get_sound(client, url).status_code == 200


def _blind(page: str, token: str, study) -> str:
    """The page with what legitimately differs between items (tokens, keys, numbers) masked."""
    page = page.replace(token, "TOKEN")
    page = re.sub(r'name="(key|csrfmiddlewaretoken)" value="[^"]+"', 'name="\\1"', page)
    page = re.sub(r"[Ss]ound \d+ of", "sound N of", page)
    page = re.sub(r'value="\d+" max=', "value=N max=", page)
    page = re.sub(r"shown=[^\"&]+", "shown=S", page)
    page = re.sub(r'"X-CSRFToken": "[^"]+"', '"X-CSRFToken"', page)
    return page


def test_a_judge_takes_all_three_tests_in_the_browser_pages(study):
    client, judge = _join(study)
    slug = study.challenge.slug
    home = f"/listen/{slug}/text/"
    assert "Begin" in client.get(home).content.decode()
    assert client.post(f"{home}begin/").status_code == 303
    assert client.post(f"{home}begin/").status_code == 303  # twice is harmless
    for _ in range(6):
        page = client.get(home).content.decode()
        assert "What is it?" in page
        form = _form(page)
        response = client.post(f"{home}describe/", {**form, "text": "a dog"})
        assert response.status_code == 409 and "listen" in response.content.decode().lower()
        _hear(client, slug, page)
        assert client.post(f"{home}describe/", {**form, "text": "a dog"}).status_code == 303
        # The same form again (a reload resubmitting) stores nothing more.
        assert client.post(f"{home}describe/", {**form, "text": "a dog"}).status_code == 303
    assert DescriptionAnswer.objects.filter(trial__judge=judge).count() == 6
    page = client.get(home).content.decode()
    assert "What it was" in page
    for trial in TextTrial.objects.filter(judge=judge, test="interpretability"):
        assert trial.text in page
    for match in re.finditer(
        r'name="token" value="([^"]+)"><input type="hidden" name="key" value="([^"]+)"', page
    ):
        data = {"token": match[1], "key": match[2], "correct": "yes"}
        assert client.post(f"{home}mark/", data).status_code == 303
    assert DescriptionMark.objects.filter(trial__judge=judge).count() == 6
    # A mark changes until the marks are submitted (htmx gets the row's cell back).
    response = client.post(
        f"{home}mark/", {**data, "key": "change-0001", "correct": "no"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "saved: not right" in response.content.decode()
    assert "What it was" in client.get(home).content.decode()  # still the reveal
    assert client.post(f"{home}marks-done/").status_code == 303
    assert DescriptionMark.objects.filter(trial__judge=judge, correct=False).count() == 1
    response = client.post(f"{home}mark/", {**data, "key": "change-0002", "correct": "yes"})
    assert response.status_code == 409 and "submitted" in response.content.decode()
    for _ in range(4):
        page = client.get(home).content.decode()
        assert "Real or generated?" in page
        _hear(client, slug, page)
        assert (
            client.post(f"{home}realism/", {**_form(page), "answer": "generated"}).status_code
            == 303
        )
    assert RealismAnswer.objects.filter(trial__judge=judge).count() == 4
    page = client.get(home).content.decode()
    key = re.search(r'name="key" value="([^"]+)"', page).group(1)
    assert (
        client.post(f"{home}prompt/", {"key": key, "prompt": "a dog in the rain"}).status_code
        == 303
    )
    page = client.get(home).content.decode()
    assert "a dog in the rain" in page and page.count('data-token="') == 3
    form = re.search(
        r'action="/listen/[^"]+/text/answer/".*?name="token" value="([^"]+)".*?name="key" value="([^"]+)"',
        page,
        re.S,
    )
    answer = {"token": form[1], "key": form[2], "match": "maybe", "quality": "3", "diversity": "2"}
    assert client.post(f"{home}answer/", answer).status_code == 409  # not heard yet
    _hear(client, slug, page)
    assert client.post(f"{home}answer/", answer).status_code == 303
    assert client.post(f"{home}answer/", answer).status_code == 303
    assert PromptAnswer.objects.filter(prompt_set__judge=judge).count() == 1
    progress = client.get(f"{home}progress/").content.decode()
    assert "a dog in the rain" in progress and "answered" in progress


def test_nothing_on_the_pages_or_in_the_audio_tells_real_from_generated(study):
    client, judge = _join(study)
    slug = study.challenge.slug
    home = f"/listen/{slug}/text/"
    client.post(f"{home}begin/")
    secrets = [judge.system.name, judge.system.public_id, judge.system.team.name]
    pages = {}
    headers = set()

    def check(page: str, trial: TextTrial) -> None:
        assert trial.token in page
        for secret in [*secrets, trial.text, "real clip", "is_real"]:
            assert secret not in page
        for name in DescribedClip.objects.values_list("name", flat=True):
            assert name not in page
        response = get_sound(client, f"/listen/{slug}/audio/{trial.token}/")
        assert response.status_code == 200
        headers.add(tuple(sorted((k, v) for k, v in response.headers.items())))

    while (step := text_prompts.next_step(judge)).test == "interpretability":
        page = client.get(home).content.decode()
        check(page, step.trial)
        text_prompts.save_description(
            judge, step.trial.token, text="noise", key=f"key-{step.trial.pk:06d}"
        )
    for trial in text_prompts.reveal_rows(judge):
        text_prompts.save_mark(judge, trial.token, correct="no", key=f"mark-{trial.pk:06d}")
    text_prompts.submit_marks(judge)
    while (step := text_prompts.next_step(judge)).test == "realism":
        page = client.get(home).content.decode()
        check(page, step.trial)
        pages.setdefault(step.trial.is_real, _blind(page, step.trial.token, study))
        text_prompts.save_realism(
            judge, step.trial.token, says_real="real", key=f"real-{step.trial.pk:06d}"
        )
    # A real clip's page and a generated clip's page are the same once tokens are masked; every
    # sound is served with the same headers (size included: the same length and format).
    assert set(pages) == {True, False}
    assert pages[True] == pages[False]
    assert len(headers) == 1
    assert dict(next(iter(headers)))["Content-Type"] == "audio/wav"


def test_pages_refuse_other_raters_and_other_judges_items(study):
    client, judge = _join(study)
    slug = study.challenge.slug
    client.post(f"/listen/{slug}/text/begin/")
    other_client, _other = _join(study)
    trial = TextTrial.objects.filter(judge=judge).first()
    response = other_client.post(
        f"/listen/{slug}/text/describe/", {"token": trial.token, "key": "k" * 16, "text": "x"}
    )
    assert response.status_code == 403
    assert get_sound(other_client, f"/listen/{slug}/audio/{trial.token}/").status_code == 404
    # A rater of the listening test who is no judge is told so.
    plain = Client()
    rater = enrolment.invite(study.challenge)
    plain.get(f"/listen/{slug}/join/{rater.access_key}/")
    assert plain.get(f"/listen/{slug}/text/").status_code == 403


def test_a_waiting_page_polls_and_reloads_once_its_sound_is_ready(study):
    from stimuli.generators import text_prompts as text_generation
    from stimuli.models import TextClip, TextGeneration

    client, judge = _join(study)
    slug = study.challenge.slug
    client.post(f"/listen/{slug}/text/begin/")
    # The first generated clip to describe is still being made (as on a busy worker).
    late = TextTrial.objects.filter(judge=judge, test="interpretability", is_real=False).first()
    TextTrial.objects.filter(pk=late.pk).update(audio=None)
    TextGeneration.objects.filter(pk=late.generation_id).update(state="pending", finished_at=None)
    TextClip.objects.filter(generation_id=late.generation_id).delete()
    for trial in TextTrial.objects.filter(judge=judge, test="interpretability", is_real=True):
        text_prompts.save_description(judge, trial.token, text="x", key=f"key-{trial.pk:06d}")
    page = client.get(f"/listen/{slug}/text/").content.decode()
    assert "being prepared" in page and late.token not in re.sub(r"shown=[^\"]+", "", page)
    poll = re.search(r'hx-get="([^"]+)"', page).group(1).replace("&amp;", "&")
    assert "HX-Refresh" not in client.get(poll).headers  # still waiting: the page stays
    text_generation.generate_now([judge.system_id])
    assert client.get(poll).headers["HX-Refresh"] == "true"  # ready: the page reloads itself
    assert 'name="text"' in client.get(f"/listen/{slug}/text/").content.decode()
