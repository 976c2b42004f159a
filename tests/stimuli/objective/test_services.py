"""The objective stage in-process: embeddings cache, FAD per system and category, finalists,
medoids, and published reference statistics."""

from __future__ import annotations

import io
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from django.db import IntegrityError, transaction

from stimuli import jobs, selectors
from stimuli.job_kinds import EMBED, GENERATE, RANK_BY_FAD, SELECT_MEDOIDS
from stimuli.models import Clip, Embedding, FadResult, Job, Medoid, ReferenceStats
from stimuli.objective import config, distances, medoids, reference_stats, services
from stimuli.objective.embeddings import load_embedding_model
from stimuli.objective.embeddings.base import model_id_matches
from stimuli.objective.fad import GaussianStats
from stimuli.objective.medoids import select_medoids
from stimuli.services import create_challenge
from tests.objective_setup import bad_crc, npy_header, npz_bytes, small_challenge, system


@pytest.fixture
def objective(db, tmp_path):
    return small_challenge(tmp_path)


def test_evaluation_ranks_systems_by_fad_and_marks_finalists(objective):
    job = services.rank_by_fad_now(objective)
    assert job.kind == RANK_BY_FAD and job.state == Job.State.SUCCEEDED, job.error
    # 4 systems x 2 categories x (Eval, Dev)
    assert FadResult.objects.filter(challenge=objective).count() == 16
    row = FadResult.objects.filter(
        system=system(objective, "Close"), reference="evaluation"
    ).first()
    assert row.n_clips == 12 and row.n_reference == 8 and row.model_id.startswith("logmel:")
    assert row.details["reference_source"] == "audio"
    ranking = selectors.fad_ranking(objective)
    assert [r["system"].name for r in ranking["A"]] == ["Close", "Far"]
    assert [r["system"].name for r in ranking["B"]] == ["Middle", "Farther"]
    assert ranking["A"][0]["fad_eval"] < ranking["A"][1]["fad_eval"]
    finalists = set(objective.systems.filter(is_finalist=True).values_list("name", flat=True))
    assert finalists == {"Close", "Middle"}  # one per track
    assert job.result["finalists"] == {"A": ["Close"], "B": ["Middle"]}
    objective.refresh_from_db()
    assert objective.phase == "objective"


def test_rerun_takes_every_embedding_from_the_cache_and_changes_nothing(objective):
    services.rank_by_fad_now(objective)
    values = dict(FadResult.objects.values_list("pk", "value"))
    files = Embedding.objects.count()
    assert files == 4 * 2 * 12 + 2 * 2 * 8
    job = services.rank_by_fad_now(objective)
    embed = Job.objects.get(pk=job.params["embed_job"])
    assert embed.result["computed"] == 0 and embed.result["cached"] == files
    assert Embedding.objects.count() == files
    assert dict(FadResult.objects.values_list("pk", "value")) == values


def test_fad_job_failing_on_its_last_category_changes_no_result_and_no_finalist(objective):
    first = services.rank_by_fad_now(objective)
    before = sorted(FadResult.objects.values_list("pk", "system_id", "category_id", "value"))
    finalists = set(objective.systems.filter(is_finalist=True).values_list("name", flat=True))
    # A run now would change the first system's FAD and pick two finalists per track...
    close_dog = Clip.objects.filter(system=system(objective, "Close"), category__slug="dog_bark")
    close_dog.filter(pk__in=list(close_dog.values_list("pk", flat=True)[:6])).delete()
    config.set_models(objective, finalists_per_track=2)
    # ...but the last system's last category has lost its embeddings, so it fails there.
    last = Clip.objects.filter(system=system(objective, "Farther"), category__slug="rain")
    Embedding.objects.filter(audio__in=last.values("audio")).delete()
    job = Job.objects.create(challenge=objective, kind=RANK_BY_FAD, params=first.params)
    job = services.run_rank_by_fad(job.pk)
    assert job.state == Job.State.FAILED and "have no logmel" in job.error
    after = sorted(FadResult.objects.values_list("pk", "system_id", "category_id", "value"))
    assert after == before
    assert set(objective.systems.filter(is_finalist=True).values_list("name", flat=True)) == (
        finalists
    )
    # A new run embeds them again, then stores the new values and the new finalists.
    services.rank_by_fad_now(objective)
    assert sorted(FadResult.objects.values_list("value", flat=True)) != sorted(
        v for *_, v in before
    )
    assert objective.systems.filter(is_finalist=True).count() == 4


