"""Result plots, drawn with matplotlib once at publish time and frozen with the snapshot.

Runs where results are published (a worker, or the process running the demo); the web process
only serves the stored SVG and PNG. Every plot is saved with a tight bounding box, so axis labels,
system names and the legend (placed beside the axes, never over the points) always lie on the
canvas.

System names are the teams' own text and are drawn as plain text (`plain`): matplotlib reads a
`$...$` span as TeX, so a name like `$\\undefinedmacro{x}$` would stop the drawing; its dollars
are escaped and it is shown as typed. Legends are given their labels explicitly, so a name
starting with `_` is not hidden. A plot
that still cannot be drawn is left out and named (`Drawn.missing`): the results are published
without it, never not at all.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from .tables import votes_only

logger = logging.getLogger(__name__)

# A FAD axis turns logarithmic when its largest value is this many times its smallest.
LOG_RANGE = 20.0
SCALES = (("quality", "Quality"), ("fit", "Fit"), ("diversity", "Diversity"), ("final", "Final"))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    pyplot.rcParams.update(
        {
            "svg.hashsalt": "foley",  # identical SVG for identical results
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    )
    return pyplot


def plain(text: object) -> str:
    """`text` as matplotlib draws it literally: every `$` escaped, so no span is read as TeX
    (mathtext stays on for the axes' own labels, such as a log axis's 10^2)."""
    return str(text).replace("$", r"\$")


def _finite(*values) -> bool:
    return all(v is not None and math.isfinite(float(v)) for v in values)


def _log_if_wide(axis_setter: Callable[[str], None], values: Sequence[float]) -> bool:
    positive = [v for v in values if v is not None and v > 0]
    if positive and max(positive) / min(positive) >= LOG_RANGE:
        axis_setter("log")
        return True
    return False


def fad_dev_vs_eval(pyplot, rows: Sequence[Mapping], track: str):
    fig, ax = pyplot.subplots(figsize=(6, 4.5), layout="constrained")
    shown = [r for r in rows if _finite(r.get("fad_dev"), r.get("fad_eval"))]
    values = [v for r in shown for v in (r["fad_dev"], r["fad_eval"])]
    _log_if_wide(ax.set_xscale, values)
    _log_if_wide(ax.set_yscale, values)
    handles, labels = [], []
    for r in shown:
        xerr = _spread(r, "fad_dev")
        yerr = _spread(r, "fad_eval")
        handles.append(ax.errorbar(r["fad_dev"], r["fad_eval"], xerr=xerr, yerr=yerr, fmt="o",
                                   capsize=3))  # fmt: skip
        labels.append(plain(r["system"]))
    if values:
        low, high = min(values), max(values)
        handles += ax.plot([low, high], [low, high], color="0.6", linestyle="--", linewidth=1)
        labels.append("FAD-Dev = FAD-Eval")
    ax.set_xlabel("FAD-Dev (mean over categories; bars: min to max)")
    ax.set_ylabel("FAD-Eval (mean over categories; bars: min to max)")
    ax.set_title(plain(f"Track {track}: FAD against the development and evaluation sets"))
    if handles:
        # Labels given, not read from the artists: matplotlib leaves out a label starting with
        # "_", and a team may name its system so.
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0,
                  frameon=False)  # fmt: skip
    return fig


def fad_vs_rank(pyplot, rows: Sequence[Mapping], track: str):
    from matplotlib.ticker import MaxNLocator

    fig, ax = pyplot.subplots(figsize=(6, 4.5), layout="constrained")
    values = []
    for name, marker, label in (("fad_eval", "o", "FAD-Eval"), ("fad_dev", "s", "FAD-Dev")):
        pts = [(r["rank"], r[name], _spread(r, name)) for r in rows if _finite(r.get(name))]
        if not pts:
            continue
        values += [p[1] for p in pts]
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], fmt=marker, capsize=3, label=label,
                    yerr=_stack_err([p[2] for p in pts], [p[1] for p in pts]))  # fmt: skip
    _log_if_wide(ax.set_yscale, values)
    ranks = [r["rank"] for r in rows]
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if ranks:
        ax.set_xlim(min(ranks) - 0.5, max(ranks) + 0.5)
        ax.set_xticks(sorted(set(ranks)))
    ax.set_xlabel("Final rank (listening test)")
    ax.set_ylabel("FAD (mean over categories; bars: min to max)")
    ax.set_title(plain(f"Track {track}: FAD against the listening test's ranking"))
    if values:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, frameon=False)
    return fig


def scores(pyplot, rows: Sequence[Mapping], track: str):
    fig, ax = pyplot.subplots(figsize=(7, 1.2 + 0.45 * max(len(rows), 1)), layout="constrained")
    names = [plain(r["system"]) for r in rows]
    offsets = {"quality": -0.27, "fit": -0.09, "diversity": 0.09, "final": 0.27}
    for key, label in SCALES:
        ys, xs, errs = [], [], [[], []]
        for i, r in enumerate(rows):
            if not _finite(r.get(key)):
                continue
            ys.append(i + offsets[key])
            xs.append(r[key])
            ci = r.get(f"{key}_ci")
            errs[0].append(r[key] - ci[0] if ci else 0.0)
            errs[1].append(ci[1] - r[key] if ci else 0.0)
        ax.errorbar(xs, ys, xerr=errs, fmt="D" if key == "final" else "o", capsize=2,
                    label=label, markersize=5 if key == "final" else 4)  # fmt: skip
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()  # rank 1 on top
    ax.set_xlim(0, 10)
    ax.set_xlabel("Rating (0-10) with its 95% interval")
    ax.set_title(plain(f"Track {track}: listening-test scores by rank"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0, frameon=False)
    return fig


def league(pyplot, entries: Mapping[str, Mapping], scope: str, predictors: bool = False):
    fig, ax = pyplot.subplots(figsize=(7, 1.2 + 0.5 * max(len(entries), 1)), layout="constrained")
    models = list(entries)
    for i, model in enumerate(models):
        entry = entries[model]
        if entry.get("spearman") is None:
            continue
        ci = entry.get("spearman_ci") or [entry["spearman"]] * 2
        ax.errorbar(entry["spearman"], i, xerr=[[entry["spearman"] - ci[0]], [ci[1] - entry["spearman"]]],
                    fmt="o", capsize=3, color="C0")  # fmt: skip
    ax.axvline(0, color="0.6", linewidth=1)
    ax.set_yticks(range(len(models)), [plain(m) for m in models])
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    better = "lower FAD or higher predictor value" if predictors else "lower FAD"
    ax.set_xlabel(f"Spearman's rho with the final score (+1: {better}, better score), 95% interval")
    ax.set_title(plain(f"Embedding league, {scope}"))
    return fig


def win_probability(pyplot, matrix: Mapping, track: str):
    """The A/B votes' win-probability matrix of a track as a heat map, each cell its value."""
    names = [plain(n) for n in matrix["systems"]]
    values = [[float("nan") if p is None else p for p in line] for line in matrix["matrix"]]
    size = 1.6 + 0.55 * max(len(names), 1)
    fig, ax = pyplot.subplots(figsize=(size + 1.2, size), layout="constrained")
    image = ax.imshow(values, cmap="RdBu", vmin=0, vmax=1)
    for i, line in enumerate(values):
        for j, p in enumerate(line):
            if _finite(p):
                ax.text(j, i, f"{p:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if abs(p - 0.5) > 0.3 else "black")  # fmt: skip
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("against")
    ax.set_ylabel("system (ranked)")
    fig.colorbar(image, ax=ax, label="probability of winning (a tie's share aside)")
    ax.set_title(plain(f"Track {track}: A/B votes, win probabilities"))
    return fig


def _spread(row: Mapping, name: str):
    low, high, value = row.get(f"{name}_min"), row.get(f"{name}_max"), row.get(name)
    if not _finite(low, high, value):
        return None
    return [[max(value - low, 0.0)], [max(high - value, 0.0)]]


def _stack_err(errors, values):
    if any(e is None for e in errors):
        return None
    return [[e[0][0] for e in errors], [e[1][0] for e in errors]]


def _save(pyplot, fig) -> tuple[str, bytes]:
    svg, png = io.BytesIO(), io.BytesIO()
    fig.savefig(svg, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.savefig(png, format="png", bbox_inches="tight", dpi=150)
    pyplot.close(fig)
    return svg.getvalue().decode(), png.getvalue()


TRACK_PLOTS = {"fad-dev-eval": fad_dev_vs_eval, "fad-rank": fad_vs_rank, "scores": scores}
# What each plot shows, for a page that says which one could not be drawn.
TITLES = {
    "fad-dev-eval": "FAD against the development and evaluation sets",
    "fad-rank": "FAD against the listening test's ranking",
    "scores": "Listening-test scores by rank",
    "league": "Embedding league",
    "win-probability": "A/B votes' win probabilities",
}


# Written across the top of every plot of an interim snapshot: a plot travels without its page.
INTERIM = "Interim: the listening test was still open, so these numbers will change"


@dataclass
class Drawn:
    """The plots of a result: (track or "all", kind, SVG text, PNG bytes) each, and those that
    could not be drawn, as {"track", "kind", "title"} (the traceback is logged)."""

    plots: list[tuple[str, str, str, bytes]] = field(default_factory=list)
    missing: list[dict[str, str]] = field(default_factory=list)


def _planned(result: Mapping) -> list[tuple[str, str, Callable]]:
    """Every plot of a result: (track or "all", kind, draw(pyplot) -> figure)."""
    # The pairs design alone has none of the sliders' plots to draw; a track not rated yet still
    # has its plots, empty, as an interim snapshot shows.
    tracks = {} if votes_only(result) else result["tracks"]
    planned = [
        (track, kind, partial(draw, rows=rows, track=track))
        for track, rows in tracks.items()
        for kind, draw in TRACK_PLOTS.items()
    ]
    if table := result.get("metric_league"):
        axes = (table.get("predictors") or {}).get("axes", [])

        def entries(scope: str) -> dict:
            """Each model's FAD entry, then each predictor axis's, by its label."""
            of = (lambda t: t["pooled"]) if scope == "all" else (lambda t: t["tracks"][scope])
            return {**of(table), **{a["label"]: of(table["predictors"])[a["axis"]] for a in axes}}

        plot = partial(league, predictors=bool(axes))
        for track in table["tracks"]:
            planned.append(
                (track, "league", partial(plot, entries=entries(track), scope=f"track {track}"))
            )
        planned.append(("all", "league", partial(plot, entries=entries("all"), scope="all tracks")))
    for track, entry in ((result.get("pairwise") or {}).get("tracks") or {}).items():
        if entry["win_probability"]["systems"]:
            matrix = entry["win_probability"]
            planned.append(
                (track, "win-probability", partial(win_probability, matrix=matrix, track=track))
            )
    return planned


def render(result: Mapping, *, final: bool = True) -> Drawn:
    """Every plot of a result that can be drawn, and the others named."""
    planned = _planned(result)
    drawn = Drawn()

    def missing(track: str, kind: str) -> None:
        drawn.missing.append({"track": track, "kind": kind, "title": TITLES[kind]})

    try:
        pyplot = _pyplot()
    except Exception:  # matplotlib missing or broken on this worker: publish without plots
        logger.exception("No plot could be drawn: matplotlib did not start")
        for track, kind, _ in planned:
            missing(track, kind)
        return drawn
    for track, kind, draw in planned:
        try:
            fig = draw(pyplot)
            if not final:
                fig.suptitle(INTERIM, color="#9a5b00", fontweight="bold")
            drawn.plots.append((track, kind, *_save(pyplot, fig)))
        except Exception:  # a plot is an illustration of the tables: it never stops a publication
            logger.exception("The %s plot of track %s could not be drawn", kind, track)
            pyplot.close("all")  # each plot is closed once saved: only the failed one is open
            missing(track, kind)
    return drawn
