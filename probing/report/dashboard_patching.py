"""The dashboard's patching section, from ``task=patching`` runs: each position's head effects as a layer x head
map, and the atlas, a point per head with its attention accuracy on the pairs' own arcs (x) against its patching
effect (y), hover naming the head, both intervals and its quadrant; beside them the atlas table."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from probing.report import plotly_json as P
from probing.report.dashboard_figures import Fig, grid, shape_of


def effect_figures(sources: Sequence[Any]) -> list[Fig]:
    """Per patching run: a map per position of every head's normalised effect (0 clean, 1 corrupt)."""
    out: list[Fig] = []
    for s in sources:
        t = s.patching
        if t is None or not len(t):
            continue
        positions = list(dict.fromkeys(t["position"]))
        n_layers, n_heads = shape_of(t)
        counts = t.groupby("position", sort=False)["n_pairs"].first()
        fig = P.grid_figure(1, len(positions), [f"{p} (n = {int(counts[p])})" for p in positions])
        for c, pos in enumerate(positions, start=1):
            sub = t[t["position"] == pos]
            custom = np.full((n_layers, n_heads, 3), "", dtype=object)
            for r in sub.itertuples(index=False):
                custom[r.layer, r.head] = [f"{r.effect_ci_low:+.3f}", f"{r.effect_ci_high:+.3f}",
                                           f"{r.p_adjusted:.2g}"]
            trace = P.heatmap(grid(sub, "effect", n_layers, n_heads), "coloraxis",
                              "L%{y} H%{x}<br>effect %{z:+.3f} [%{customdata[0]}, %{customdata[1]}]<br>"
                              "p adjusted %{customdata[2]}", custom)
            fig["data"].append(P.on(trace, 1, c, len(positions)))
        P.layer_head_axes(fig, 1, len(positions), n_layers, n_heads)
        lim = float(np.nanmax(np.abs(t["effect"].to_numpy(dtype=float)))) or 1.0
        fig["layout"].update(height=360, margin=dict(b=40, l=50, r=80, t=60),
                             coloraxis=P.coloraxis("RdBu", "effect", cmin=-lim, cmax=lim, reversescale=True))
        out.append((f"patching effects · {s.label}", fig, len(positions)))
    return out


def atlas_figures(sources: Sequence[Any]) -> list[Fig]:
    """Per run with an atlas: attention accuracy (target -> cue) against effect, a point per head coloured by
    layer, the offset baseline as a vertical line."""
    out: list[Fig] = []
    for s in sources:
        if s.patching_atlas is None or not len(s.patching_atlas):
            continue
        for rel, a in s.patching_atlas.groupby("relation", sort=False):
            out.append(_atlas_figure(s, rel, a))
    return out


def _atlas_figure(s: Any, rel: str, a: pd.DataFrame) -> Fig:
    """One relation's atlas of one source."""
    n_layers = int(a["layer"].max()) + 1
    custom = a[["layer", "head", "quadrant", "attention_ci_low", "attention_ci_high", "effect_ci_low",
                "effect_ci_high", "p_adjusted"]].copy()
    for c in ("attention_ci_low", "attention_ci_high", "effect_ci_low", "effect_ci_high"):
        custom[c] = custom[c].map(lambda v: f"{v:.3f}")
    custom["p_adjusted"] = custom["p_adjusted"].map(lambda v: f"{v:.2g}")
    trace = {"type": "scatter", "mode": "markers", "x": a["attention_accuracy"].round(4).tolist(),
             "y": a["effect"].round(5).tolist(), "customdata": custom.to_numpy().tolist(),
             "hovertemplate": "L%{customdata[0]} H%{customdata[1]}: %{customdata[2]}<br>attention accuracy "
                              "%{x:.3f} [%{customdata[3]}, %{customdata[4]}]<br>effect %{y:+.3f} "
                              "[%{customdata[5]}, %{customdata[6]}], p adjusted %{customdata[7]}<extra></extra>",
             "marker": {"color": a["layer"].tolist(), "cmin": -0.5, "cmax": n_layers - 0.5, "size": 8,
                        "colorscale": [list(v) for v in P.colorscale("Viridis")], "showscale": True,
                        "colorbar": {"title": {"text": "layer"}, "dtick": 1}}}
    base = float(a["offset_baseline"].iloc[0])
    r = (s.metrics.get("atlas") or {}).get(rel)
    title = f"atlas · {rel} · {s.label}" + (f" · Spearman ρ {r['spearman']:.2f} [{r['spearman_ci_low']:.2f}, "
                                            f"{r['spearman_ci_high']:.2f}]" if r else "")
    fig = {"data": [trace], "layout": {
        "height": 420, "margin": dict(b=50, l=60, r=40, t=60), "title": {"text": title, "font": {"size": 13}},
        "xaxis": {"title": {"text": f"attention accuracy, target → cue ({rel}, scored half)"},
                  "range": [-0.02, 1.02]},
        "yaxis": {"title": {"text": "effect when patched at every piece"}},
        "shapes": [{"type": "line", "x0": base, "x1": base, "yref": "paper", "y0": 0, "y1": 1,
                    "line": {"dash": "dash", "color": "grey", "width": 1}}],
        "annotations": [{"x": base, "yref": "paper", "y": 1, "text": "offset baseline", "showarrow": False,
                         "font": {"size": 10}, "xanchor": "left"}]}}
    return (title, fig, 0)


def atlas_table(sources: Sequence[Any]) -> pd.DataFrame:
    """Every head of every atlas, the source first, by effect."""
    frames = [s.patching_atlas.assign(source=s.label) for s in sources
              if s.patching_atlas is not None and len(s.patching_atlas)]
    if not frames:
        return pd.DataFrame()
    cols = ["source", "relation", "layer", "head", "quadrant", "attention_accuracy", "attention_ci_low", "attention_ci_high",
            "offset_baseline", "effect", "effect_ci_low", "effect_ci_high", "p_adjusted"]
    return pd.concat(frames, ignore_index=True)[cols].sort_values(["source", "relation", "effect"],
                                                                  ascending=[True, True, False])
