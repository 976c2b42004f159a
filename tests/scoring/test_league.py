"""The embedding league: each FAD model's ranking against the listening test's, offline and
through publishing."""

from __future__ import annotations

import copy
import csv
import io
import json

import pytest
from django.core.management import call_command

from scoring import services, tables
from scoring.compute import score
from scoring.inputs import Inputs
from scoring.rules import Rules
from tests.scoring.test_compute import _csvs, _write
from tests.simulate import simulate

AGREES, REVERSES = "agrees:mel@w", "reverses:mel@w"


def league_inputs(seed: int = 8) -> Inputs:
    """A listening test and two models' FAD: one ordering systems exactly as the final score
    does (lower FAD, higher score), one exactly reversed."""
    sim = simulate(systems_per_track=5, categories=3, sounds=3, raters=6, careless=0, seed=seed)
    inputs = copy.deepcopy(sim.inputs)
    finals = {
        row["system"]: row["final"]
        for rows in score(inputs, Rules(bootstrap=0))["tracks"].values()
        for row in rows
    }
    categories = sorted({row["category"] for row in inputs.fad})
    fad = []
    for system, final in finals.items():
        track = system[0]
        for c, category in enumerate(categories):
            for model, value in ((AGREES, 60 - 5 * final + c), (REVERSES, 5 * final + c)):
                fad.append({"system": system, "track": track, "category": category,
                            "fad_dev": value * 1.1, "fad_eval": value, "model": model})  # fmt: skip
    inputs.fad = fad
    return inputs


def check_league(league: dict, tracks: list[str]) -> None:
    assert league["models"] == [AGREES, REVERSES]
    for scope in [*(league["tracks"][t] for t in tracks), league["pooled"]]:
        agrees, reverses = scope[AGREES], scope[REVERSES]
        assert agrees["spearman"] == 1.0 and agrees["kendall"] == 1.0
        assert reverses["spearman"] == -1.0 and reverses["kendall"] == -1.0
        low, high = agrees["spearman_ci"]
        assert low <= 1.0 <= high and high == 1.0
        low, high = reverses["spearman_ci"]
        assert low <= -1.0 <= high and low == -1.0
        assert agrees["loso_min"] == agrees["loso_max"] == 1.0
        for scale in ("quality", "fit", "diversity"):
            # Each scale's rho has its interval from the same draws; the reversed model's FAD
            # ranks every draw's systems exactly the other way, so its interval is the mirror.
            low, high = agrees[f"{scale}_ci"]
            assert -1.0 <= low < high <= 1.0
            assert reverses[scale] == -agrees[scale]
            assert reverses[f"{scale}_ci"] == [-high, -low]
    assert league["tracks"]["A"][AGREES]["n_systems"] == 5
    assert league["pooled"][AGREES]["n_systems"] == 10


def test_league_of_a_model_that_agrees_and_one_that_reverses():
    inputs = league_inputs()
    result = score(inputs, Rules(bootstrap=200))
    check_league(result["metric_league"], ["A", "B"])
    assert result["metric_league"]["designated"] == AGREES
    # The leaderboard shows the designated (first) model's FAD, not a mix of both.
    top = result["tracks"]["A"][0]
    assert top["fad_eval"] < result["tracks"]["A"][-1]["fad_eval"]
    reversed_board = score(Inputs(**{**inputs.__dict__, "fad_model": REVERSES}), Rules(bootstrap=0))
    assert (
        reversed_board["tracks"]["A"][0]["fad_eval"] > reversed_board["tracks"]["A"][-1]["fad_eval"]
    )


def test_score_offline_reports_the_league_from_a_model_column(tmp_path):
    inputs = league_inputs()
    paths = _csvs(tmp_path, Inputs(**{**inputs.__dict__, "fad": []}))
    columns = ("system", "track", "category", "fad_dev", "fad_eval", "model")
    paths["fad"] = _write(tmp_path / "fad_models.csv", columns, inputs.fad)
    out = io.StringIO()
    call_command("score_offline", *[f"--{k}={v}" for k, v in paths.items()], "--bootstrap=100",
                 stdout=out)  # fmt: skip
    result = json.loads(out.getvalue())
    check_league(result["metric_league"], ["A", "B"])
    for entry in result["metric_league"]["tracks"]["A"].values():
        assert {"spearman", "spearman_ci", "kendall", "n_systems"} <= set(entry)
        assert {"quality_ci", "fit_ci", "diversity_ci"} <= set(entry)
    # Naming a model the file lacks is a clear error.
    with pytest.raises(Exception, match="is not in the FAD table"):
        call_command("score_offline", *[f"--{k}={v}" for k, v in paths.items()],
                     "--fad-model=vggish:x@y", stdout=io.StringIO())  # fmt: skip
    # Without a model column there is no league.
    plain = _csvs(tmp_path, simulate(systems_per_track=2, categories=2, sounds=2, raters=4).inputs)
    out = io.StringIO()
    call_command("score_offline", *[f"--{k}={v}" for k, v in plain.items()], "--bootstrap=0",
                 stdout=out)  # fmt: skip
    assert "metric_league" not in json.loads(out.getvalue())


