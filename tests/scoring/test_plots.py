"""Result plots from matplotlib: labels on the canvas, integer ranks, log axes where needed."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from scoring import plots
from scoring.compute import score
from scoring.rules import Rules
from tests.simulate import simulate


def rows_with(names, fads):
    return [
        {"system": name, "rank": i + 1, "fad_dev": fad * 0.9, "fad_eval": fad,
         "fad_dev_min": fad * 0.5, "fad_dev_max": fad * 1.2, "fad_eval_min": fad * 0.6,
         "fad_eval_max": fad * 1.3, "quality": 6.0 - i, "quality_ci": [5.0 - i, 7.0 - i],
         "fit": 5.5, "fit_ci": None, "diversity": 4.0, "diversity_ci": [2.0, 9.0],
         "final": 5.0 - i / 2, "final_ci": [4.0 - i / 2, 6.0 - i / 2]}
        for i, (name, fad) in enumerate(zip(names, fads, strict=True))
    ]  # fmt: skip


LONG = ["A system with a very long name that reaches far to the right", "<script>x</script>",
        "Third"]  # fmt: skip


def edges_are_blank(png: bytes) -> bool:
    image = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    border = np.concatenate([image[:2].ravel(), image[-2:].ravel(), image[:, :2].ravel(),
                             image[:, -2:].ravel()])  # fmt: skip
    return bool((border > 250).all())


@pytest.mark.parametrize("kind", list(plots.TRACK_PLOTS))
def test_labels_never_leave_the_canvas_and_text_is_escaped(kind):
    pyplot = plots._pyplot()
    fig = plots.TRACK_PLOTS[kind](pyplot, rows_with(LONG, [62.0, 400.0, 2538.0]), "A&B")
    svg, png = plots._save(pyplot, fig)
    assert edges_are_blank(png)  # nothing drawn reaches the edge, so nothing is cut off
    assert "<script>" not in svg
    assert svg.lstrip().startswith("<?xml") and "</svg>" in svg


def test_rank_axis_has_integer_ticks_and_a_wide_fad_range_is_logarithmic():
    pyplot = plots._pyplot()
    rows = rows_with(["a", "b", "c", "d", "e"], [62.0, 100.0, 300.0, 900.0, 2538.0])
    fig = plots.fad_vs_rank(pyplot, rows, "A")
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [1, 2, 3, 4, 5]
    assert ax.get_yscale() == "log"
    fig2 = plots.fad_dev_vs_eval(pyplot, rows, "A")
    assert fig2.axes[0].get_xscale() == "log" and fig2.axes[0].get_yscale() == "log"
    narrow = plots.fad_dev_vs_eval(pyplot, rows_with(["a", "b"], [10.0, 14.0]), "A")
    assert narrow.axes[0].get_xscale() == "linear"
    for figure in (fig, fig2, narrow):
        pyplot.close(figure)


def test_every_plot_of_a_result_is_rendered_as_svg_and_png():
    sim = simulate(systems_per_track=2, categories=2, sounds=2, raters=4, seed=1)
    result = score(sim.inputs, Rules(bootstrap=20))
    drawn = plots.render(result)
    assert {(t, k) for t, k, *_ in drawn.plots} == {
        (t, k) for t in ("A", "B") for k in ("fad-dev-eval", "fad-rank", "scores")
    }
    assert drawn.missing == []
    for _, _, svg, png in drawn.plots:
        assert "</svg>" in svg and png.startswith(b"\x89PNG")


# Names a team may give its system that matplotlib would read as TeX, or leave out of a legend.
TEX_LIKE = ["$\\undefinedmacro{x}$", "$x^{$", "_hidden", "50$ and $100"]


@pytest.mark.parametrize("kind", list(plots.TRACK_PLOTS))
def test_names_are_drawn_as_plain_text(kind):
    pyplot = plots._pyplot()
    fig = plots.TRACK_PLOTS[kind](pyplot, rows_with(TEX_LIKE, [62.0, 70.0, 80.0, 90.0]), "A")
    svg, png = plots._save(pyplot, fig)  # mathtext would raise here, at drawing
    assert png.startswith(b"\x89PNG") and "</svg>" in svg
    from matplotlib.text import Text

    # What each text shows, and whether matplotlib reads it as TeX.
    shown = [t._preprocess_math(t.get_text()) for t in fig.findobj(Text)]
    if kind != "fad-rank":  # the one plot that names no system
        assert {(name, False) for name in TEX_LIKE} <= set(shown), shown
    assert not [text for text, tex in shown if tex and "mathdefault" not in text]  # axes' own only


@pytest.fixture
def published(challenge, organizer):
    """publish(names=...): the simulated challenge's systems renamed, scored and published."""
    from scoring import services

    settings = services.scoring_settings(challenge)
    settings.bootstrap_samples = 50
    settings.save()

    def publish(names: list[str]):
        sim = simulate(systems_per_track=2, categories=2, sounds=3, raters=6, seed=5).inputs
        systems = sorted({row["system"] for row in sim.teams})
        renamed = dict(zip(systems, names, strict=False))
        for rows in (sim.ratings, sim.diversity, sim.fad, sim.teams):
            for row in rows:
                row["system"] = renamed.get(row["system"], row["system"])
        return services.publish(challenge, organizer, sim)

    return publish