def test_cache_is_keyed_on_model_options(objective):
    a = load_embedding_model("logmel")
    b = load_embedding_model("logmel", {"hop_s": 0.5})
    assert a.model_id != b.model_id
    assert a.model_id == load_embedding_model("logmel").model_id


def test_medoids_are_distinct_deterministic_and_replace_earlier_ones(objective):
    services.rank_by_fad_now(objective)
    job = services.select_medoids_now(objective)
    assert job.state == Job.State.SUCCEEDED, job.error
    medoids = Medoid.objects.filter(challenge=objective)
    assert medoids.count() == 2 * 2 * 5  # 2 finalists x 2 categories x 5
    first = list(
        medoids.order_by("system", "category", "position").values_list("clip_id", flat=True)
    )
    for (system_id, category_id), count in _groups(medoids).items():
        assert count == 5
        clips = medoids.filter(system_id=system_id, category_id=category_id)
        assert clips.values("clip").distinct().count() == 5
        assert all(m.clip.system_id == system_id for m in clips)
    assert not medoids.filter(system__is_finalist=False).exists()
    services.select_medoids_now(objective)
    again = list(
        medoids.order_by("system", "category", "position").values_list("clip_id", flat=True)
    )
    assert again == first


def _groups(medoids) -> dict:
    out: dict = {}
    for m in medoids:
        out[(m.system_id, m.category_id)] = out.get((m.system_id, m.category_id), 0) + 1
    return out


def test_medoids_of_synthetic_clusters_pick_one_clip_per_cluster():
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=50.0, size=(20, 8))
    points = np.concatenate([c + rng.normal(scale=0.5, size=(6, 8)) for c in centres])
    order = rng.permutation(len(points))
    points = points[order]
    cluster_of = np.repeat(np.arange(20), 6)[order]
    picks = select_medoids(points, 20, seed=0, n_init=4)
    assert len(set(picks)) == 20
    assert sorted(cluster_of[picks]) == list(range(20))
    for index in picks:  # each pick is the member nearest its cluster's mean
        members = np.flatnonzero(cluster_of == cluster_of[index])
        mean = points[members].mean(axis=0)
        nearest = members[np.argmin(((points[members] - mean) ** 2).sum(axis=1))]
        assert index == nearest
    assert picks == select_medoids(points, 20, seed=0, n_init=4)


def test_medoids_need_k_clips():
    with pytest.raises(ValueError, match="at least 20 clips"):
        select_medoids(np.zeros((5, 3)), 20)


def test_published_statistics_become_the_evaluation_reference(db, dcase_stats_dir):
    challenge = create_challenge(name="Stats", slug="stats")
    files = {path.stem: path for path in sorted(dcase_stats_dir.glob("*.npz"))}
    rows = reference_stats.import_reference_stats(challenge, files, source="DCASE 2023 Task 7")
    assert len(rows) == 7
    assert {r.category.slug for r in rows} == set(
        challenge.categories.values_list("slug", flat=True)
    )
    assert all(r.dim == 128 and r.count > 0 and r.model == "vggish" for r in rows)
    assert {r.model_id for r in rows} == {"vggish:dcase2023-act0-raw@*"}
    # Importing again replaces, never duplicates.
    reference_stats.import_reference_stats(challenge, files)
    assert ReferenceStats.objects.filter(challenge=challenge).count() == 7


def test_dcase_statistics_declare_the_vggish_configuration_the_platform_computes():
    # The declaration must be what the vggish module's ids say, whichever weights it loads:
    # the dcase2023 preset (the task's own pipeline) matches; the defaults (resampled audio,
    # 0.96 s examples) and every other option do not.
    dcase = load_embedding_model("vggish", {"preset": "dcase2023"}, weights="random", device="cpu")
    assert dcase.timestamp_embedding_size == config.EMBEDDING_SIZES["vggish"]
    assert model_id_matches(config.DCASE2023_VGGISH, dcase.model_id)
    for options in ({}, {"activation": True}, {"hop_size": 0.5}):
        other = load_embedding_model("vggish", options, weights="random", device="cpu")
        assert not model_id_matches(config.DCASE2023_VGGISH, other.model_id), options


