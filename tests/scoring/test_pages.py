"""Publishing results: nothing public before, frozen snapshots after, pages, downloads and API."""

from __future__ import annotations

import copy
import csv
import importlib.util
import io
import json

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from rest_framework.test import APIClient

from raters.models import ListeningTest
from scoring import services, tables
from scoring.job_kinds import PUBLISH
from scoring.models import Snapshot
from scoring.rules import Rules
from tests.simulate import simulate

pytestmark = pytest.mark.django_db


@pytest.fixture
def sim():
    return simulate(systems_per_track=3, categories=3, sounds=4, raters=6, seed=21)


@pytest.fixture
def fast_settings(challenge):
    # Fewer bootstrap samples keep the tests quick; the rules are otherwise the defaults.
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 100
    settings.save()
    return settings


def public_urls(slug: str) -> list[str]:
    return [
        f"/results/{slug}/",
        f"/results/{slug}/1/",
        f"/results/{slug}/1/track/A/",
        f"/results/{slug}/1/track/A/fad-rank.svg",
        f"/results/{slug}/1/download/leaderboard-A.csv",
        f"/results/{slug}/1/download/result.json",
        f"/api/results/{slug}/latest/",
        f"/api/results/{slug}/snapshots/1/",
        f"/api/results/{slug}/snapshots/1/leaderboards/A/",
    ]


def test_nothing_is_public_before_publication(client, rater_user, challenge, organizer_client):
    for user in (None, rater_user):
        viewer = APIClient()
        if user:
            viewer.force_login(user)
        for url in public_urls(challenge.slug):
            assert viewer.get(url).status_code == 404, url
        assert challenge.name not in viewer.get("/results/").content.decode()
        assert viewer.get("/api/results/").json()["results"] == []
        # As documented: a challenge's snapshots are not found before its first publication.
        assert viewer.get(f"/api/results/{challenge.slug}/snapshots/").status_code == 404
        assert viewer.post(f"/results/{challenge.slug}/publish/").status_code == 403
    assert Snapshot.objects.count() == 0
    # Organizers see the unpublished page with the publish button.
    page = organizer_client.get(f"/results/{challenge.slug}/")
    assert page.status_code == 200
    assert "Publish results" in page.content.decode()
    assert challenge.name in organizer_client.get("/results/").content.decode()


def test_only_organizers_can_publish(challenge, rater_user, sim):
    with pytest.raises(PermissionDenied):
        services.publish(challenge, rater_user, sim.inputs)
    assert Snapshot.objects.count() == 0


def test_publish_action_on_the_page(organizer_client, challenge, fast_settings):
    # A post that names no kind publishes nothing: it shows the confirmation.
    response = organizer_client.post(f"/results/{challenge.slug}/publish/")
    assert response.status_code == 200 and "Closes for good" in response.content.decode()
    assert Snapshot.objects.count() == 0
    response = organizer_client.post(
        f"/results/{challenge.slug}/publish/", {"kind": "final"}, follow=True
    )
    assert response.status_code == 200
    if importlib.util.find_spec("raters.selectors") is None:
        # Without the listening test's selectors nothing can be scored, and nothing is stored.
        assert "Nothing was published" in response.content.decode()
        assert Snapshot.objects.count() == 0
    else:
        assert Snapshot.objects.filter(challenge=challenge, number=1).exists()


