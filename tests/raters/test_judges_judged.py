"""The text-prompt study's judges judged by the rater-quality engine: a judge who marks the
realism test's gold real clip generated is excluded (under a rule that excludes), disappears
from the study's results, and is listed with the reason in the downloads; the organizer's
study page shows it."""

from __future__ import annotations

import csv
import io

import pytest
from django.test import Client

from raters import rules, selectors, text_prompts
from raters.models import TextTrial
from raters.text_prompts import quality as text_quality
from scoring import services
from stimuli.models import DescribedClip
from tests.text_prompt_setup import build_text_study, take_study

pytestmark = [pytest.mark.django_db, pytest.mark.sandbox]

# The answers below are stored through the services, without playing the sounds: "not
# listened" and "too fast" would name every judge, so they are off here (and checked apart).
RULES = {
    "gold": {"action": "exclude"},
    "too_fast": {"action": "off"},
    "not_listened": {"action": "off"},
}


def test_a_judge_who_fails_the_gold_clip_leaves_the_results_with_the_reason(
    tmp_path, organizer, client
):
    challenge, study, _ = build_text_study(tmp_path, slug="text-judged")
    test = selectors.listening_test(challenge)
    test.rater_rules = RULES
    test.save()
    gold_clip = DescribedClip.objects.filter(challenge=challenge).order_by("pk").last()
    organizer_client = Client()
    organizer_client.force_login(organizer)
    page = f"/organize/{challenge.slug}/text-prompts/"
    response = organizer_client.post(f"{page}gold/", {"gold_clips": "no/such.wav"})
    assert not study.gold_clips.exists()  # a name that is no clip sets nothing
    organizer_client.post(f"{page}gold/", {"gold_clips": gold_clip.name})
    assert list(study.gold_clips.all()) == [gold_clip]
    careful = text_prompts.invite_judge(study)
    careless = text_prompts.invite_judge(study)
    for judge in (careful, careless):
        text_prompts.start(judge)
        # Every judge's realism test holds the gold clip once, among its real clips.
        realism = TextTrial.objects.filter(judge=judge, test="realism", is_real=True)
        assert [t.described_id for t in realism].count(gold_clip.pk) == 1
    gold = set(study.gold_clips.values_list("pk", flat=True))
    take_study(careful)
    take_study(
        careless,
        first_key=1000,
        says_real=lambda trial: "generated" if trial.described_id in gold else "real",
    )

    verdicts = text_quality.verdicts(challenge)
    assert not verdicts[careful.rater.code].flags
    bad = verdicts[careless.rater.code]
    assert bad.excluded and bad.summary() == (
        "excluded by gold: 1 gold real clip(s) marked generated"
    )
    # Flagged only (the default for invited judges): listed, but kept in the results.
    flagging = rules.RaterRules({"too_fast": {"action": "off"}})
    rows, judged = text_quality.judged_rows(challenge, flagging)
    assert {r["judge"] for r in rows["realism"]} == {careful.rater.code, careless.rater.code}
    assert sorted((j["judge"], j["excluded"]) for j in judged) == sorted(
        [(careful.rater.code, False), (careless.rater.code, False)]
    )
    reasons = {j["judge"]: j["reasons"] for j in judged}  # judges' codes are random: by code
    assert "flagged by not_listened: 10 of 10 sounds heard below 90%" in reasons[careful.rater.code]
    assert "flagged by gold" in reasons[careless.rater.code]

    # The organizer's study page names the excluded judge, the reason behind a disclosure.
    html = organizer_client.get(page).content.decode()
    assert '<summary class="bad">excluded</summary>excluded by gold: 1 gold real clip' in html
    response = organizer_client.post(f"{page}gold/", {"gold_clips": ""}, follow=True)
    assert "can no longer change" in response.content.decode()

    snapshot = services.publish(challenge, organizer)
    [row] = snapshot.result["text_prompt"]["systems"]
    assert row["judges"] == 1
    assert [j["judge"] for j in row["per_judge"]] == [careful.rater.code]
    base = f"/results/{challenge.slug}/{snapshot.number}"
    judges = client.get(f"{base}/download/text-prompt-judges.json").json()
    assert [r["judge"] for r in judges["rows"]] == [careful.rater.code]
    response = client.get(f"{base}/download/text-prompt-judges-excluded.csv")
    [line] = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert line["judge"] == careless.rater.code
    assert line["reasons"] == "excluded by gold: 1 gold real clip(s) marked generated"
