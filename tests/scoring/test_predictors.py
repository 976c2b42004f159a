"""The learned predictors beside FAD and KAD: each system's mean of every predictor axis on the
leaderboards and in the downloads, and each axis ranked in the metric league with its direction
(a higher predictor value is the better end), only where the challenge has predictor values."""

from __future__ import annotations

import copy
import csv
import hashlib
import io
import json

import numpy as np
import pytest
from django.core.management import call_command

from scoring import services, tables
from scoring.compute import score
from scoring.inputs import Inputs
from scoring.models import Snapshot
from scoring.rules import Rules
from stimuli.models import AudioFile, Clip, PredictorScore
from stimuli.services import create_challenge, create_system, create_team
from tests.scoring.test_compute import _csvs, _write
from tests.scoring.test_league import AGREES, league_inputs

AXES = ("PQ", "PC", "CE", "CU", "PAM")
CLIPS = 4  # per system and category


def finals(inputs: Inputs) -> dict[str, float]:
    return {
        row["system"]: row["final"]
        for rows in score(inputs, Rules(bootstrap=0))["tracks"].values()
        for row in rows
    }


def clip_values(final: float, category: int, axis: str) -> list[float]:
    """A clip's values: PQ rises with the final score (agrees with the listeners), PAM falls
    with it (reverses them); the others are the same for every system but for the clips."""
    spread = [-0.3, -0.1, 0.1, 0.3]
    if axis == "PQ":
        centre = 2 + 0.8 * final + 0.1 * category
    elif axis == "PAM":
        centre = 0.95 - 0.08 * final
    else:
        centre = 5.0 + 0.1 * category
    scale = 0.1 if axis == "PAM" else 1.0
    return [centre + scale * s for s in spread]


def predictor_rows(inputs: Inputs) -> list[dict]:
    """The summary's rows as the scoring reads them, without a database."""
    rows = []
    for system, final in finals(inputs).items():
        for c, category in enumerate(sorted({r["category"] for r in inputs.fad})):
            for axis in AXES:
                values = clip_values(final, c, axis)
                mean, half = float(np.mean(values)), 0.2
                rows.append({"system": system, "track": system[0], "category": category,
                             "predictor": "pam" if axis == "PAM" else "aesthetics",
                             "axis": axis, "clips": len(values), "mean": mean,
                             "low": mean - half, "high": mean + half,
                             "mean_50": mean + (0.05 if axis == "PQ" else 0.0)})  # fmt: skip
    return rows


def in_range(pair) -> bool:
    return pair is not None and -1.0 <= pair[0] <= pair[1] <= 1.0