def test_published_results_are_public_with_tables_plots_and_downloads(
    client, challenge, organizer, sim, fast_settings
):
    snap = services.publish(challenge, organizer, sim.inputs)
    assert snap.number == 1
    assert snap.input_hashes == sim.inputs.hashes()
    assert snap.settings == Rules(bootstrap=100).to_dict()
    assert snap.code_version.startswith("0.1.0+")
    challenge.refresh_from_db()
    assert challenge.phase == "published"
    home = client.get("/").content.decode()
    assert f'href="/results/{challenge.slug}/"' in home and 'href="/results/"' in home

    response = client.get(f"/results/{challenge.slug}/")
    assert response.status_code == 302 and response["Location"] == f"/results/{challenge.slug}/1/"
    page = client.get(f"/results/{challenge.slug}/1/").content.decode()
    top = snap.result["tracks"]["A"][0]
    assert top["system"] in page
    lo, hi = top["final_ci"]
    assert f'{top["final"]:.3f} <small class="ci">[{lo:.3f}, {hi:.3f}]</small>' in page
    assert "Krippendorff" in page and "Excluded sessions" in page
    assert "Publish results" not in page  # the button is for organizers only

    track = client.get(f"/results/{challenge.slug}/1/track/A/").content.decode()
    # Drawn at publication and frozen with it: FAD-Dev vs FAD-Eval, FAD vs rank, the scores.
    assert track.count("<svg") == 3
    assert [p.kind for p in snap.plots.filter(track="A")] == ["fad-dev-eval", "fad-rank", "scores"]
    assert "Track A: per category" in track
    svg = client.get(f"/results/{challenge.slug}/1/track/A/fad-dev-eval.svg")
    assert svg["Content-Type"] == "image/svg+xml"
    assert svg.content.decode() == snap.plots.get(track="A", kind="fad-dev-eval").svg
    png = client.get(f"/results/{challenge.slug}/1/track/A/scores.png")
    assert png["Content-Type"] == "image/png" and png.content.startswith(b"\x89PNG")
    assert client.get(f"/results/{challenge.slug}/1/track/A/scores.gif").status_code == 404

    for table in tables.tables(snap.result):
        got = client.get(f"/results/{challenge.slug}/1/download/{table.name}.csv")
        assert got.status_code == 200, table.name
        reader = csv.DictReader(io.StringIO(got.content.decode()))
        assert reader.fieldnames == [*table.flat_columns, "status"]
        rows = list(reader)
        assert len(rows) == len(table.rows)
        assert {row["status"] for row in rows} <= {"final"}
        as_json = client.get(f"/results/{challenge.slug}/1/download/{table.name}.json").json()
        assert as_json["rows"] == json.loads(json.dumps(table.flat_rows()))
        assert as_json["status"] == "final"
    board = list(
        csv.DictReader(
            io.StringIO(
                client.get(
                    f"/results/{challenge.slug}/1/download/leaderboard-A.csv"
                ).content.decode()
            )
        )
    )
    assert [r["system"] for r in board] == [r["system"] for r in snap.result["tracks"]["A"]]
    assert float(board[0]["final_low"]) == top["final_ci"][0]
    assert client.get(f"/results/{challenge.slug}/1/download/nothing.csv").status_code == 404
    assert client.get(f"/results/{challenge.slug}/1/download/leaderboard-A.xml").status_code == 404


def test_public_api_and_its_schema(challenge, organizer, sim, fast_settings):
    snap = services.publish(challenge, organizer, sim.inputs)
    api = APIClient()
    assert api.get("/api/results/").json()["results"] == [
        {"slug": challenge.slug, "name": challenge.name, "latest_snapshot": 1}
    ]
    latest = api.get(f"/api/results/{challenge.slug}/latest/").json()
    assert latest["number"] == 1 and latest["result"]["tracks"] == snap.result["tracks"]
    board = api.get(f"/api/results/{challenge.slug}/snapshots/1/leaderboards/B/").json()
    assert [r["rank"] for r in board["rows"]] == [1, 2, 3]
    assert board["rows"][0]["final_ci"] == snap.result["tracks"]["B"][0]["final_ci"]
    assert api.get(f"/api/results/{challenge.slug}/snapshots/1/leaderboards/Z/").status_code == 404
    assert api.post("/api/results/").status_code in (403, 405)
    api.force_authenticate(organizer)  # the schema is for organizers unless opened
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").content.decode()
    assert "/api/results/{slug}/snapshots/{number}/leaderboards/{code}/" in schema


