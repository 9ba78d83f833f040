"""Plotly figures as plain JSON dicts (``{"data": [...], "layout": {...}}``), built directly.

Plotly's figure objects validate every property on every update, which costs seconds for the fifty-odd
figures of one run; a dict costs nothing, and :func:`probing.report.html.figure_div` writes it as it is.
Only the subplot grid comes from :func:`plotly.subplots.make_subplots`, once per grid shape
(:func:`grid_figure`), so axes, domains, title annotations and the template are plotly's own. What the
helpers write is what plotly's objects would, property for property (named colour scales as explicit
stops, titles as ``{"text": ...}``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Optional, Sequence

import numpy as np


def heatmap(z: np.ndarray, coloraxis: str, hover: str, customdata: Optional[np.ndarray] = None) -> dict:
    """A heatmap trace of ``z`` (rounded to 4 digits, NaN as a gap) on colour axis ``coloraxis``."""
    trace = {"type": "heatmap", "z": np.where(np.isfinite(z), np.round(z, 4), None).tolist(), "coloraxis": coloraxis,
             "hovertemplate": hover + "<extra></extra>", "xgap": 1, "ygap": 1}
    if customdata is not None:
        trace["customdata"] = customdata.tolist()
    return trace


@lru_cache(maxsize=None)
def _grid_json(rows: int, cols: int, options: tuple) -> str:
    """The layout of plotly's subplot grid (axes, domains, title annotations, template) as JSON, titles
    ``"0"``, ``"1"``, ... in subplot order."""
    import plotly.io as pio
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[str(k) for k in range(rows * cols)], **dict(options))
    return pio.to_json(fig.layout, validate=False)


def grid_figure(rows: int, cols: int, titles: Sequence[str], **options: Any) -> dict:
    """A figure dict with an empty ``rows x cols`` subplot grid titled ``titles`` (row by row); ``options``
    go to ``make_subplots`` (spacing, shared axes)."""
    layout = json.loads(_grid_json(rows, cols, tuple(sorted(options.items()))))
    for a in layout.get("annotations", []):
        a["text"] = titles[int(a["text"])]
    return {"data": [], "layout": layout}


def on(trace: dict, row: int, col: int, cols: int) -> dict:
    """``trace`` placed in subplot (row, col) of a grid with ``cols`` columns (1-based, as plotly's ``add_trace``)."""
    k = (row - 1) * cols + col
    return {**trace, "xaxis": "x" if k == 1 else f"x{k}", "yaxis": "y" if k == 1 else f"y{k}"}


@lru_cache(maxsize=None)
def colorscale(name: str) -> tuple:
    """A named colour scale as the explicit stops plotly writes (the page then draws plotly.py's scale)."""
    import plotly.colors

    return tuple((float(v), c) for v, c in plotly.colors.get_colorscale(name))


def coloraxis(scale: str, title: str, colorbar: Optional[dict] = None, **kw: Any) -> dict:
    """A layout colour axis: ``scale`` by name, a colour bar titled ``title`` (plus ``colorbar``), ``kw``."""
    return {"colorscale": [list(stop) for stop in colorscale(scale)], **kw,
            "colorbar": {**(colorbar or {}), "title": {"text": title}}}


def layer_head_axes(fig: dict, rows: int, cols: int, n_layers: int, n_heads: int) -> None:
    """Layer x head axes for every subplot of a grid: layers top-down, titles on the outer axes."""
    layout = fig["layout"]
    for r in range(1, rows + 1):
        for c in range(1, cols + 1):
            k = (r - 1) * cols + c
            y, x = layout[f"yaxis{k if k > 1 else ''}"], layout[f"xaxis{k if k > 1 else ''}"]
            y.update(autorange="reversed", dtick=1 if n_layers <= 12 else 2)
            if c == 1:
                y["title"] = {"text": "layer"}
            x["dtick"] = 1 if n_heads <= 12 else 2
            if r == rows:
                x["title"] = {"text": "head"}


def hline(fig: dict, y: float, col: int, text: str) -> None:
    """A dashed horizontal line across subplot (1, col) at ``y``, labelled at its right end (``add_hline``)."""
    x, yref = ("x" if col == 1 else f"x{col}"), ("y" if col == 1 else f"y{col}")
    layout = fig["layout"]
    layout.setdefault("shapes", []).append({"type": "line", "x0": 0, "x1": 1, "xref": f"{x} domain", "y0": y, "y1": y,
                                            "yref": yref, "line": {"color": "#888", "dash": "dash"}})
    layout.setdefault("annotations", []).append({"text": text, "showarrow": False, "x": 1, "xanchor": "right",
                                                 "xref": f"{x} domain", "y": y, "yanchor": "bottom", "yref": yref})




def bar_right_of(fig: dict, k: int) -> dict:
    """A colour bar just right of subplot ``k`` (1-based) of a grid, as tall as it (a ``colorbar`` dict)."""
    x = fig["layout"]["xaxis" if k == 1 else f"xaxis{k}"]["domain"]
    y = fig["layout"]["yaxis" if k == 1 else f"yaxis{k}"]["domain"]
    return {"x": x[1] + 0.005, "xanchor": "left", "y": y[0], "yanchor": "bottom", "len": y[1] - y[0],
            "thickness": 12}


def lines_for_flat_heatmaps(fig: dict) -> int:
    """Redraw every heatmap of ``fig`` whose values lie along one line of the grid (one head per layer, as a
    per-layer measure or a sweep over layers at one head gives; or one layer's heads) as a line over that
    axis: a one-column heatmap hides the trend it holds. Returns how many heatmaps it replaced."""
    if not isinstance(fig, dict):
        return 0
    replaced = 0
    for k, trace in enumerate(fig["data"]):
        if trace.get("type") != "heatmap":
            continue
        got = _flat_line(trace)
        if got is not None:
            fig["data"][k] = got[0]
            _line_axes(fig["layout"], *got)
            replaced += 1
    return replaced


_VALUE_NAME = re.compile(r"<br>([^<%]+?) %\{z")


def _flat_line(trace: dict) -> Optional[tuple[dict, str]]:
    """The line of a heatmap trace whose finite cells are all in one column (x: layers) or one row (x: heads),
    at least two of them, and what its x is; None for any other heatmap."""
    z = np.array([[np.nan if v is None else v for v in row] for row in trace["z"]], dtype=float).reshape(
        len(trace["z"]), -1)
    rows, cols = np.nonzero(np.isfinite(z))
    if len(set(cols)) == 1 and len(set(rows)) >= 2:
        along, at, axis = "layer", int(cols[0]), 0
    elif len(set(rows)) == 1 and len(set(cols)) >= 2:
        along, at, axis = "head", int(rows[0]), 1
    else:
        return None
    y = z[:, at] if axis == 0 else z[at, :]
    hover = trace.get("hovertemplate", "")
    if axis == 0:  # the layer becomes x; the head is fixed
        hover = hover.replace("%{x}", str(at)).replace("%{y}", "%{x}")
    else:
        hover = hover.replace("%{y}", str(at))
    name = _VALUE_NAME.search(hover)
    line = {"type": "scatter", "mode": "lines+markers", "x": list(range(len(y))),
            "y": [None if not np.isfinite(v) else float(v) for v in y], "hovertemplate": hover.replace("%{z", "%{y"),
            "showlegend": False, "line": {"color": "#1f77b4"}, "name": name.group(1) if name else "value",
            "xaxis": trace.get("xaxis", "x"), "yaxis": trace.get("yaxis", "y")}
    if "customdata" in trace:
        custom = trace["customdata"]
        line["customdata"] = [row[at] for row in custom] if axis == 0 else list(custom[at])
    return line, along


def _line_axes(layout: dict, line: dict, along: str) -> None:
    """The axes of a line drawn in a heatmap's subplot: x the layer (or head), y its value (no longer
    top-down)."""
    x = layout.setdefault("xaxis" + line["xaxis"][1:], {})
    y = layout.setdefault("yaxis" + line["yaxis"][1:], {})
    x.update(dtick=1, autorange=True)
    if "title" in x:  # the grid titles its bottom row only
        x["title"] = {"text": along}
    y.pop("dtick", None)
    y.update(autorange=True, title={"text": line["name"]})
