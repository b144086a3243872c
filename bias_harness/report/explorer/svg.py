"""The explorer's figures: a work's headline numbers, every model side by side, each with its 95% CI, as inline SVG.

Why SVG drawn here and not a chart library: these are point-and-interval charts of a few dozen numbers. SVG shows
them without JavaScript (the explorer's overview must read without it), scales to any screen, and its ``<title>``
elements give each point a hover tooltip (value and CI) that browsers and screen readers show natively; each point
is a keyboard-focusable link to the documents behind the number. A chart library would add zoom and pan, which
charts of this size do not need, at 50-800 KB of script.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

from bias_harness.runs import Point

COLORS = ("#1f5fa8", "#c2571a", "#2e8540", "#8a3ea8", "#a8323e", "#4d4d4d")
ROW = 22  # px per bar
LABEL_W = 300
PLOT_W = 420


def _finite(x: float | None) -> bool:
    return isinstance(x, (int, float)) and not math.isnan(x)


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def forest(
    values: dict[str, dict[str, Point]],
    title: str,
    links: Callable[[str, str], str | None] | None = None,
    refs: Callable[[str], float | None] | None = None,
    ref_label: str = "ideal",
) -> str:
    """One chart: per metric a group of rows, one per model (``values`` = {model: {metric: Point}}), each a dot with
    its 95% CI as a line; ``refs`` a dashed reference per metric; ``links(model, metric)`` the drill-down link of a
    point. Returns an ``<svg>`` element (empty string when there is nothing to draw)."""
    models = list(values)
    metrics = list(dict.fromkeys(m for v in values.values() for m in v))
    if not metrics:
        return ""
    nums = [x for v in values.values() for p in v.values() for x in (p.value, p.lo, p.hi) if _finite(x)]
    ref_values = {m: refs(m) for m in metrics} if refs else {}
    nums += [r for r in ref_values.values() if _finite(r)]
    lo, hi = (min(nums), max(nums)) if nums else (0.0, 1.0)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.05
    lo, hi = lo - pad, hi + pad

    def x(v: float) -> float:
        return LABEL_W + (v - lo) / (hi - lo) * PLOT_W

    height = 30 + ROW * len(metrics) * len(models) + 6 * len(metrics) + 30
    width = LABEL_W + PLOT_W + 20
    out = [
        f'<svg class="forest" viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px" role="img" '
        f'aria-label="{escape(title)}: every model\'s number with its 95% CI">',
        f"<title>{escape(title)}</title>",
    ]
    y = 24
    legend = " ".join(f'<tspan fill="{COLORS[i % len(COLORS)]}">● {escape(m)}</tspan>' for i, m in enumerate(models))
    out.append(f'<text x="4" y="14" class="legend">{legend}</text>')
    for metric in metrics:
        group_top = y
        for i, model in enumerate(models):
            p = values[model].get(metric)
            cy = y + ROW / 2
            label = metric if i == 0 else ""
            if label:
                out.append(
                    f'<text x="{LABEL_W - 8}" y="{cy + 4}" text-anchor="end" class="label">{escape(label)}</text>'
                )
            color = COLORS[i % len(COLORS)]
            if p is None or not _finite(p.value):
                out.append(f'<text x="{LABEL_W + 4}" y="{cy + 4}" class="nodata">no data ({escape(model)})</text>')
                y += ROW
                continue
            ci = f" [{_num(p.lo)}, {_num(p.hi)}]" if _finite(p.lo) and _finite(p.hi) else " (no CI)"
            tip = f"{model}: {metric} = {_num(p.value)}{ci}"
            parts = [f"<title>{escape(tip)}</title>"]
            if _finite(p.lo) and _finite(p.hi):
                parts.append(
                    f'<line x1="{x(p.lo):.1f}" x2="{x(p.hi):.1f}" y1="{cy}" y2="{cy}" '
                    f'stroke="{color}" stroke-width="2"/>'
                )
            parts.append(f'<circle cx="{x(p.value):.1f}" cy="{cy}" r="5" fill="{color}"/>')
            parts.append(
                f'<text x="{min(x(p.value) + 8, width - 40):.1f}" y="{cy - 6}" class="val">'
                f"{escape(_num(p.value))}</text>"
            )
            href = links(model, metric) if links else None
            body = "".join(parts)
            if href:
                out.append(f'<a href="{escape(href)}" class="pt" aria-label="{escape(tip)}">{body}</a>')
            else:
                out.append(f'<g class="pt" tabindex="0" aria-label="{escape(tip)}">{body}</g>')
            y += ROW
        ref = ref_values.get(metric)
        if _finite(ref):
            rx = x(ref)
            out.append(
                f'<line x1="{rx:.1f}" x2="{rx:.1f}" y1="{group_top}" y2="{y}" class="ref">'
                f"<title>{escape(ref_label)}: {_num(ref)}</title></line>"
            )
        y += 6
    # axis
    out.append(f'<line x1="{LABEL_W}" x2="{LABEL_W + PLOT_W}" y1="{y + 4}" y2="{y + 4}" class="axis"/>')
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<text x="{x(v):.1f}" y="{y + 18}" text-anchor="middle" class="tick">{escape(_num(v))}</text>')
    out.append("</svg>")
    return "".join(out)