def test_a_snapshot_is_frozen_and_republishing_keeps_the_old_one(
    client, challenge, organizer, sim, fast_settings
):
    first = services.publish(challenge, organizer, sim.inputs)
    frozen = copy.deepcopy(first.result)
    board_url = f"/results/{challenge.slug}/1/download/leaderboard-A.csv"
    old_board = client.get(board_url).content

    # Ratings change after publication: the published snapshot does not.
    changed = copy.deepcopy(sim.inputs)
    for row in changed.ratings:
        if row["role"] == "trial" and row["system"] == "A0":
            row["quality"] = 10
    assert Snapshot.objects.get(pk=first.pk).result == frozen
    assert client.get(board_url).content == old_board
    with pytest.raises(ValueError, match="frozen"):
        first.save()

    second = services.publish(challenge, organizer, changed)
    assert second.number == 2
    assert second.input_hashes["ratings"] != first.input_hashes["ratings"]
    assert second.result["tracks"]["A"] != frozen["tracks"]["A"]
    assert Snapshot.objects.get(pk=first.pk).result == frozen
    assert client.get(board_url).content == old_board
    assert client.get(f"/results/{challenge.slug}/")["Location"] == f"/results/{challenge.slug}/2/"
    old = client.get(f"/results/{challenge.slug}/1/").content.decode()
    assert "a newer publication exists" in old
    api = APIClient()
    assert api.get(f"/api/results/{challenge.slug}/snapshots/1/").json()["result"] == frozen
    assert [
        s["number"] for s in api.get(f"/api/results/{challenge.slug}/snapshots/").json()["results"]
    ] == [2, 1]


def test_scoring_settings_drive_the_published_rules(challenge, organizer, sim, fast_settings):
    ListeningTest.objects.update_or_create(challenge=challenge, defaults={"exclude_at": 12})
    fast_settings.weight_diversity = 1.0
    fast_settings.save()
    snap = services.publish(challenge, organizer, sim.inputs)
    assert snap.settings["exclude_at"] == 12 and snap.settings["weight_diversity"] == 1.0
    default = services.score(sim.inputs, Rules(bootstrap=100))
    assert len(snap.result["excluded_sessions"]) < len(default["excluded_sessions"])


def test_rater_rules_constraints(challenge):
    from django.core.exceptions import ValidationError
    from django.db import IntegrityError, transaction

    test = ListeningTest(challenge=challenge, low_threshold=8, high_threshold=7)
    with pytest.raises(ValidationError):
        test.full_clean()
    with pytest.raises(IntegrityError), transaction.atomic():
        test.save()
    test = ListeningTest(challenge=challenge, misrating_rules={"anchor_hq_goodfit": ["x"]})
    with pytest.raises(ValidationError, match="bad misrating rule"):
        test.full_clean()
    test = ListeningTest(challenge=challenge, rater_rules={"too_fast": {"action": "ban"}})
    with pytest.raises(ValidationError, match="action must be one of"):
        test.full_clean()


def test_a_redelivered_publish_job_does_not_publish_twice(challenge, organizer, sim, fast_settings):
    from stimuli.models import Job

    job = Job.objects.create(challenge=challenge, kind=PUBLISH, created_by=organizer)
    # The worker froze the snapshot and died before it marked the job finished.
    services.publish(challenge, organizer, sim.inputs, job=job)
    job = services.run_publish_job(job.pk)
    assert job.state == Job.State.SUCCEEDED and job.result == {"snapshot": 1}
    assert Snapshot.objects.filter(challenge=challenge).count() == 1
    again = services.publish(challenge, organizer, sim.inputs, job=job)
    assert again.number == 1 and Snapshot.objects.count() == 1


def test_preview_is_for_organizers_only_and_stores_nothing(
    rater_user, organizer, organizer_client, challenge, sim, fast_settings
):
    client = Client()
    assert client.get(f"/results/{challenge.slug}/preview/").status_code == 404
    client.force_login(rater_user)
    assert client.get(f"/results/{challenge.slug}/preview/").status_code == 404
    with pytest.raises(PermissionDenied):
        services.preview(challenge, rater_user, sim.inputs)
    result = services.preview(challenge, organizer, sim.inputs)
    assert result["tracks"] == services.score(sim.inputs, Rules(bootstrap=100))["tracks"]
    assert Snapshot.objects.count() == 0
    response = organizer_client.get(f"/results/{challenge.slug}/preview/", follow=True)
    assert response.status_code == 200
    if importlib.util.find_spec("raters.selectors") is None:
        assert "Nothing to preview" in response.content.decode()