def test_dcase_statistics_refuse_the_vggish_defaults_and_name_the_preset(db, tmp_path):
    challenge = create_challenge(name="Stats", slug="stats")
    path = tmp_path / "rain.npz"
    np.savez(path, mu=np.zeros(128), sigma=np.eye(128), embedding_count=1000)
    reference_stats.import_reference_stats(challenge, {"rain": path})
    with pytest.raises(config.ObjectiveError, match=re.escape('options {"preset": "dcase2023"}')):
        config.checkpublished_stats(challenge, "vggish:hop0.96-act0-raw@abc", 128)
    config.checkpublished_stats(challenge, "vggish:dcase2023-act0-raw@abc", 128)


def test_models_named_by_statistics_are_model_ids(db):
    challenge = create_challenge(name="Stats", slug="stats")
    path = io.BytesIO(GaussianStats(np.zeros(4), np.eye(4), 10).to_npz_bytes())
    for model in ("logmel", "logmel:mels2", "logmel@none", ":x@y", "logmel:undeclared@undeclared"):
        with pytest.raises(config.ObjectiveError, match="model"):
            reference_stats.import_reference_stats(challenge, {"rain": path}, model=model)
    assert not ReferenceStats.objects.exists()
    assert model_id_matches("logmel:mels2-win0.5-hop0.25@*", "logmel:mels2-win0.5-hop0.25@none")
    assert not model_id_matches("logmel:mels2-win0.5-hop0.25@abc", "logmel:mels2-win0.5-hop0.25@d")
    assert not model_id_matches("logmel:mels2-win0.5-hop0.25@*", "logmel:mels4-win0.5-hop0.25@d")


