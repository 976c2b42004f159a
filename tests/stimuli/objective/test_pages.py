"""The objective stage on the organizer page and in the REST API (tasks run in-process here)."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from stimuli.job_kinds import EMBED, PREDICTORS, RANK_BY_FAD, SELECT_MEDOIDS
from stimuli.models import Challenge, Clip, FadResult, Job, Medoid, PredictorScore, ReferenceStats
from stimuli.objective import config, services
from stimuli.predictor_axes import AXIS_TITLES
from tests.objective_setup import bad_crc, npy_header, npz_bytes, small_challenge


@pytest.fixture
def objective(db, tmp_path):
    return small_challenge(tmp_path)


def api(slug: str, action: str = "") -> str:
    base = f"/api/challenges/{slug}/objective/"
    return base + (f"{action}/" if action else "")


def test_challenge_page_loads_the_objective_panel(organizer_client, objective):
    page = organizer_client.get(reverse("stimuli:challenge", args=[objective.slug]))
    assert reverse("objective:panel", args=[objective.slug]) in page.content.decode()
    panel = organizer_client.get(reverse("objective:panel", args=[objective.slug]))
    text = panel.content.decode()
    assert "No FAD computed yet." in text and "<code>logmel</code>" in text
    # The medoid embedding and k-means settings are shown, and the league's models.
    assert "k-means (seed 0, best of 3 initialisations) on each clip's mean frame" in text
    config.set_models(objective, league_models=[{"name": "logmel", "options": {"n_mels": 32}}])
    text = organizer_client.get(reverse("objective:panel", args=[objective.slug])).content.decode()
    assert "embedding league: <code>logmel</code>" in text


def test_organizer_runs_evaluation_and_medoids_from_the_page(organizer_client, objective):
    url = reverse("objective:start", args=[objective.slug, "rank-by-fad"])
    text = organizer_client.post(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-track="A"' in text and 'data-system="Close"' in text
    assert text.count('badge ok">finalist') == 2
    assert FadResult.objects.filter(challenge=objective).count() == 16
    url = reverse("objective:start", args=[objective.slug, "select-medoids"])
    text = organizer_client.post(url, HTTP_HX_REQUEST="true").content.decode()
    assert "20 medoids chosen." in text
    job = Job.objects.filter(kind=SELECT_MEDOIDS).get()
    poll = organizer_client.get(reverse("objective:job", args=[objective.slug, job.pk]))
    assert poll["HX-Trigger"] == "objective-changed" and 'data-state="succeeded"' in poll.text


def test_errors_are_shown_and_nothing_starts(organizer_client, objective):
    url = reverse("objective:start", args=[objective.slug, "select-medoids"])
    response = organizer_client.post(url)
    assert response.status_code == 400
    assert "no finalists yet" in response.content.decode()
    response = organizer_client.post(
        reverse("objective:settings", args=[objective.slug]),
        {"fad_model": "logmel", "finalists_per_track": 0, "medoids_per_category": 20,
         "kmeans_seed": 0, "kmeans_n_init": 10, "fad_model_options": "{}",
         "medoid_model": "logmel", "medoid_model_options": "{}"},
    )  # fmt: skip
    assert response.status_code == 400
    assert not Job.objects.exists()


def test_failed_job_is_retried_from_the_page(organizer_client, objective):
    from stimuli.objective import config

    config.set_models(objective, fad_model="no_such_module")
    organizer_client.post(reverse("objective:start", args=[objective.slug, "rank-by-fad"]))
    job = Job.objects.get(kind=EMBED)
    assert job.state == Job.State.FAILED
    config.set_models(objective, fad_model="logmel")
    # The job keeps the model it was started with, so a retry fails the same way...
    organizer_client.post(reverse("objective:retry", args=[objective.slug, job.pk]))
    job.refresh_from_db()
    assert job.state == Job.State.FAILED and job.attempts == 2
    # ...and a new run takes the corrected settings.
    organizer_client.post(reverse("objective:start", args=[objective.slug, "rank-by-fad"]))
    assert Job.objects.get(kind=RANK_BY_FAD).state == Job.State.SUCCEEDED


def test_anonymous_and_raters_are_kept_out(client, rater_user, objective):
    url = reverse("objective:start", args=[objective.slug, "rank-by-fad"])
    assert client.post(url).status_code == 302
    client.force_login(rater_user)
    assert client.post(url).status_code == 302
    assert client.post(api(objective.slug, "rank-by-fad")).status_code == 403
    assert not Job.objects.exists()


def test_api_runs_the_stage_and_serves_the_results(api_client, objective):
    response = api_client.post(api(objective.slug, "rank-by-fad"))
    assert response.status_code == 202
    assert response.json()["kind"] == "embed"
    ranking = api_client.get(api(objective.slug)).json()
    assert ranking["model_id"].startswith("logmel:")
    assert [r["system"] for r in ranking["tracks"]["A"]] == ["Close", "Far"]
    assert ranking["tracks"]["A"][0]["finalist"] is True
    rows = api_client.get(api(objective.slug, "fad")).json()
    assert len(rows) == 16 and {r["reference"] for r in rows} == {"evaluation", "development"}
    assert api_client.post(api(objective.slug, "select-medoids")).status_code == 202
    medoids = api_client.get(api(objective.slug, "medoids")).json()
    assert len(medoids) == Medoid.objects.count() == 20


@pytest.fixture
def demo_standins(settings, tmp_path):
    """The demo's small stand-ins where the settings look for the predictors' files."""
    from stimuli.objective.predictors.standins import DEMO_SIZES, write_standins

    settings.FOLEY_MODEL_DIR = str(tmp_path / "models")
    settings.FOLEY_AESTHETICS_WEIGHTS = settings.FOLEY_PAM_WEIGHTS = ""
    settings.FOLEY_PAM_TOKENIZER = ""
    write_standins(tmp_path / "models", DEMO_SIZES)


def test_organizer_runs_the_predictors_from_the_page_and_the_api(
    organizer_client, api_client, objective, demo_standins
):
    panel = organizer_client.get(reverse("objective:panel", args=[objective.slug])).text
    assert ">Run the predictors</button>" in panel and "none yet" in panel
    url = reverse("objective:start", args=[objective.slug, "run-predictors"])
    text = organizer_client.post(url, HTTP_HX_REQUEST="true").content.decode()
    clips = Clip.objects.filter(challenge=objective, role=Clip.Role.SYSTEM).count()
    assert PredictorScore.objects.filter(clip__challenge=objective).count() == clips * 5
    assert f"{clips * 5} values stored" in text
    job = Job.objects.get(kind=PREDICTORS)
    assert job.state == Job.State.SUCCEEDED and job.created_by is not None
    # The API's action of the same name: the same job kind; a second run scores nothing again.
    response = api_client.post(api(objective.slug, "run-predictors"))
    assert response.status_code == 202 and response.json()["kind"] == PREDICTORS
    again = Job.objects.filter(kind=PREDICTORS).latest("pk")
    assert again.pk != job.pk and again.result["computed"] == 0
    # Refused once published, on the page and in the API alike.
    Challenge.objects.filter(pk=objective.pk).update(phase="published")
    refused = organizer_client.post(url, HTTP_HX_REQUEST="true")  # htmx swaps 2xx answers only
    assert refused.status_code == 200 and "published" in refused.text
    assert organizer_client.post(url).status_code == 409
    assert api_client.post(api(objective.slug, "run-predictors")).status_code == 409


def test_api_settings_and_reference_statistics(api_client, objective):
    response = api_client.patch(
        api(objective.slug, "settings"), {"finalists_per_track": 2}, format="json"
    )
    assert response.status_code == 200 and response.json()["finalists_per_track"] == 2
    response = api_client.patch(
        api(objective.slug, "settings"), {"finalists_per_track": 0}, format="json"
    )
    assert response.status_code == 400
    published = io.BytesIO()  # the layout of the DCASE 2023 Task 7 statistics
    np.savez(published, mu=np.full(128, 0.5), sigma=np.eye(128) * 2.0, embedding_count=1000)
    rain = published.getvalue()
    bad = io.BytesIO()
    np.savez(bad, mu=np.zeros(128))
    response = api_client.post(
        api(objective.slug, "reference-stats"),
        {
            "files": [
                SimpleUploadedFile("rain.npz", rain),
                SimpleUploadedFile("dog_bark.npz", bad.getvalue()),
            ]
        },
        format="multipart",
    )
    assert response.status_code == 400 and "dog_bark: statistics file lacks sigma" in response.text
    assert not ReferenceStats.objects.exists()
    # Files that are no statistics at all, or claim arrays they do not hold, are a client's
    # error with the reason, never a server error.
    huge = npz_bytes(mu=npy_header((2**40,)), sigma=npy_header((2**40, 2**40)))
    for content, reason in ((bad_crc(), "Bad CRC-32"), (huge, "mu has shape [1099511627776]")):
        response = api_client.post(
            api(objective.slug, "reference-stats"),
            {"files": [SimpleUploadedFile("rain.npz", content)]},
            format="multipart",
        )
        assert response.status_code == 400 and reason in response.json()["detail"]
    response = api_client.post(
        api(objective.slug, "reference-stats"),
        {"files": [SimpleUploadedFile("rain.npz", rain)], "model": "logmel"},
        format="multipart",
    )
    assert (
        response.status_code == 400
        and "name the model the statistics were made with" in (response.json()["detail"])
    )
    assert not ReferenceStats.objects.exists()
    response = api_client.post(
        api(objective.slug, "reference-stats"),
        {"files": [SimpleUploadedFile("rain.npz", rain)], "source": "DCASE"},
        format="multipart",
    )
    assert response.status_code == 201
    stored = response.json()["stored"]
    assert stored == [
        {"category": "rain", "model_id": "vggish:dcase2023-act0-raw@*", "dim": 128, "count": 1000}
    ]


def test_schema_documents_the_objective_endpoints(organizer_client):
    schema = organizer_client.get("/api/schema/").content.decode()
    assert "/objective/rank-by-fad/" in schema and "/objective/reference-stats/" in schema


@pytest.mark.parametrize(
    ("phase", "kind", "page_refuses"),
    [
        ("listening", SELECT_MEDOIDS, True),
        ("published", RANK_BY_FAD, True),
        ("listening", RANK_BY_FAD, False),  # FAD does not touch the stimuli
    ],
)
def test_api_retry_is_refused_where_the_page_refuses_it(
    organizer_client, api_client, objective, phase, kind, page_refuses
):
    """One rule for both: the API's retry used to skip the phase check, answer 200 while the
    listening test was open, and burn an attempt of a medoid job."""
    from stimuli.models import Challenge

    job = Job.objects.create(
        challenge=objective,
        kind=kind,
        state=Job.State.FAILED,
        attempts=1,
        params={"challenge_id": objective.pk, "task": "compute_fad"},
    )
    Challenge.objects.filter(pk=objective.pk).update(phase=phase)
    response = api_client.post(f"/api/challenges/{objective.slug}/jobs/{job.pk}/retry/")
    page = organizer_client.post(reverse("objective:retry", args=[objective.slug, job.pk]))
    job.refresh_from_db()
    if page_refuses:
        assert response.status_code == 409, response.content
        assert page.status_code == 409  # the same refusal, the same status
        assert job.state == Job.State.FAILED and job.attempts == 1
    else:
        assert response.status_code == 200, response.content


def test_starting_against_the_phase_is_a_409(api_client, objective):
    from stimuli.models import Challenge

    Challenge.objects.filter(pk=objective.pk).update(phase="published")
    response = api_client.post(api(objective.slug, "rank-by-fad"))
    assert response.status_code == 409 and "published" in response.json()["detail"]


def test_clips_page_pages_and_browses_the_medoids(organizer_client, db, tmp_path):
    objective = small_challenge(tmp_path, slug="browse")
    url = reverse("stimuli:clips", args=[objective.slug])
    first = organizer_client.get(url).content.decode()
    assert "128 clips, page 1 of 2." in first and "?page=2" in first  # 4 x 2 x 12 + 2 x 2 x 8
    second = organizer_client.get(url + "?page=2").content.decode()
    assert "page 2 of 2" in second and second.count("<audio") == 28
    assert services.rank_by_fad_now(objective).state == Job.State.SUCCEEDED
    assert services.select_medoids_now(objective).state == Job.State.SUCCEEDED
    page = organizer_client.get(url + "?medoids=1&system=Close&category=rain").content.decode()
    # 5 medoids per finalist and category, in cluster order, each marked.
    assert "5 clips." in page and page.count("<audio") == 5
    assert page.index("medoid 1<") < page.index("medoid 5<")
    panel = organizer_client.get(reverse("objective:panel", args=[objective.slug])).content.decode()
    assert f"{url}?medoids=1" in panel


def test_the_medoids_show_each_clips_predictor_values_where_computed(
    organizer_client, db, tmp_path
):
    objective = small_challenge(tmp_path, slug="medoid-values")
    assert services.rank_by_fad_now(objective).state == Job.State.SUCCEEDED
    assert services.select_medoids_now(objective).state == Job.State.SUCCEEDED
    url = reverse("stimuli:clips", args=[objective.slug]) + "?medoids=1&system=Close&category=rain"
    page = organizer_client.get(url).content.decode()
    assert 'title="Audiobox Aesthetics: production quality, 1-10"' not in page  # none computed
    medoids = list(Medoid.objects.filter(system__name="Close", category__slug="rain"))
    # Values as the predictors' job stores them, one row per clip and axis; the last medoid has
    # none (a run under way).
    rows = [
        PredictorScore(clip_id=m.clip_id, predictor=predictor, axis=axis, model_id=model,
                       value=m.position + place / 10)
        for m in medoids[:-1]
        for place, (predictor, axis) in enumerate(
            [("aesthetics", a) for a in ("PQ", "PC", "CE", "CU")] + [("pam", "PAM")]
        )
        for model in [f"{predictor}@1a2b"]
    ]  # fmt: skip
    PredictorScore.objects.bulk_create(rows)
    page = organizer_client.get(url).content.decode()
    table = page[page.index('id="clips"') :]
    for axis, title in AXIS_TITLES.items():
        assert f'<th class="num" title="{title}">{axis}</th>' in table
    first = next(m for m in medoids if m.position == 0)
    row = table[table.index(first.clip.audio.sha256[:12]) :]
    row = row[: row.index("</tr>")]
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)[1:]  # after the loudness
    assert cells == ["0.00", "0.10", "0.20", "0.30", "0.40"]
    last = medoids[-1].clip.audio.sha256[:12]
    row = table[table.index(last) :]
    cells = re.findall(r'<td class="num">([^<]*)</td>', row[: row.index("</tr>")])[1:]
    assert cells == ["\u2013"] * 5  # none yet
    assert "stand-ins" not in page
    PredictorScore.objects.filter(axis="PAM").update(model_id="pam@1a2b (untrained stand-in)")
    page = organizer_client.get(url).content.decode()
    assert "Untrained stand-ins gave them (the demo's)" in page


def test_a_systems_clips_by_their_own_fad_for_organizers_only(
    organizer_client, rater_user, objective
):
    assert services.rank_by_fad_now(objective).state == Job.State.SUCCEEDED
    system = objective.systems.get(name="Far")
    panel = organizer_client.get(reverse("objective:panel", args=[objective.slug])).content.decode()
    url = reverse("objective:clip_fad", args=[objective.slug, system.pk, "rain"])
    assert url in panel  # linked from the ranking, per system and category
    page = organizer_client.get(url).content.decode()
    result = FadResult.objects.get(system=system, category__slug="rain", reference="evaluation")
    worst_first = [audio_id for audio_id, _ in result.details["clip_fad"]]
    # Every clip, in the order of its own FAD, each playable.
    assert page.count("<audio") == 12
    shown = re.findall(r"/organize/audio/([0-9a-f]{64})\.wav", page)
    sha = dict(Clip.objects.filter(system=system).values_list("audio_id", "audio__sha256"))
    assert shown == [sha[audio_id] for audio_id in worst_first]
    values = [float(v) for v in re.findall(r'<td class="num">([0-9.]+)</td>', page)[::2]]
    assert values == sorted(values, reverse=True) and len(values) == 12
    # Not for anyone else: the page and its audio send them to log in.
    for who in (Client(), rater_client(rater_user)):
        assert who.get(url).status_code == 302
        assert who.get(f"/organize/audio/{shown[0]}.wav").status_code == 302
    # Another challenge's system or an unknown category is no page.
    assert organizer_client.get(url.replace("/rain/", "/nothing/")).status_code == 404
    other = reverse("objective:clip_fad", args=[objective.slug, 10**6, "rain"])
    assert organizer_client.get(other).status_code == 404


def rater_client(user) -> Client:
    rater = Client()
    rater.force_login(user)
    return rater
