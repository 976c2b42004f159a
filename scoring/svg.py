"""Plots of a leaderboard as SVG text, drawn on the server (no JavaScript, no plotting library)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 560, 400
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 36, 52
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


@dataclass
class Point:
    x: float
    y: float
    label: str
    x_range: tuple[float, float] | None = None
    y_range: tuple[float, float] | None = None
    series: int = 0


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    if not (math.isfinite(low) and math.isfinite(high)):
        return []
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    return [round(i * step, 10) for i in range(first, last + 1)]


def _fmt(value: float) -> str:
    return f"{value:g}"


def scatter(
    points: list[Point],
    *,
    title: str,
    x_label: str,
    y_label: str,
    diagonal: bool = False,
    invert_x: bool = False,
    legend: list[str] | None = None,
) -> str:
    """An SVG scatter plot; ranges draw as error bars (e.g. the spread over categories)."""
    points = [p for p in points if math.isfinite(p.x) and math.isfinite(p.y)]
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'font-family="sans-serif" font-size="11">'
        f"<title>{escape(title)}</title>"
    )
    if not points:
        return (
            head + f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">'
            "No values to plot</text></svg>"
        )
    xs = [v for p in points for v in (p.x, *(p.x_range or ()))]
    ys = [v for p in points for v in (p.y, *(p.y_range or ()))]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), min(ys), max(ys)
    if diagonal:
        x_lo = y_lo = min(x_lo, y_lo)
        x_hi = y_hi = max(x_hi, y_hi)
    x_ticks, y_ticks = nice_ticks(x_lo, x_hi), nice_ticks(y_lo, y_hi)
    # A margin keeps points and their labels off the frame.
    x_pad = 0.04 * ((x_ticks[-1] - x_ticks[0]) or 1)
    y_pad = 0.04 * ((y_ticks[-1] - y_ticks[0]) or 1)
    x_min, x_max = x_ticks[0] - x_pad, x_ticks[-1] + x_pad
    y_min, y_max = y_ticks[0] - y_pad, y_ticks[-1] + y_pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        t = (x - x_min) / ((x_max - x_min) or 1)
        return LEFT + plot_w * (1 - t if invert_x else t)

    def sy(y: float) -> float:
        return TOP + plot_h * (1 - (y - y_min) / ((y_max - y_min) or 1))

    parts = [head]
    parts.append(
        f'<text x="{WIDTH / 2}" y="18" text-anchor="middle" font-size="13" '
        f'font-weight="bold">{escape(title)}</text>'
    )
    parts.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>'
    )
    for tick in x_ticks:
        x = sx(tick)
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP + plot_h}" x2="{x:.1f}" y2="{TOP + plot_h + 4}" stroke="#999"/>'
            f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_fmt(tick)}</text>'
        )
    for tick in y_ticks:
        y = sy(tick)
        parts.append(
            f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#999"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(tick)}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 12}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text transform="translate(16 {TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_label)}</text>"
    )
    if diagonal:
        parts.append(
            f'<line x1="{sx(x_min):.1f}" y1="{sy(x_min):.1f}" x2="{sx(x_max):.1f}" '
            f'y2="{sy(x_max):.1f}" stroke="#bbb" stroke-dasharray="4 3"/>'
        )
    for p in points:
        color = COLORS[p.series % len(COLORS)]
        if p.x_range:
            parts.append(
                f'<line class="spread" x1="{sx(p.x_range[0]):.1f}" y1="{sy(p.y):.1f}" '
                f'x2="{sx(p.x_range[1]):.1f}" y2="{sy(p.y):.1f}" stroke="{color}" opacity="0.5"/>'
            )
        if p.y_range:
            parts.append(
                f'<line class="spread" x1="{sx(p.x):.1f}" y1="{sy(p.y_range[0]):.1f}" '
                f'x2="{sx(p.x):.1f}" y2="{sy(p.y_range[1]):.1f}" stroke="{color}" opacity="0.5"/>'
            )
        parts.append(
            f'<circle class="point" cx="{sx(p.x):.1f}" cy="{sy(p.y):.1f}" r="4" fill="{color}">'
            f"<title>{escape(p.label)}: {_fmt(p.x)}, {_fmt(p.y)}</title></circle>"
            f'<text x="{sx(p.x) + 6:.1f}" y="{sy(p.y) - 6:.1f}">{escape(p.label)}</text>'
        )
    for i, name in enumerate(legend or []):
        # Top left: in these plots the best systems (low FAD, first ranks) sit bottom left.
        y = TOP + 14 + 16 * i
        parts.append(
            f'<circle cx="{LEFT + 14}" cy="{y - 4}" r="4" fill="{COLORS[i % len(COLORS)]}"/>'
            f'<text x="{LEFT + 24}" y="{y}">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _range(row: dict, name: str) -> tuple[float, float] | None:
    lo, hi = row.get(f"{name}_min"), row.get(f"{name}_max")
    return (lo, hi) if lo is not None and hi is not None else None


def fad_dev_vs_eval(rows: list[dict], track: str) -> str:
    points = [
        Point(
            r["fad_dev"],
            r["fad_eval"],
            r["system"],
            x_range=_range(r, "fad_dev"),
            y_range=_range(r, "fad_eval"),
        )
        for r in rows
        if r.get("fad_dev") is not None and r.get("fad_eval") is not None
    ]
    return scatter(
        points,
        title=f"Track {track}: FAD-Dev against FAD-Eval (bars: range over categories)",
        x_label="FAD-Dev (mean over categories)",
        y_label="FAD-Eval (mean over categories)",
        diagonal=True,
    )


def fad_vs_rank(rows: list[dict], track: str) -> str:
    points = []
    for r in rows:
        for series, name in enumerate(("fad_eval", "fad_dev")):
            if r.get(name) is not None:
                points.append(
                    Point(
                        float(r["rank"]), r[name], r["system"] if series == 0 else "", series=series
                    )
                )
    return scatter(
        points,
        title=f"Track {track}: FAD against final rank",
        x_label="Final rank (listening test)",
        y_label="FAD (mean over categories)",
        legend=["FAD-Eval", "FAD-Dev"],
    )


PLOTS = {"fad-dev-eval": fad_dev_vs_eval, "fad-rank": fad_vs_rank}