@pytest.mark.django_db
def test_the_league_is_published_with_its_table_and_downloads(client, challenge, organizer):
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 100
    settings.save()
    snap = services.publish(challenge, organizer, league_inputs())
    check_league(snap.result["metric_league"], ["A", "B"])
    page = client.get(f"/results/{challenge.slug}/1/").content.decode()
    assert "Embedding league" in page and AGREES in page and REVERSES in page
    section = page[page.index('id="table-metric-league"') :]
    section = section[: section.index("</section>")]
    # Every row shows five coefficients with intervals: Spearman's and Kendall's with the final
    # score, Spearman's with quality, fit and diversity.
    assert section.count('<small class="ci">') == 5 * 2 * 3
    table = tables.table(snap.result, "metric-league")
    assert len(table.rows) == 2 * 3  # two models, tracks A and B and all tracks
    got = client.get(f"/results/{challenge.slug}/1/download/metric-league.csv")
    rows = list(csv.DictReader(io.StringIO(got.content.decode())))
    assert {(r["scope"], r["model"], r["spearman"]) for r in rows} >= {
        ("A", AGREES, "1.0"),
        ("A", REVERSES, "-1.0"),
        ("all tracks", REVERSES, "-1.0"),
    }
    for row in rows:  # every coefficient with its interval
        for key in ("spearman", "kendall", "quality", "fit", "diversity"):
            assert float(row[f"{key}_low"]) <= float(row[f"{key}_high"])
    as_json = client.get(f"/results/{challenge.slug}/1/download/metric-league.json").json()
    for key in ("spearman", "quality", "fit", "diversity"):
        assert as_json["rows"][0][f"{key}_low"] is not None


def with_kad(inputs: Inputs) -> Inputs:
    """The league's inputs with KAD beside FAD: each model's KAD orders systems the other way
    from its FAD (an embedding that agrees with listeners under one distance only)."""
    out = copy.deepcopy(inputs)
    for row in out.fad:
        row["kad_eval"] = round(100 - row["fad_eval"], 6)
        row["kad_dev"] = round(100 - row["fad_dev"], 6)
    return out


@pytest.mark.django_db
def test_each_model_is_ranked_by_fad_and_by_kad_on_the_page_and_in_downloads(
    client, challenge, organizer
):
    result = score(with_kad(league_inputs()), Rules(bootstrap=100))
    league = result["metric_league"]
    check_league(league, ["A", "B"])  # FAD's entries as before
    for scope in [
        league["kad"]["tracks"]["A"],
        league["kad"]["tracks"]["B"],
        league["kad"]["pooled"],
    ]:
        assert scope[AGREES]["spearman"] == -1.0 and scope[REVERSES]["spearman"] == 1.0
    assert result["kad"] is True
    top = result["tracks"]["A"][0]
    assert top["kad_eval"] > result["tracks"]["A"][-1]["kad_eval"]
    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()
    services.publish(challenge, organizer, with_kad(league_inputs()))
    page = client.get(f"/results/{challenge.slug}/1/").content.decode()
    assert "KAD-Eval" in page
    got = client.get(f"/results/{challenge.slug}/1/download/metric-league.csv")
    rows = list(csv.DictReader(io.StringIO(got.content.decode())))
    assert len(rows) == 2 * 3 * 2  # two models, two tracks and all, FAD and KAD
    assert {(r["scope"], r["model"], r["metric"], r["spearman"]) for r in rows} >= {
        ("A", AGREES, "FAD", "1.0"),
        ("A", AGREES, "KAD", "-1.0"),
    }
    board = client.get(f"/results/{challenge.slug}/1/download/leaderboard-A.csv").content.decode()
    assert "kad_eval,kad_eval_low,kad_eval_high" in board.splitlines()[0]
    api = client.get(f"/api/results/{challenge.slug}/snapshots/1/leaderboards/A/").json()
    assert "kad_eval" in api["rows"][0]


def test_stability_kendall_tau_and_drift_on_fewer_clips_flag_a_model_that_reorders(tmp_path):
    inputs = league_inputs()
    for row in inputs.fad:
        value = row["fad_eval"]
        # AGREES keeps its order on every subset, its FAD 50 % higher on 25 clips (the bias);
        # REVERSES turns its order round on 50 clips.
        stable = row["model"] == AGREES
        row["fad_eval_25"] = value * 1.5 if stable else value
        row["fad_eval_50"] = value if stable else 100 - value
    result = score(inputs, Rules(bootstrap=0))
    for scope in (result["metric_league"]["tracks"]["A"], result["metric_league"]["pooled"]):
        agrees, reverses = scope[AGREES], scope[REVERSES]
        assert agrees["tau_25"] == agrees["tau_50"] == 1.0
        assert agrees["tau_100"] is None  # no system has more than 100 clips
        assert agrees["drift_25"] == pytest.approx(0.5) and agrees["drift_50"] == 0.0
        assert agrees["unstable"] is False
        assert reverses["tau_50"] == -1.0 and reverses["unstable"] is True
    table = tables.table(result, "league-stability")
    assert {"tau_50", "drift_25", "unstable"} <= set(table.flat_columns)
    flags = {(r["scope"], r["model"]): r["unstable"] for r in table.rows}
    assert flags[("A", REVERSES)] == "reorders" and flags[("A", AGREES)] == ""
    # score_offline reports it from the same columns.
    paths = _csvs(tmp_path, Inputs(**{**inputs.__dict__, "fad": []}))
    columns = ("system", "track", "category", "fad_dev", "fad_eval", "model",
               "fad_eval_25", "fad_eval_50")  # fmt: skip
    paths["fad"] = _write(tmp_path / "fad_models.csv", columns, inputs.fad)
    out = io.StringIO()
    call_command("score_offline", *[f"--{k}={v}" for k, v in paths.items()], "--bootstrap=0",
                 stdout=out)  # fmt: skip
    offline = json.loads(out.getvalue())["metric_league"]["pooled"]
    assert offline[REVERSES]["unstable"] is True and offline[AGREES]["tau_50"] == 1.0
