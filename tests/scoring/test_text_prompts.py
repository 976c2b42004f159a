"""Results of the text-prompt protocol: the numbers, and their publication in the snapshot with
CSV and JSON downloads."""

from __future__ import annotations

import csv
import io

import pytest

from raters import text_prompts
from raters.errors import ListeningError
from scoring import services
from scoring.text_prompts import judge_bootstrap, proportion, score_text_prompts
from tests.text_prompt_setup import build_text_study, take_study


def _rows() -> dict:
    interp = []
    for judge in ("J1", "J2"):
        for n in range(10):
            interp.append({"judge": judge, "system": "S", "is_real": True, "correct": n < 9})
            interp.append({"judge": judge, "system": "S", "is_real": False, "correct": n < 5})
    realism = [
        {"judge": "J1", "system": "S", "is_real": n % 2 == 0, "says_real": n < 8 and n % 2 == 0}
        for n in range(10)
    ]
    prompts = [
        {"judge": "J1", "system": "S", "prompt": "p", "match": "yes", "quality": 4, "diversity": 2},
        {
            "judge": "J1",
            "system": "S",
            "prompt": "p",
            "match": "maybe",
            "quality": 2,
            "diversity": 2,
        },
        {"judge": "J2", "system": "S", "prompt": "p", "match": "no", "quality": 1, "diversity": 5},
        {"judge": "J2", "system": "S", "prompt": "p", "match": "yes", "quality": 3, "diversity": 5},
    ]
    return {"interpretability": interp, "realism": realism, "prompts": prompts}


def test_recognition_realism_and_prompt_results_per_system_and_judge():
    [system] = score_text_prompts(_rows())["systems"]
    assert system["system"] == "S" and system["judges"] == 2
    assert system["recognised_generated"]["rate"] == 0.5
    assert system["recognised_real"]["rate"] == 0.9
    realism = system["realism"]
    # Real sounds 0, 2, 4, 6 marked real and the five generated ones marked generated; real
    # sound 8 marked generated.
    right = 9
    assert realism["k"] == right and realism["n"] == 10
    # The Wilson interval and the exact two-sided binomial test against 50 %, by hand.
    assert proportion(8, 10)["ci"] == pytest.approx([0.4902, 0.9433], abs=1e-4)
    assert score_text_prompts(
        {
            "realism": [{"judge": "J", "system": "S", "is_real": True, "says_real": True}] * 8
            + [{"judge": "J", "system": "S", "is_real": True, "says_real": False}] * 2
        }
    )["systems"][0]["realism"]["p_vs_chance"] == pytest.approx(0.109375)
    assert system["match"]["counts"] == {"yes": 2, "no": 1, "maybe": 1}
    assert system["match"]["shares"]["yes"] == 0.5
    assert system["quality"]["mean"] == 2.5 and system["diversity"]["mean"] == 3.5
    low, high = system["quality"]["ci"]
    assert 1.0 <= low <= 2.5 <= high <= 4.0
    j1, j2 = system["per_judge"]
    assert (j1["judge"], j1["quality"]["mean"], j1["quality"]["ci"]) == ("J1", 3.0, None)
    assert j2["realism"]["n"] == 0 and j2["realism"]["rate"] is None


def test_bootstrap_resamples_judges_and_is_seeded():
    values = {"a": [1, 1, 1], "b": [5, 5, 5], "c": [3]}
    mean, ci = judge_bootstrap(values)
    assert mean == pytest.approx(3.0) and ci == judge_bootstrap(values)[1]
    assert 1.0 <= ci[0] < 3.0 < ci[1] <= 5.0
    assert judge_bootstrap({"a": [2, 4]}) == (3.0, None)


@pytest.mark.django_db
@pytest.mark.sandbox
def test_results_are_published_in_the_snapshot_with_downloads(
    tmp_path, organizer, client, settings
):
    challenge, study, system = build_text_study(tmp_path, slug="text-results")
    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    take_study(judge, correct=lambda trial: trial.is_real)
    snapshot = services.publish(challenge, organizer)
    study.refresh_from_db()
    assert not study.is_open  # publishing closes the study: every publication has the same answers
    with pytest.raises(ListeningError, match="Results are published"):
        text_prompts.set_open(study, True)
    [row] = snapshot.result["text_prompt"]["systems"]
    assert row["system"] == system.name
    assert row["recognised_real"]["rate"] == 1.0 and row["recognised_generated"]["rate"] == 0.0
    assert row["realism"]["rate"] == 0.5 and row["match"]["counts"]["yes"] == 2
    assert "text_prompt_realism" in snapshot.input_hashes
    base = f"/results/{challenge.slug}/{snapshot.number}"
    assert "Text-prompt study: per system" in client.get(f"{base}/").content.decode()
    response = client.get(f"{base}/download/text-prompt-systems.csv")
    [line] = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert line["system"] == system.name and float(line["quality"]) == 4.0
    judges = client.get(f"{base}/download/text-prompt-judges.json").json()
    assert [r["judge"] for r in judges["rows"]] == [judge.rater.code]
    # No CLAP checkpoint here: the study's CLAP table says which file would enable its score.
    assert snapshot.result["text_prompt"]["clap"]["enabled"] is False
    assert snapshot.result["text_prompt"]["clap"]["sets"] == 2
    page = client.get(f"{base}/").content.decode()
    assert "Text-prompt study: CLAP score" in page and "630k-audioset-best.pt" in page
    assert str(settings.FOLEY_MODEL_DIR) not in page  # public: no server paths