def test_preview_page_shows_the_tables(
    organizer_client, challenge, sim, fast_settings, monkeypatch
):
    # The listening test's selectors live in the raters app; here the rows come from the test.
    monkeypatch.setattr(services, "collect_inputs", lambda challenge: sim.inputs)
    page = organizer_client.get(f"/results/{challenge.slug}/preview/").content.decode()
    assert "preview of the results" in page and "Not published" in page
    assert page.count("<svg") == 0 and "Plots are drawn when the results are published" in page
    assert "Track B: per category" in page and "Download:" not in page
    assert Snapshot.objects.count() == 0


def test_the_page_says_where_too_few_raters_leave_no_honest_interval(
    client, challenge, organizer, fast_settings
):
    sim = simulate(systems_per_track=2, categories=2, sounds=3, raters=6, careless=0, seed=4)
    inputs = copy.deepcopy(sim.inputs)
    # Two raters of diversity: too few for an interval of it, which is then not printed.
    kept = {"rater0002", "rater0003"}  # no team of theirs in the test: nothing removed
    inputs.diversity = [d for d in inputs.diversity if d["rater"] in kept]
    snap = services.publish(challenge, organizer, inputs)
    row = snap.result["tracks"]["A"][0]
    assert row["diversity_ci"] is None
    assert "too few for an honest interval" in row["ci_withheld"]["diversity"]
    page = client.get(f"/results/{challenge.slug}/1/track/A/").content.decode()
    assert "no interval: only 2 raters" in page
    assert row["quality_ci"] is not None


def test_fad_inf_is_on_the_leaderboard_only_when_the_fad_rows_carry_it(
    client, challenge, organizer, sim, fast_settings
):
    with_inf = copy.deepcopy(sim.inputs)
    for row in with_inf.fad:
        row["fad_eval_inf"] = row["fad_eval"] - 0.5
        row["fad_dev_inf"] = row["fad_dev"] - 0.25
    # One category too small for FAD-inf: that system's mean is withheld, not taken over fewer.
    gap = next(row for row in with_inf.fad if row["track"] == "B")
    gap["fad_eval_inf"] = ""
    snap = services.publish(challenge, organizer, with_inf)
    assert snap.result["fad_infinity"] is True
    top = snap.result["tracks"]["A"][0]
    expected = [r["fad_eval"] - 0.5 for r in sim.inputs.fad if r["system"] == top["system"]]
    assert top["fad_eval_inf"] == pytest.approx(sum(expected) / len(expected), abs=1e-6)
    withheld = next(
        r for rows in snap.result["tracks"].values() for r in rows if r["system"] == gap["system"]
    )
    assert withheld["fad_eval_inf"] is None and withheld["fad_dev_inf"] is not None
    assert withheld["categories"][gap["category"]]["fad_eval_inf"] is None

    page = client.get(f"/results/{challenge.slug}/1/").content.decode()
    assert "FAD∞-Eval" in page and "FAD∞-Dev" in page
    board = list(
        csv.DictReader(
            io.StringIO(
                client.get(
                    f"/results/{challenge.slug}/1/download/leaderboard-A.csv"
                ).content.decode()
            )
        )
    )
    assert float(board[0]["fad_eval_inf"]) == top["fad_eval_inf"]
    assert "fad_dev_inf" in board[0]
    api = APIClient().get(f"/api/results/{challenge.slug}/snapshots/1/leaderboards/A/").json()
    assert api["rows"][0]["fad_eval_inf"] == top["fad_eval_inf"]
    assert "fad_dev_inf" in api["rows"][0]

    # Without FAD-inf in the rows: no column on the page, in the CSV or in the API.
    second = services.publish(challenge, organizer, sim.inputs)
    assert second.result["fad_infinity"] is False
    page = client.get(f"/results/{challenge.slug}/2/").content.decode()
    assert "FAD∞" not in page
    header = client.get(f"/results/{challenge.slug}/2/download/leaderboard-A.csv").content
    assert b"fad_eval_inf" not in header and b"fad_dev_inf" not in header
    api = APIClient().get(f"/api/results/{challenge.slug}/snapshots/2/leaderboards/A/").json()
    assert "fad_eval_inf" not in api["rows"][0] and "fad_dev_inf" not in api["rows"][0]