def test_each_axis_is_ranked_in_the_league_with_the_higher_value_the_better_end():
    inputs = league_inputs()
    inputs.predictors = predictor_rows(inputs)
    result = score(inputs, Rules(bootstrap=100))
    assert [a["axis"] for a in result["predictors"]] == list(AXES)
    league = result["metric_league"]
    assert [a["label"] for a in league["predictors"]["axes"]][:2] == [
        "Aesthetics PQ",
        "Aesthetics PC",
    ]
    for scope in (league["predictors"]["tracks"]["A"], league["predictors"]["pooled"]):
        # PQ rises with the final score: +1, as FAD falling with it is.
        assert scope["PQ"]["spearman"] == 1.0 and scope["PQ"]["kendall"] == 1.0
        assert scope["PAM"]["spearman"] == -1.0 and scope["PAM"]["kendall"] == -1.0
        assert scope["PC"]["spearman"] is None  # the same for every system: no ranking
        for axis in ("PQ", "PAM"):
            for key in ("spearman_ci", "kendall_ci", "quality_ci", "fit_ci"):
                assert in_range(scope[axis][key]), (axis, key)
        # Stability on 50 clips, as the distances': the same order, the value 0.05 higher.
        assert scope["PQ"]["tau_50"] == 1.0 and scope["PQ"]["unstable"] is False
        assert scope["PQ"]["drift_50"] > 0
    # The embedding models' Kendall's tau has its interval too.
    assert in_range(league["tracks"]["A"][AGREES]["kendall_ci"])
    # The listeners agreed most with the FAD of the model that agrees and with PQ (tied at 1).
    assert {(b["model"], b["metric"]) for b in league["best"]["A"]} == {
        (AGREES, "FAD"),
        ("Audiobox Aesthetics", "PQ"),
    }
    # On the leaderboard: each axis's mean over categories with its interval, and per category.
    top = result["tracks"]["A"][0]
    assert top["pq"] > result["tracks"]["A"][-1]["pq"]
    low, high = top["pq_ci"]
    assert low < top["pq"] < high
    # Three categories, each's interval ±0.2, added in quadrature: ±0.2 √3 / 3.
    assert high - top["pq"] == pytest.approx(0.2 * np.sqrt(3) / 3, abs=1e-5)
    cell = top["categories"]["cat0"]
    assert cell["pam"] == pytest.approx(np.mean(clip_values(top["final"], 0, "PAM")), abs=1e-6)
    assert cell["pam_ci"] == [pytest.approx(cell["pam"] - 0.2), pytest.approx(cell["pam"] + 0.2)]
    # In a table of their own beside the leaderboard, over all categories and per category.
    board = tables.table(result, "predictors-A")
    assert {"pq", "pq_low", "pq_high", "pam", "pam_high"} <= set(board.flat_columns)
    assert len(board.rows) == len(result["tracks"]["A"]) * (1 + 3)
    assert "pq" not in tables.table(result, "leaderboard-A").flat_columns
    league_table = tables.table(result, "metric-league")
    assert {(r["scope"], r["metric"]) for r in league_table.rows} >= {("A", "PQ"), ("B", "PAM")}
    assert "agreed most with" in league_table.note and "Audiobox Aesthetics PQ" in league_table.note
    stability = tables.table(result, "league-stability")
    assert {r["metric"] for r in stability.rows} == set(AXES)  # the FAD rows carry no draws


def test_values_of_untrained_stand_ins_say_so_in_every_table_of_them():
    inputs = league_inputs()
    inputs.predictors = predictor_rows(inputs)
    for row in inputs.predictors:
        row["model_id"] = "pam@1a2b (untrained stand-in)" if row["axis"] == "PAM" else "a@3c4d"
    result = score(inputs, Rules(bootstrap=0))
    pam, pq = result["predictors"][-1], result["predictors"][0]
    assert pam["name"] == "PAM (untrained stand-in)" and pam["untrained"] is True
    assert pq["name"] == "Audiobox Aesthetics" and "untrained" not in pq
    note = tables.table(result, "predictors-A").note
    assert note.startswith("PAM ran on untrained stand-ins") and "Aesthetics" not in note
    league = tables.table(result, "metric-league")
    assert "PAM ran on untrained stand-ins" in league.note
    models = {(r["model"], r["metric"]) for r in league.rows}
    assert ("PAM (untrained stand-in)", "PAM") in models and ("Audiobox Aesthetics", "PQ") in models
    # A predictor of one axis of its name is named once where the listeners agreed with it.
    best = {"A": [{"model": pam["name"], "metric": "PAM", "spearman": 0.5}]}
    assert tables.best_note({"best": best}) == (
        "The listeners agreed most with track A: PAM (untrained stand-in) (rho 0.5)."
    )
    # Trained files say nothing of the kind.
    for row in inputs.predictors:
        row["model_id"] = "pam@1a2b"
    result = score(inputs, Rules(bootstrap=0))
    assert tables.table(result, "predictors-A").note == ""
    assert "stand-in" not in json.dumps(result)