def test_reference_statistics_keep_their_invariants_in_the_database(db):
    challenge = create_challenge(name="Stats", slug="stats")
    category = challenge.categories.get(slug="rain")
    row = {"challenge": challenge, "category": category, "reference": "evaluation", "count": 1}
    row |= {"data": b"", "sha256": "0" * 64}
    for model, model_id, dim in (
        ("vggish", "logmel:x@y", 128),  # the id names another model
        ("vggish", "vggish:hop0.96-act0-raw", 128),  # no weights part
        ("vggish", "vggish:hop0.96-act0-raw@*", 0),  # no dimensions
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            ReferenceStats.objects.create(**row, model=model, model_id=model_id, dim=dim)
    ReferenceStats.objects.create(**row, model="vggish", model_id="vggish:a@*", dim=128)


BAD_STATISTICS = [
    (bad_crc(), "not a readable .npz file: Bad CRC-32"),
    (b"not a zip at all", "not a readable .npz file"),
    (npz_bytes(mu=np.zeros(128), sigma=b"sigma as text"), "sigma.npy is not a NumPy array"),
    (
        npz_bytes(mu=np.array([object()] * 128), sigma=np.eye(128)),
        "mu.npy holds object, not numbers",
    ),
    (npz_bytes(mu=npy_header((2**40,)), sigma=npy_header((2**40, 2**40))), r"mu has shape"),
    (npz_bytes(mu=np.zeros(128), sigma=npy_header((128, 128))), "sigma is truncated"),
    (npz_bytes(mu=np.zeros((1, 128)), sigma=np.eye(128)), r"mu has shape \[1, 128\]"),
    (npz_bytes(mu=np.zeros(0), sigma=np.eye(0)), r"mu has shape \[0\]"),
    (npz_bytes(mu=np.zeros(128), sigma=np.eye(64)), r"sigma has shape \[64, 64\]"),
    (npz_bytes(mu=np.zeros(64), sigma=np.eye(64)), "64-d statistics, but vggish .* 128-d"),
    (npz_bytes(mu=np.full(128, np.nan), sigma=np.eye(128)), "NaN or infinite"),
    (npz_bytes(mu=np.zeros(128), sigma=np.triu(np.ones((128, 128)))), "not symmetric"),
    (
        npz_bytes(mu=np.zeros(128), sigma=np.eye(128), embedding_count=np.array(-5)),
        "embedding_count -5 is out of range",
    ),
    (
        npz_bytes(mu=np.zeros(128), sigma=np.eye(128), extra=npy_header((3,), "|O")),
        "extra.npy holds object",
    ),
]


@pytest.mark.parametrize(("content", "message"), BAD_STATISTICS)
def test_malformed_statistics_files_are_refused_with_the_reason(db, content, message):
    challenge = create_challenge(name="Stats", slug="stats")
    good = io.BytesIO(npz_bytes(mu=np.zeros(128), sigma=np.eye(128)))
    tracemalloc.start()
    try:
        with pytest.raises(config.ObjectiveError, match=f"rain: (.* )?{message}"):
            reference_stats.import_reference_stats(
                challenge, {"dog_bark": good, "rain": io.BytesIO(content)}
            )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20  # a header's claims are checked before anything is allocated
    assert not ReferenceStats.objects.exists()


def test_bad_statistics_store_nothing(db, tmp_path):
    challenge = create_challenge(name="Stats", slug="stats")
    good = tmp_path / "dog_bark.npz"
    np.savez(good, mu=np.zeros(128), sigma=np.eye(128), embedding_count=1000)
    bad = tmp_path / "rain.npz"
    np.savez(bad, mu=np.zeros(128))
    with pytest.raises(config.ObjectiveError, match="rain: statistics file lacks sigma"):
        reference_stats.import_reference_stats(challenge, {good.stem: good, "rain": bad})
    with pytest.raises(config.ObjectiveError, match="helicopter: no category"):
        reference_stats.import_reference_stats(challenge, {"helicopter": good})
    assert not ReferenceStats.objects.exists()


def test_fad_uses_published_statistics_instead_of_audio(objective, tmp_path: Path):
    # Statistics of the FAD model's configuration take the place of the evaluation audio of
    # their category; those of other models (here VGGish's) do not stand in for anything.
    model = load_embedding_model("logmel")
    rng = np.random.default_rng(0)
    path = tmp_path / "rain.npz"
    np.savez(path, mu=rng.normal(size=128), sigma=np.eye(128), embedding_count=1000)
    reference_stats.import_reference_stats(
        objective, {"rain": path}, model=model.model_id, source="paper"
    )
    vggish = tmp_path / "dog_bark.npz"
    np.savez(vggish, mu=np.zeros(128), sigma=np.eye(128), embedding_count=1000)
    reference_stats.import_reference_stats(objective, {"dog_bark": vggish}, model="vggish")
    services.rank_by_fad_now(objective)
    rain = FadResult.objects.get(
        system=system(objective, "Close"), category__slug="rain", reference="evaluation"
    )
    assert rain.details["reference_source"] == "published statistics (paper)"
    assert rain.n_reference == 1000
    assert rain.model_id == model.model_id
    dog = FadResult.objects.get(
        system=system(objective, "Close"), category__slug="dog_bark", reference="evaluation"
    )
    assert dog.details["reference_source"] == "audio"


def test_statistics_of_another_configuration_are_refused_before_anything_is_embedded(
    objective, tmp_path: Path
):
    path = tmp_path / "rain.npz"
    np.savez(path, mu=np.zeros(128), sigma=np.eye(128), embedding_count=1000)
    declared = "logmel:mels64-win0.5-hop0.25@*"
    reference_stats.import_reference_stats(objective, {"rain": path}, model=declared)
    config.set_models(objective, fad_model_options={"hop_s": 0.5})
    job = services.rank_by_fad_now(objective)
    assert job.kind == EMBED and job.state == Job.State.FAILED
    assert (
        "the published evaluation statistics of rain were made with "
        "logmel:mels64-win0.5-hop0.25@*, but this evaluation embeds with "
        "logmel:mels64-win0.5-hop0.5@none" in job.error
    )
    assert not Embedding.objects.exists() and not FadResult.objects.exists()
    # The configuration they declare uses them.
    config.set_models(objective, fad_model_options={})
    assert services.rank_by_fad_now(objective).state == Job.State.SUCCEEDED
    rain = FadResult.objects.filter(category__slug="rain", reference="evaluation").first()
    assert rain.details["reference_source"].startswith("published statistics")
    # Statistics imported before they declared a configuration match no model.
    ReferenceStats.objects.update(model_id="logmel:undeclared@undeclared")
    job = services.rank_by_fad_now(objective)
    assert job.state == Job.State.FAILED and "an undeclared configuration" in job.error


def test_statistics_of_another_embedding_size_are_refused(objective, tmp_path: Path):
    path = tmp_path / "rain.npz"
    np.savez(path, mu=np.zeros(64), sigma=np.eye(64), embedding_count=1000)
    reference_stats.import_reference_stats(
        objective, {"rain": path}, model="logmel:mels64-win0.5-hop0.25@*"
    )
    job = services.rank_by_fad_now(objective)
    assert job.state == Job.State.FAILED
    assert "statistics of rain are 64-d, but logmel:mels64-win0.5-hop0.25@none gives 128-d" in (
        job.error
    )
    assert not Embedding.objects.exists()


def test_clear_errors_before_anything_runs(db, tmp_path):
    challenge = create_challenge(name="Empty", slug="empty")
    with pytest.raises(config.ObjectiveError, match="no systems"):
        services.start_rank_by_fad(challenge)
    objective = small_challenge(tmp_path, slug="objective-2")
    with pytest.raises(config.ObjectiveError, match="no finalists"):
        services.start_select_medoids(objective)
    with pytest.raises(config.ObjectiveError, match="unknown objective settings: colour"):
        config.set_models(objective, colour="red")
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("phase", "start", "message"),
    [
        ("published", "start_rank_by_fad", "the results of this challenge are published"),
        ("published", "start_select_medoids", "the results of this challenge are published"),
        (
            "listening",
            "start_select_medoids",
            "the listening test is open: its stimuli are fixed, so medoids cannot change",
        ),
        # FAD does not touch the stimuli: only the missing systems stop it.
        ("listening", "start_rank_by_fad", "the challenge has no systems yet"),
    ],
)
def test_the_phase_decides_what_may_start(db, phase, start, message):
    challenge = create_challenge(name="Phased", slug="phased", phase=phase)
    with pytest.raises(config.ObjectiveError, match=message):
        getattr(services, start)(challenge)
    assert not Job.objects.exists()


