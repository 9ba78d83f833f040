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