def test_score_offline_reads_the_predictors_file(tmp_path):
    inputs = league_inputs()
    rows = predictor_rows(inputs)
    paths = _csvs(tmp_path, Inputs(**{**inputs.__dict__, "fad": []}))
    paths["fad"] = _write(tmp_path / "fad.csv",
                          ("system", "track", "category", "fad_dev", "fad_eval", "model"),
                          inputs.fad)  # fmt: skip
    paths["predictors"] = _write(tmp_path / "predictors.csv", list(rows[0]), rows)
    out = io.StringIO()
    call_command("score_offline", *[f"--{k}={v}" for k, v in paths.items()], "--bootstrap=0",
                 stdout=out)  # fmt: skip
    result = json.loads(out.getvalue())
    assert result["metric_league"]["predictors"]["pooled"]["PQ"]["spearman"] == 1.0
    assert "predictors" in result["inputs"]
    assert result["tracks"]["A"][0]["pq"] is not None


# --- published ----------------------------------------------------------------------------------


def _audio(challenge, n: int) -> AudioFile:
    sha = hashlib.sha256(f"{challenge.slug}-{n}".encode()).hexdigest()
    return AudioFile.objects.create(
        sha256=sha, file=f"audio/{sha}.wav", size_bytes=1, sample_rate=16000, channels=1,
        bit_depth=16, frames=16000, duration_s=1.0,
    )  # fmt: skip


def challenge_with_predictor_scores(inputs: Inputs):
    """The simulation's systems and categories in the database, each system's clips with
    PredictorScore rows written directly (as the objective stage's `predictors` job stores
    them)."""
    categories = sorted({r["category"] for r in inputs.fad})
    found = create_challenge(
        name="Predicted", slug="predicted", categories=[(c, c.title()) for c in categories]
    )
    team = create_team(found, name="Makers")
    scores, n = [], 0
    for system_name, final in finals(inputs).items():
        system = create_system(
            team=team, track=found.tracks.get(code=system_name[0]), name=system_name
        )
        for c, category in enumerate(found.categories.order_by("slug")):
            clips = []
            for _ in range(CLIPS):
                n += 1
                clips.append(Clip.objects.create(challenge=found, category=category,
                                                 role=Clip.Role.SYSTEM, system=system,
                                                 audio=_audio(found, n)))  # fmt: skip
            for axis in AXES:
                predictor = "pam" if axis == "PAM" else "aesthetics"
                for clip, value in zip(clips, clip_values(final, c, axis), strict=True):
                    scores.append(PredictorScore(clip=clip, predictor=predictor, axis=axis,
                                                 value=value, model_id=f"{predictor}@test"))  # fmt: skip
    PredictorScore.objects.bulk_create(scores)
    return found


@pytest.fixture
def fast(challenge):
    def settings_of(found):
        settings = services.scoring_settings(found)
        settings.bootstrap_samples = 50
        settings.save()

    settings_of(challenge)
    return settings_of