def test_unknown_model_fails_the_job_with_the_reason(objective):
    config.set_models(objective, fad_model="no_such_package.model")
    job = services.rank_by_fad_now(objective)
    assert job.kind == EMBED and job.state == Job.State.FAILED
    assert "cannot import 'no_such_package.model'" in job.error
    assert not FadResult.objects.exists()


def test_clips_of_an_unfinished_generation_stay_out_of_fad(objective):
    services.rank_by_fad_now(objective)
    before = dict(
        FadResult.objects.filter(reference="evaluation").values_list("system__name", "value")
    )
    close = system(objective, "Close")
    running = Job.objects.create(challenge=objective, kind=GENERATE, state=Job.State.RUNNING)
    # Half a batch of a regeneration, nothing like the system's current clips.
    for clip in Clip.objects.filter(system=system(objective, "Far"))[:6]:
        Clip.objects.create(
            challenge=objective,
            category=clip.category,
            role=Clip.Role.SYSTEM,
            system=close,
            audio=clip.audio,
            source_job=running,
        )
    services.rank_by_fad_now(objective)
    after = dict(
        FadResult.objects.filter(reference="evaluation").values_list("system__name", "value")
    )
    assert after == pytest.approx(before)
    assert FadResult.objects.filter(system=close, reference="evaluation").first().n_clips == 12


def test_a_job_whose_worker_was_lost_can_be_retried(objective, settings):
    from datetime import timedelta

    from django.utils import timezone

    job = services.rank_by_fad_now(objective)
    Job.objects.filter(pk=job.pk).update(
        state=Job.State.RUNNING, updated_at=timezone.now() - timedelta(hours=1)
    )
    job.refresh_from_db()
    retried = jobs.retry(job)
    assert retried.state in (Job.State.QUEUED, Job.State.SUCCEEDED)


def test_fad_defaults_to_vggish_as_dcase_ran_it_and_options_follow_the_model(db):
    challenge = create_challenge(name="Defaults", slug="defaults")
    choice = config.model_choice(challenge, RANK_BY_FAD)
    assert (choice.name, choice.options) == ("vggish", {"preset": "dcase2023"})
    config.set_models(challenge, fad_model="logmel")
    assert config.model_choice(challenge, RANK_BY_FAD).options == {}
    config.set_models(challenge, fad_model="vggish", fad_model_options={"hop_size": 0.5})
    assert config.model_choice(challenge, RANK_BY_FAD).options == {"hop_size": 0.5}


