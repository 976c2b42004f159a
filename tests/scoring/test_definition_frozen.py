"""A published snapshot keeps the challenge's definition it was computed under, with its hash: on
its results page, as a download and in its whole result; that file applied elsewhere and the
snapshot's ratings exported give its numbers again through `score_offline --challenge`, which
takes the scoring settings from the file alone."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from raters import demo, preparation
from raters import selectors as raters_selectors
from raters.models import Screening
from scoring import services
from scoring.inputs import ScoringInputError
from scoring.models import ScoringSettings, Snapshot
from stimuli import definition
from stimuli import selectors as stimuli_selectors
from stimuli.exports import to_csv
from stimuli.models import Challenge
from tests.listening_setup import build_listening_challenge
from tests.simulate import simulate

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def published(challenge, organizer):
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.weight_diversity = 0.75
    settings.save()
    test = raters_selectors.listening_test(challenge)
    Screening.objects.create(test=test)
    inputs = simulate(systems_per_track=2, categories=2, sounds=3, raters=5, seed=3).inputs
    return services.publish(challenge, organizer, inputs)


def test_publishing_stores_the_definition_and_its_hash_never_a_crowd_code(published, challenge):
    text = definition.export(challenge)
    assert published.definition == text
    assert published.definition_sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert "weight_diversity: 0.75" in text and f"slug: {challenge.slug}" in text
    # The crowd platform's codes stay on the listening test's page (raters/definition.py).
    test = raters_selectors.listening_test(challenge)
    screening = Screening.objects.get(test=test)
    assert test.completion_code and test.completion_code not in published.definition
    assert screening.screen_out_code not in published.definition
    # Frozen: the challenge changes afterwards, the snapshot's definition does not.
    ScoringSettings.objects.filter(challenge=challenge).update(weight_diversity=0.25)
    assert "weight_diversity: 0.25" in definition.export(challenge)
    again = Snapshot.objects.get(pk=published.pk)
    assert again.definition == text and "weight_diversity: 0.75" in again.definition


def test_the_results_page_shows_the_hash_and_the_download_gives_the_same_text(
    published, challenge, client
):
    slug, full = challenge.slug, published.definition_sha256
    page = client.get(f"/results/{slug}/1/").content.decode()
    line = re.search(r'<p class="muted" id="snapshot-definition">.*?</p>', page, re.S).group(0)
    assert f'title="sha256 {full}"' in line and f"sha256 {full[:12]}</code>" in line
    assert f'href="/results/{slug}/1/definition.yaml"' in line
    assert f'<code class="wrap" id="definition-sha256">{full}</code>' in page  # to copy whole
    response = client.get(f"/results/{slug}/1/definition.yaml")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml"
    assert response["Content-Disposition"] == f'attachment; filename="{slug}-snapshot-1.yaml"'
    text = response.content.decode()
    assert text == published.definition and definition.sha256(text) == full
    # The whole result and the API carry it too.
    whole = client.get(f"/results/{slug}/1/download/result.json").json()
    assert whole["definition"] == text and whole["definition_sha256"] == full
    api = client.get(f"/api/results/{slug}/snapshots/1/").json()
    assert api["definition"] == text and api["definition_sha256"] == full
    listed = client.get(f"/api/results/{slug}/snapshots/").json()["results"]
    assert listed[0]["definition_sha256"] == full and "definition" not in listed[0]


def test_an_organizers_only_snapshot_keeps_its_definition_from_everyone_else(
    challenge, organizer, organizer_client
):
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    inputs = simulate(systems_per_track=2, categories=2, sounds=3, raters=5, seed=3).inputs
    snap = services.publish(challenge, organizer, inputs, final=False, public=False)
    url = f"/results/{challenge.slug}/{snap.number}/definition.yaml"
    # The same check as the snapshot's page and its other downloads.
    anyone = Client()
    for path in ("", "definition.yaml", "download/result.json"):
        assert anyone.get(f"/results/{challenge.slug}/{snap.number}/{path}").status_code == 404
    assert organizer_client.get(url).content.decode() == snap.definition


def test_a_snapshot_published_before_definitions_were_kept_offers_none(published, client):
    Snapshot.objects.filter(pk=published.pk).update(definition="", definition_sha256="")
    slug = published.challenge.slug
    page = client.get(f"/results/{slug}/1/").content.decode()
    assert 'id="snapshot-definition"' not in page and "definition.yaml" not in page
    assert client.get(f"/results/{slug}/1/definition.yaml").status_code == 404


def test_a_change_of_the_scoring_settings_while_scoring_publishes_nothing(challenge, organizer):
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    inputs = simulate(systems_per_track=2, categories=2, sounds=3, raters=5, seed=3).inputs

    def organizer_edits_meanwhile(index: int, total: int, message: str, force: bool = False):
        if index == 1:  # scoring has read the rules: an organizer saves new weights on a page
            ScoringSettings.objects.filter(challenge=challenge).update(weight_fit=2.0)

    with pytest.raises(ScoringInputError, match="scoring settings changed"):
        services.publish(challenge, organizer, inputs, progress=organizer_edits_meanwhile)
    assert not Snapshot.objects.exists()
    assert Challenge.objects.get(pk=challenge.pk).phase != Challenge.Phase.PUBLISHED


def _write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_the_snapshots_definition_applied_elsewhere_rescores_to_its_numbers(
    organizer, organizer_client, tmp_path
):
    challenge = build_listening_challenge(
        slug="frozen", categories=2, systems_per_track=2, target_ratings=6, categories_min=1
    )
    preparation.set_open(challenge, True)
    # Settings away from the defaults, in every part the scoring reads, so that the numbers
    # below can come from the file alone.
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 40
    settings.weight_diversity = 1.0
    settings.seed = 11
    settings.save()
    test = raters_selectors.listening_test(challenge)
    test.exclude_at = 4
    test.rater_rules = {"too_fast": {"action": "off"}}
    test.save()
    demo.simulate_raters(challenge, n_raters=6, seed=5, farm=2)
    snap = services.publish(challenge, organizer)
    published = json.loads(json.dumps(snap.result))
    assert published["excluded_sessions"] and published["counts"]["self_ratings_removed"]

    # What anyone has: the snapshot's definition from its page, the ratings' exports.
    text = Client().get(f"/results/frozen/{snap.number}/definition.yaml").content.decode()
    assert definition.sha256(text) == snap.definition_sha256
    ratings = organizer_client.get("/organize/frozen/listen/ratings.csv").content.decode()
    diversity = organizer_client.get("/organize/frozen/listen/diversity.csv").content.decode()
    assert "crowd" in ratings  # the farm's rows carry their kind, which the rules read
    paths = {
        "ratings": _write(tmp_path / "ratings.csv", ratings),
        "diversity": _write(tmp_path / "diversity.csv", diversity),
        "fad": _write(
            tmp_path / "fad.csv",
            to_csv(
                stimuli_selectors.fad_rows(challenge, every_model=True),
                ("system", "track", "category", "fad_dev", "fad_eval"),
            ),
        ),
        "teams": _write(
            tmp_path / "teams.csv",
            to_csv(stimuli_selectors.team_rows(challenge), ("system", "team", "track")),
        ),
    }
    files = [f"--{k}={v}" for k, v in paths.items()]

    # Applied on another slug: the same challenge, whose export is the file again.
    again = re.sub(r"^slug: frozen$", "slug: frozen-again", text, count=1, flags=re.M)
    assert definition.apply(again, by=organizer).created
    exported = definition.export(Challenge.objects.get(slug="frozen-again"))
    assert exported == again
    out = io.StringIO()
    call_command(
        "score_offline", *files, f"--challenge={_write(tmp_path / 'c.yaml', exported)}", stdout=out
    )
    assert json.loads(out.getvalue()) == published

    # Without the file, the defaults give other numbers: the file's settings made these.
    out = io.StringIO()
    call_command("score_offline", *files, stdout=out)
    plain = json.loads(out.getvalue())
    assert plain["settings"] != published["settings"]
    assert plain["tracks"] != published["tracks"]

    # The published challenge itself still holds what its snapshot says.
    assert definition.apply(text, dry_run=True).diff == "no changes"


def test_score_offline_refuses_a_bad_definition_naming_every_problem(tmp_path):
    text = (ROOT / "challenges" / "dcase2023-task7.yaml").read_text()
    text = text.replace("  weight_fit: 1.0\n", "  weight_fit: heavy\n")
    text = text.replace("  exclude_at: 5\n", "  exclude_at: 5\n  exclude_too: 6\n")
    bad = _write(tmp_path / "bad.yaml", text)
    csvs = [f"--{k}={tmp_path / k}.csv" for k in ("ratings", "diversity", "fad", "teams")]
    with pytest.raises(CommandError) as refused:
        call_command("score_offline", *csvs, f"--challenge={bad}", "--seed=4", "--bootstrap=0")
    lines = text.splitlines()
    unknown, heavy = lines.index("  exclude_too: 6") + 1, lines.index("  weight_fit: heavy") + 1
    assert str(refused.value).splitlines() == [
        "--challenge sets the scoring settings: leave out --seed, --bootstrap (or edit the "
        "file's scoring and rater_rules sections)",
        "bad.yaml: rater_rules.exclude_too: unknown key; the keys here are: low, high, "
        f"misrating, exclude_at, rules (line {unknown}, column 3)",
        "bad.yaml: scoring.weight_fit: input should be a valid number, unable to parse string "
        f"as a number (line {heavy}, column 3)",
    ]
    # Values the schema takes but the scoring's rules refuse, named alike.
    rules = text.replace("  weight_fit: heavy\n", "  weight_fit: 1.0\n")
    rules = rules.replace("  exclude_too: 6\n", "").replace("  low: 3.0\n", "  low: 8.0\n")
    with pytest.raises(CommandError, match=r"^low.yaml: low threshold 8.0 must be below high 7"):
        call_command("score_offline", *csvs, f"--challenge={_write(tmp_path / 'low.yaml', rules)}")
    with pytest.raises(CommandError, match=r"none.yaml: cannot be read"):
        call_command("score_offline", *csvs, f"--challenge={tmp_path / 'none.yaml'}")


def test_python_m_scoring_offline_sends_a_definition_to_manage_py(tmp_path):
    # Without Django's settings the file's schema cannot be built: it says where it can.
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    csvs = [f"--{k}={tmp_path / k}.csv" for k in ("ratings", "diversity", "fad", "teams")]
    done = subprocess.run(
        [sys.executable, "-m", "scoring.offline", *csvs, "--challenge=challenge.yaml"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "run it as python manage.py score_offline --challenge" in done.stderr