@pytest.mark.django_db
def test_a_published_challenge_shows_the_predictors_on_its_pages_and_downloads(
    client, organizer, fast
):
    inputs = copy.deepcopy(league_inputs())
    found = challenge_with_predictor_scores(inputs)
    fast(found)
    # What publishing reads: the objective stage's summary, through the scoring's inputs.
    inputs.predictors = services.collect_inputs(found).predictors
    assert len(inputs.predictors) == 10 * 3 * len(AXES)
    assert {r["clips"] for r in inputs.predictors} == {CLIPS}
    snap = services.publish(found, organizer, inputs)
    assert "predictors" in snap.input_hashes
    page = client.get(f"/results/{found.slug}/1/track/A/").content.decode()
    for table, labels in (
        ("predictors-A", ("Aesthetics PQ", "Aesthetics CU", "PAM")),
        ("leaderboard-A", ("FAD-Eval",)),
    ):
        section = page[page.index(f'id="table-{table}"') :]
        section = section[: section.index("</section>")]
        for label in labels:
            assert f'<th scope="col" class="num">{label}</th>' in section, (table, label)
    top = snap.result["tracks"]["A"][0]
    assert f"{top['pq']:.2f}" in page
    for name in ("predictors-A",):
        got = client.get(f"/results/{found.slug}/1/download/{name}.csv").content.decode()
        header, first = list(csv.reader(io.StringIO(got)))[:2]
        assert {"pq", "pq_low", "pq_high", "pam", "pam_low", "pam_high"} <= set(header)
        assert float(first[header.index("pq_low")]) < float(first[header.index("pq_high")])
        rows = client.get(f"/results/{found.slug}/1/download/{name}.json").json()["rows"]
        assert rows[0]["pq"] is not None and rows[0]["pam_high"] is not None
    # The league: a row per axis and scope, every coefficient in [-1, 1].
    got = client.get(f"/results/{found.slug}/1/download/metric-league.csv").content.decode()
    league = [r for r in csv.DictReader(io.StringIO(got)) if r["metric"] in AXES]
    assert {(r["scope"], r["metric"]) for r in league} == {
        (scope, axis) for scope in ("A", "B", "all tracks") for axis in AXES
    }
    for row in league:
        for key in ("spearman", "kendall"):
            if row[key]:
                assert -1 <= float(row[key]) <= 1
                assert -1 <= float(row[f"{key}_low"]) <= float(row[f"{key}_high"]) <= 1
    pq = next(r for r in league if r["scope"] == "A" and r["metric"] == "PQ")
    assert pq["spearman"] == "1.0" and pq["best"] == "most"
    results = client.get(f"/results/{found.slug}/1/").content.decode()
    assert "The listeners agreed most with track A:" in results
    assert "or higher predictor value" in results
    api = client.get(f"/api/results/{found.slug}/snapshots/1/leaderboards/A/").json()
    assert "pq" in api["rows"][0]


@pytest.mark.django_db
def test_without_predictor_values_there_is_no_predictor_column(client, challenge, organizer, fast):
    assert services.collect_inputs(challenge).predictors == []
    snap = services.publish(challenge, organizer, league_inputs())
    assert "predictors" not in snap.result and "predictors" not in snap.input_hashes
    assert "predictors" not in snap.result["metric_league"]
    page = client.get(f"/results/{challenge.slug}/1/track/A/").content.decode()
    assert "Aesthetics PQ" not in page and ">PAM<" not in page
    got = client.get(f"/results/{challenge.slug}/1/download/leaderboard-A.csv").content.decode()
    assert not {"pq", "pam"} & set(got.splitlines()[0].split(","))
    results = client.get(f"/results/{challenge.slug}/1/").content.decode()
    assert "predictor" not in results.lower().replace("predictors", "")


@pytest.mark.django_db
def test_a_snapshot_published_before_the_predictors_still_renders(
    client, challenge, organizer, fast
):
    inputs = league_inputs()
    inputs.predictors = predictor_rows(inputs)
    snap = services.publish(challenge, organizer, inputs)
    old = copy.deepcopy(snap.result)
    # As published before: no predictors, no Kendall interval, no best metric.
    old.pop("predictors")
    for key in ("predictors", "best"):
        old["metric_league"].pop(key)
    for scope in [*old["metric_league"]["tracks"].values(), old["metric_league"]["pooled"]]:
        for entry in scope.values():
            entry.pop("kendall_ci")
    for rows in old["tracks"].values():
        for row in rows:
            for axis in AXES:
                row.pop(axis.lower())
    Snapshot.objects.filter(pk=snap.pk).update(result=old)  # a snapshot is frozen otherwise
    for url in ("", "track/A/", "download/metric-league.csv", "download/leaderboard-A.csv"):
        assert client.get(f"/results/{challenge.slug}/1/{url}").status_code == 200, url
    page = client.get(f"/results/{challenge.slug}/1/").content.decode()
    assert "agreed most" not in page and "Embedding model" in page
    board = tables.table(old, "leaderboard-A")
    assert "pq" not in board.flat_columns