@pytest.mark.django_db
def test_a_tex_like_system_name_is_published_with_its_plots(published, client):
    snap = published(TEX_LIKE)
    assert snap.plots_missing == []
    assert {(p.track, p.kind) for p in snap.plots.all()} == {
        (t, k) for t in ("A", "B") for k in plots.TRACK_PLOTS
    }
    page = client.get(f"/results/{snap.challenge.slug}/{snap.number}/track/A/")
    assert page.status_code == 200
    assert "could not be drawn" not in page.content.decode()
    assert page.content.decode().count("<svg") == len(plots.TRACK_PLOTS)


@pytest.mark.django_db
def test_a_plot_that_cannot_be_drawn_never_stops_a_publication(
    published, client, monkeypatch, caplog
):
    def broken(pyplot, rows, track):
        fig = pyplot.figure()
        if track == "B":
            raise RuntimeError("drawing failed")
        return fig

    monkeypatch.setitem(plots.TRACK_PLOTS, "scores", broken)
    snap = published(["Alpha", "Beta"])
    # Published, with every other plot, and the one left out named.
    assert snap.plots_missing == [
        {"track": "B", "kind": "scores", "title": "Listening-test scores by rank"}
    ]
    kept = {(p.track, p.kind) for p in snap.plots.all()}
    assert ("A", "scores") in kept and ("B", "scores") not in kept and len(kept) == 5
    assert "The scores plot of track B could not be drawn" in caplog.text
    assert "RuntimeError: drawing failed" in caplog.text  # the traceback, for the organizers
    slug = snap.challenge.slug
    track_b = client.get(f"/results/{slug}/{snap.number}/track/B/").content.decode()
    assert "“Listening-test scores by rank” (track B) could not be drawn" in track_b
    track_a = client.get(f"/results/{slug}/{snap.number}/track/A/").content.decode()
    assert "could not be drawn" not in track_a
    page = client.get(f"/results/{slug}/{snap.number}/").content.decode()
    assert "Published without 1 plot that could not be drawn" in page
    assert client.get(f"/results/{slug}/{snap.number}/track/B/scores.svg").status_code == 404
    import matplotlib.pyplot

    assert matplotlib.pyplot.get_fignums() == []  # the failed plot's figure was closed


def test_the_win_probabilities_of_a_b_votes_are_drawn_per_track_with_names_as_text():
    matrix = {
        "systems": [*TEX_LIKE, LONG[0]],
        "matrix": [[None if i == j else 0.1 + 0.15 * j for j in range(5)] for i in range(5)],
    }
    result = {"tracks": {}, "pairwise": {"tracks": {"A": {"win_probability": matrix}}}}
    drawn = plots.render(result)
    assert [(t, k) for t, k, *_ in drawn.plots] == [("A", "win-probability")]
    (_, _, svg, png) = drawn.plots[0]
    assert edges_are_blank(png) and "</svg>" in svg
    pyplot = plots._pyplot()
    fig = plots.win_probability(pyplot, matrix, "A")
    from matplotlib.text import Text

    shown = {t.get_text() for t in fig.findobj(Text)}
    assert set(TEX_LIKE) | {"0.25", "0.70"} <= {t.replace("\\$", "$") for t in shown}
    pyplot.close(fig)
