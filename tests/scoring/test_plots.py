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
    assert {(t, k) for t, k, *_ in drawn} == {
        (t, k) for t in ("A", "B") for k in ("fad-dev-eval", "fad-rank", "scores")
    }
    for _, _, svg, png in drawn:
        assert "</svg>" in svg and png.startswith(b"\x89PNG")