def test_a_worker_whose_job_was_taken_over_writes_no_results(objective):
    from stimuli.jobs import JobLost, claim

    services.rank_by_fad_now(objective)
    model_id = FadResult.objects.first().model_id
    FadResult.objects.all().delete()
    Medoid.objects.all().delete()
    job = claim(Job.objects.create(challenge=objective, kind=RANK_BY_FAD).pk)
    Job.objects.filter(pk=job.pk).update(attempts=2)  # another worker took it over
    with pytest.raises(JobLost):
        distances.compute_fad_results(objective, model_id=model_id, owner=job)
    with pytest.raises(JobLost):
        medoids.compute_medoids(objective, model_id=model_id, owner=job)
    assert not FadResult.objects.exists() and not Medoid.objects.exists()


def test_results_are_not_written_once_the_phase_forbids_them(objective):
    from stimuli.models import Challenge

    services.rank_by_fad_now(objective)
    model_id = FadResult.objects.first().model_id
    values = dict(FadResult.objects.values_list("pk", "value"))
    Challenge.objects.filter(pk=objective.pk).update(phase="published")  # while the job ran
    with pytest.raises(config.ObjectiveError, match="published"):
        distances.compute_fad_results(objective, model_id=model_id)
    Challenge.objects.filter(pk=objective.pk).update(phase="listening")
    with pytest.raises(config.ObjectiveError, match="medoids cannot change"):
        medoids.compute_medoids(objective, model_id=model_id)
    assert dict(FadResult.objects.values_list("pk", "value")) == values
    assert not Medoid.objects.exists()


def test_medoids_default_to_openl3_env_content(db):
    challenge = create_challenge(name="Env", slug="env")
    choice = config.model_choice(challenge, SELECT_MEDOIDS)
    assert (choice.name, choice.options) == ("openl3", {"content_type": "env"})


def test_league_models_compute_fad_beside_the_fad_model_which_alone_picks_finalists(objective):
    # The finalists of the FAD model, then a league model that would rank "Far" first.
    config.set_models(objective, league_models=[{"name": "logmel", "options": {"n_mels": 32}}])
    job = services.rank_by_fad_now(objective)
    assert job.state == Job.State.SUCCEEDED, job.error
    models = set(FadResult.objects.filter(challenge=objective).values_list("model_id", flat=True))
    assert len(models) == 2 and job.params["model_id"] in models
    assert selectors.designated_fad_model(objective) == job.params["model_id"]
    league = Job.objects.filter(challenge=objective, kind=RANK_BY_FAD).exclude(pk=job.pk).get()
    assert league.params["league"] is True and league.state == Job.State.SUCCEEDED
    assert league.result["finalists"] == {}
    finalists = set(objective.systems.filter(is_finalist=True).values_list("name", flat=True))
    assert finalists == {"Close", "Middle"}
    rows = selectors.fad_rows(objective, every_model=True)
    assert {r["model"] for r in rows} == models and len(rows) == 2 * 4 * 2
    # Bad entries are refused with the expected form.
    with pytest.raises(Exception, match="league_models"):
        config.set_models(objective, league_models=[{"model": "logmel"}])


def test_fad_results_carry_intervals_fad_inf_and_worst_clips_to_the_leaderboard(objective):
    from scoring.compute import score
    from scoring.rules import Rules
    from scoring.services import collect_inputs

    config.set_models(objective, fad_bootstrap=50, fad_infinity=True)
    job = services.rank_by_fad_now(objective)
    assert job.state == Job.State.SUCCEEDED, job.error
    row = FadResult.objects.get(
        system=system(objective, "Close"), reference="evaluation", category__slug="rain"
    )
    low, high = row.details["ci95"]
    assert low <= row.value <= high and low < high
    # 12 clips of logmel frames are fewer than 2 x d embeddings: no FAD-inf, and the reason.
    assert "fad_inf" in row.details or "FAD-inf needs" in row.details["fad_inf_error"]
    worst = row.details["clip_fad"]  # every clip, the worst first
    assert len(worst) == 12 and [v for _, v in worst] == sorted((v for _, v in worst), reverse=True)
    # The leaderboard's FAD carries an interval of its mean over categories.
    inputs = collect_inputs(objective)
    assert {"fad_eval_low", "fad_eval_high"} <= set(inputs.fad[0])
    result = score(inputs, Rules(bootstrap=0))
    (close,) = [r for r in result["unrated_systems"]["A"] if r["system"] == "Close"]
    low, high = close["fad_eval_ci"]
    assert low < close["fad_eval"] < high
    # FAD-inf is enabled: its columns are in the FAD rows (empty here, the sets too small) and
    # the result says the leaderboard shows them; disabled, they are gone.
    assert {"fad_eval_inf", "fad_dev_inf"} <= set(inputs.fad[0])
    assert all(r["fad_eval_inf"] == row.details.get("fad_inf") for r in inputs.fad
               if (r["system"], r["category"]) == ("Close", "rain"))  # fmt: skip
    assert result["fad_infinity"] is True
    config.set_models(objective, fad_infinity=False)
    inputs = collect_inputs(objective)
    assert not {"fad_eval_inf", "fad_dev_inf"} & set(inputs.fad[0])
    assert score(inputs, Rules(bootstrap=0))["fad_infinity"] is False


def test_kad_beside_fad_per_system_category_and_reference_reaches_the_leaderboard(objective):
    from scoring.compute import score
    from scoring.rules import Rules
    from scoring.services import collect_inputs
    from stimuli.objective.kad import KadReference, kernel_distance

    job = services.rank_by_fad_now(objective)
    assert job.state == Job.State.SUCCEEDED, job.error
    model_id = job.params["model_id"]
    rows = FadResult.objects.filter(challenge=objective)
    assert rows.count() == 16 and all("kad" in r.details for r in rows)
    row = rows.get(system=system(objective, "Close"), reference="evaluation", category__slug="rain")
    # The stored KAD is the definition's on the stored embeddings.
    clips = distances._clips_of(model_id, distances._clip_audio(
        objective, role=Clip.Role.SYSTEM, system=row.system)[row.category_id])  # fmt: skip
    reference = distances._clips_of(model_id, distances._clip_audio(
        objective, role=Clip.Role.EVALUATION)[row.category_id])  # fmt: skip
    assert row.details["kad"] == pytest.approx(
        kernel_distance(clips, KadReference.of(reference)), rel=1e-9
    )
    low, high = row.details["kad_ci95"]
    assert 0 <= low < high
    ranking = selectors.fad_ranking(objective)
    assert ranking["A"][0]["kad_eval"] < ranking["A"][1]["kad_eval"]  # Close before Far
    inputs = collect_inputs(objective)
    assert {"kad_eval", "kad_dev", "kad_eval_low", "kad_eval_high"} <= set(inputs.fad[0])
    result = score(inputs, Rules(bootstrap=0))
    assert result["kad"] is True
    (close,) = [r for r in result["unrated_systems"]["A"] if r["system"] == "Close"]
    assert close["kad_eval"] is not None and close["kad_eval_ci"][0] >= 0


def test_kad_needs_the_reference_audio_and_says_so_for_published_statistics(objective, tmp_path):
    model = load_embedding_model("logmel")
    path = tmp_path / "rain.npz"
    np.savez(path, mu=np.zeros(128), sigma=np.eye(128), embedding_count=1000)
    reference_stats.import_reference_stats(objective, {"rain": path}, model=model.model_id)
    services.rank_by_fad_now(objective)
    rain = FadResult.objects.get(
        system=system(objective, "Close"), category__slug="rain", reference="evaluation"
    )
    assert "kad" not in rain.details and "published statistics" in rain.details["kad_error"]


def test_subsets_of_25_and_50_clips_give_the_leagues_stability_inputs():
    from stimuli.objective.fad import ReferenceFactor, frechet_distance
    from stimuli.objective.kad import KadReference, kernel_distance

    rng = np.random.default_rng(0)
    clips = [rng.normal(0.3, 1.0, size=(2, 4)) for _ in range(60)]
    reference = rng.normal(size=(300, 4))
    factor = ReferenceFactor.of(GaussianStats.from_embeddings(reference))
    kad_reference = KadReference.of(reference)
    found = distances._subset_details(clips, factor, kad_reference, seed=7)["subsets"]
    assert set(found) == {"25", "50"}  # 100 clips would be all 60: the value itself
    again = distances._subset_details(clips, factor, kad_reference, seed=7)["subsets"]
    assert found == again  # one seeded draw per system and category
    full = frechet_distance(GaussianStats.from_embeddings(clips), factor)
    assert found["25"]["fad"] != full and found["25"]["kad"] != kernel_distance(
        clips, kad_reference
    )
    # Without a KAD reference (published statistics) only FAD.
    assert set(distances._subset_details(clips, factor, "why", seed=7)["subsets"]["25"]) == {"fad"}
