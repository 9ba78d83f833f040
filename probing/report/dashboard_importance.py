"""Dashboard figures of ``task=importance`` runs: per relation, the layer x head heatmap of each
head's ablation importance beside its attention accuracy, and the scatter of the two (a point per head,
coloured by layer, the run's Spearman and interval in the title); gradient and leave-one-layer-in
importance; the pruning curves; and a table linking the two per relation.

The attention accuracy comes from the run's ``importance.heads_run`` heads table, else from the heads table the
run wrote (the accuracy it computed), else from a heads run of the same model, corpus and split in the page.
Builders return ``(title, figure, n_heatmaps)`` like :mod:`probing.report.dashboard_figures`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from probing import schema
from probing.config import Direction, LabelSet, Measure
from probing.report import plotly_json as P
from probing.report.dashboard_figures import Fig, grid

ABLATION, GRADIENT, LAYER_IN = "ablation", "gradient", "layer_in"  # the importance table's methods
LOSS = "loss_change"
MAX_PRUNING_PANELS = 8
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


def with_importance(sources: Sequence[Any]) -> list[Any]:
    return [s for s in sources if s.importance is not None and len(s.importance)]


def drop_metric(imp: pd.DataFrame) -> Optional[str]:
    """The readout's score-drop metric of the single-head ablations (``accuracy_drop``, ``uas_drop`` ...)."""
    got = imp.loc[imp["method"] == ABLATION, "metric"].astype(str).unique()
    drops = sorted(m for m in got if m.endswith("_drop"))
    return drops[0] if drops else None


def attention_of(src: Any, sources: Sequence[Any]) -> tuple[Optional[pd.DataFrame], str]:
    """The attention accuracy (UD labels as they are, attention maps) the importance is read against, and
    where it came from: the run's ``importance.heads_run`` or the heads table the run computed itself, else a
    heads run in the page with the same model, corpus and split."""
    ident = src.importance.iloc[0]
    named = (src.config.get("importance") or {}).get("heads_run")
    found, origin = src.linked_heads, ("importance.heads_run" if named else "the run's own heads table")
    if found is None:
        for s in sources:
            h = s.heads
            if h is None or not len(h) or s.measure not in (None, Measure.attention.value):
                continue
            row = h.iloc[0]
            if all(str(row.get(k, ident[k])) == str(ident[k]) for k in ("model", "corpus", "split")):
                found, origin = h, s.label
                break
    if found is None:
        return None, ""
    if "label_set" in found.columns:
        found = found[found["label_set"] == LabelSet.as_is.value]
    if "measure" in found.columns:
        found = found[found["measure"].astype(str) == Measure.attention.value]
    return (found, origin) if len(found) else (None, "")


def _relations(imp: pd.DataFrame) -> list[str]:
    """``all`` first, then by number of arcs."""
    n = imp.groupby("relation")["n"].max() if "n" in imp.columns else imp.groupby("relation").size()
    return sorted(n.index.astype(str), key=lambda r: (r != schema.ALL, -float(n.get(r, 0)), r))


def _shape(*frames: pd.DataFrame) -> tuple[int, int]:
    rows = [f for f in frames if len(f) and f["head"].notna().any()]
    return (max(int(f["layer"].max()) for f in rows) + 1, max(int(f["head"].max()) + 1 for f in rows))


def _heads(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["head"].notna()].astype({"layer": int, "head": int})


def relation_figures(sources: Sequence[Any]) -> list[Fig]:
    """Per importance run and relation: the heatmaps of score drop, attention accuracy per direction and loss
    change, and per direction the scatter of attention accuracy (x) against score drop (y)."""
    out: list[Fig] = []
    for s in with_importance(sources):
        imp = s.importance
        drop = drop_metric(imp)
        if drop is None:
            continue
        att, origin = attention_of(s, sources)
        abl = _heads(imp[imp["method"] == ABLATION])
        link = s.importance_link
        for rel in _relations(abl):
            d = abl[(abl["relation"] == rel) & (abl["metric"] == drop)]
            loss = abl[(abl["relation"] == rel) & (abl["metric"] == LOSS)]
            a = att[att["relation"] == rel] if att is not None else pd.DataFrame()
            dirs = [x.value for x in Direction if len(a) and (a["direction"] == x.value).any()]
            shape = _shape(d, *([a] if len(a) else []))
            fig, count = _relation_figure(s.label, rel, drop, d, loss, a, dirs, link, origin, shape)
            out.append((importance_title(s.label, rel), fig, count))
    return out


def importance_title(label: str, relation: str) -> str:
    """The title of a relation's importance figure (and, through ``anchor``, the overview's link to it)."""
    return f"{label} · {relation}: importance beside attention accuracy"


def _relation_figure(label: str, rel: str, drop: str, d: pd.DataFrame, loss: pd.DataFrame, a: pd.DataFrame,
                     dirs: list[str], link: Optional[pd.DataFrame], origin: str, shape: tuple[int, int]
                     ) -> tuple[dict, int]:
    cols = 1 + len(dirs)
    rows = 2 if dirs else 1
    titles = [f"{drop} when the head is ablated"] + [f"attention accuracy, {x}<br>({origin})" for x in dirs]
    titles += [f"{x}: {_rho(link, rel, x)}" for x in dirs] + [f"{LOSS} when ablated"] if dirs else [LOSS]
    fig = P.grid_figure(rows, cols if dirs else 2, titles, horizontal_spacing=0.09, vertical_spacing=0.16)
    cols = cols if dirs else 2
    custom = np.round(np.stack([grid(d, c, *shape) for c in ("ci_low", "ci_high", "n")], axis=-1), 4)
    hover = "L%{y} H%{x}<br>" + drop + " %{z:.4f} [%{customdata[0]:.4f}, %{customdata[1]:.4f}]<br>n %{customdata[2]}"
    fig["data"].append(P.on(P.heatmap(grid(d, "score", *shape), "coloraxis", hover, custom), 1, 1, cols))
    heat = [1]
    for c, x in enumerate(dirs, start=2):
        fig["data"].append(P.on(P.heatmap(grid(a[a["direction"] == x], "accuracy", *shape), "coloraxis2",
                                          "L%{y} H%{x}<br>attention accuracy %{z:.3f}"), 1, c, cols))
        heat.append(c)
    loss_at = cols * rows  # the last subplot
    fig["data"].append(P.on(P.heatmap(grid(loss, "score", *shape), "coloraxis3", f"L%{{y}} H%{{x}}<br>{LOSS} "
                                      "%{z:.4f}"), rows, cols if dirs else 2, cols))
    heat.append(loss_at)
    for k, x in enumerate(dirs, start=1):
        pts = a[a["direction"] == x][["layer", "head", "accuracy"]].merge(d[["layer", "head", "score"]],
                                                                           on=["layer", "head"])
        bar = P.bar_right_of(fig, cols + len(dirs)) if k == 1 else None  # beside the last scatter
        fig["data"].append(P.on(_scatter(pts, shape[0], bar), 2, k, cols))
        n = cols + k
        fig["layout"][f"xaxis{n}"].update(title={"text": "attention accuracy"})
        fig["layout"][f"yaxis{n}"].update(title={"text": drop} if k == 1 else {})
    _layer_head_axes(fig, heat, shape)
    layout = fig["layout"]
    layout.update(height=330 * rows + 60, margin=dict(b=40, l=60, r=80, t=80), showlegend=False,
                  coloraxis=P.coloraxis("RdBu", "drop", P.bar_right_of(fig, 1), cmid=0, reversescale=True),
                  coloraxis3=P.coloraxis("RdBu", "loss", P.bar_right_of(fig, loss_at), cmid=0, reversescale=True))
    if dirs:
        layout["coloraxis2"] = P.coloraxis("Viridis", "acc", P.bar_right_of(fig, cols), cmin=0)
    for ann in layout.get("annotations", []):
        ann["font"] = {**ann.get("font", {}), "size": 11}
    return fig, len(heat)


def _rho(link: Optional[pd.DataFrame], rel: str, direction: str) -> str:
    """The run's Spearman over heads (and its bootstrap interval) for a relation and direction."""
    if link is None:
        return "no link table"
    r = link[(link["relation"] == rel) & (link["direction"] == direction)]
    if not len(r):
        return "no Spearman for this relation"
    r = r.iloc[0]
    ci = f" [{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if np.isfinite(r.get("ci_low", np.nan)) else ""
    return f"Spearman ρ {r['rho']:.2f}{ci}"


def _scatter(pts: pd.DataFrame, n_layers: int, colorbar: Optional[dict]) -> dict:
    """A point per head: attention accuracy against score drop, coloured by layer (``colorbar``: where the
    layer colour bar goes; None: not drawn)."""
    return {"type": "scatter", "mode": "markers", "x": pts["accuracy"].round(4).tolist(),
            "y": pts["score"].round(5).tolist(), "customdata": pts[["layer", "head"]].to_numpy().tolist(),
            "hovertemplate": "L%{customdata[0]} H%{customdata[1]}<br>attention accuracy %{x:.3f}<br>"
                             "drop %{y:.4f}<extra></extra>",
            "marker": {"color": pts["layer"].tolist(), "cmin": -0.5, "cmax": n_layers - 0.5, "size": 7,
                       "colorscale": [list(v) for v in P.colorscale("Viridis")], "showscale": colorbar is not None,
                       "colorbar": {**(colorbar or {}), "title": {"text": "layer"}, "dtick": 1}}}


def _layer_head_axes(fig: dict, subplots: Sequence[int], shape: tuple[int, int]) -> None:
    """Layer x head axes (layers top-down) on the given subplots only."""
    for k in subplots:
        suffix = "" if k == 1 else str(k)
        fig["layout"][f"yaxis{suffix}"].update(autorange="reversed", dtick=1 if shape[0] <= 12 else 2,
                                               title={"text": "layer"})
        fig["layout"][f"xaxis{suffix}"].update(dtick=1 if shape[1] <= 12 else 2, title={"text": "head"})


def method_figures(sources: Sequence[Any]) -> list[Fig]:
    """Per importance run: the gradient importance heatmap (Michel et al., normalised per layer) and the
    score drop of leave-one-layer-in ablation (every head outside the layer ablated), ``all`` arcs."""
    out: list[Fig] = []
    for s in with_importance(sources):
        imp = s.importance
        grad = _heads(imp[(imp["method"] == GRADIENT) & (imp["relation"] == schema.ALL)])
        drop = drop_metric(imp)
        kept = imp[(imp["method"] == LAYER_IN) & (imp["relation"] == schema.ALL) & (imp["metric"] == drop)]
        if not len(grad) and not len(kept):
            continue
        panels = (["gradient importance (normalised per layer)"] if len(grad) else []) + (
            [f"{drop}, only this layer's heads kept"] if len(kept) else [])
        fig = P.grid_figure(1, len(panels), panels, horizontal_spacing=0.12)
        if len(grad):
            shape = _shape(grad)
            custom = np.round(np.stack([grid(grad, c, *shape) for c in ("ci_low", "ci_high")], axis=-1), 4)
            fig["data"].append(P.on(P.heatmap(grid(grad, "score", *shape), "coloraxis", "L%{y} H%{x}<br>gradient "
                                              "%{z:.3f} [%{customdata[0]:.3f}, %{customdata[1]:.3f}]", custom),
                                    1, 1, len(panels)))
            _layer_head_axes(fig, [1], shape)
            fig["layout"]["coloraxis"] = P.coloraxis("Viridis", "grad", P.bar_right_of(fig, 1), cmin=0)
        if len(kept):
            k = len(panels)
            kept = kept.sort_values("layer")
            err = {"type": "data", "symmetric": False, "array": (kept["ci_high"] - kept["score"]).round(5).tolist(),
                   "arrayminus": (kept["score"] - kept["ci_low"]).round(5).tolist()}
            fig["data"].append(P.on({"type": "bar", "x": kept["layer"].astype(int).tolist(),
                                     "y": kept["score"].round(5).tolist(), "error_y": err, "showlegend": False,
                                     "hovertemplate": "layer %{x} kept: drop %{y:.4f}<extra></extra>"},
                                    1, k, len(panels)))
            fig["layout"]["xaxis" if k == 1 else f"xaxis{k}"].update(title={"text": "layer kept"}, dtick=1)
        fig["layout"].update(height=360, margin=dict(b=40, l=60, r=60, t=60))
        out.append((f"{s.label}: gradient and leave-one-layer-in importance (all arcs)", fig, int(len(grad) > 0)))
    return out


def pruning_figures(sources: Sequence[Any]) -> list[Fig]:
    """Per importance run: the readout's score as heads are removed, a panel per relation (``all`` first),
    a line per order, random orders as their mean with a min-max band."""
    out: list[Fig] = []
    for s in with_importance(sources):
        prune = s.pruning
        if prune is None or not len(prune):
            continue
        rels = [r for r in _relations(s.importance) if (prune["relation"] == r).any()][:MAX_PRUNING_PANELS]
        cols = min(len(rels), 4)
        rows = -(-len(rels) // cols)
        fig = P.grid_figure(rows, cols, rels + [""] * (rows * cols - len(rels)), horizontal_spacing=0.06,
                            vertical_spacing=0.18, shared_yaxes=False)
        # random orders are drawn as their mean with the band of single orders; the table's own random_mean row is
        # that mean again
        orders = sorted(set(prune["order"].astype(str)) - {"random_mean"}, key=lambda o: (o == "random", o))
        for k, rel in enumerate(rels):
            t = prune[prune["relation"] == rel]
            for i, order in enumerate(orders):
                curve = t[t["order"].astype(str) == order].groupby("fraction_removed")["score"]
                x = [float(v) for v in curve.mean().index]
                style = dict(r=k // cols + 1, c=k % cols + 1, cols=cols, legend=k == 0)
                if order == "random":
                    fig["data"].append(_on(_trace(x, curve.min(), "random (min)", "#aaa", False, line=0), style))
                    fig["data"].append(_on({**_trace(x, curve.max(), "random (min–max)", "#aaa", style["legend"],
                                                     line=0), "fill": "tonexty", "fillcolor": "rgba(150,150,150,0.3)"},
                                           style))
                    fig["data"].append(_on(_trace(x, curve.mean(), "random (mean)", "#666", style["legend"]), style))
                else:
                    fig["data"].append(_on(_trace(x, curve.mean(), order, _COLOURS[i % len(_COLOURS)],
                                                  style["legend"]), style))
            fig["layout"]["xaxis" if k == 0 else f"xaxis{k + 1}"].update(title={"text": "fraction removed"})
        fig["layout"].update(height=300 * rows + 80, margin=dict(b=40, l=60, r=30, t=60),
                             legend={"orientation": "h", "y": -0.15 / rows})
        out.append((f"{s.label}: pruning curves", fig, 0))
    return out


def _trace(x: list[float], y: pd.Series, name: str, colour: str, legend: bool, line: float = 2) -> dict:
    return {"type": "scatter", "x": x, "y": [round(float(v), 5) for v in y], "name": name, "legendgroup": name,
            "showlegend": legend, "mode": "lines" if line == 0 else "lines+markers",
            "line": {"color": colour, "width": line},
            "hovertemplate": name + ": %{y:.4f} at %{x:.2f} removed<extra></extra>"}


def _on(trace: dict, style: dict) -> dict:
    return P.on(trace, style["r"], style["c"], style["cols"])


def link_table(sources: Sequence[Any]) -> pd.DataFrame:
    """Per importance run, relation and direction: the Spearman over heads between attention accuracy and
    ablation importance (with its interval), and the most important head with its drop and attention
    accuracy in that direction."""
    rows = []
    for s in with_importance(sources):
        drop = drop_metric(s.importance)
        link = s.importance_link
        if drop is None or link is None or not len(link):
            continue
        abl = _heads(s.importance[(s.importance["method"] == ABLATION) & (s.importance["metric"] == drop)])
        top = abl.loc[abl.groupby("relation")["score"].idxmax().to_numpy()].set_index("relation")
        att, _ = attention_of(s, sources)
        acc = (att.set_index(["relation", "direction", "layer", "head"])["accuracy"] if att is not None
               else pd.Series(dtype=float))
        for r in link.itertuples(index=False):
            row = {"source": s.label, "relation": r.relation, "direction": r.direction, "n_heads": r.n_heads,
                   "rho": r.rho, "ci_low": r.ci_low, "ci_high": r.ci_high,
                   "ci_resampled": getattr(r, "ci_resampled", None),  # what the interval's bootstrap redraws
                   "p_adjusted": getattr(r, "p_adjusted", np.nan)}
            if r.relation in top.index:
                t = top.loc[r.relation]
                key = (r.relation, r.direction, int(t["layer"]), int(t["head"]))
                row.update({"most important": f"L{int(t['layer'])}H{int(t['head'])}", drop: t["score"],
                            "n": t["n"], "its attention accuracy": acc.get(key, np.nan)})
            rows.append(row)
    df = pd.DataFrame(rows)
    for col in ("ci_resampled", "p_adjusted"):
        if col in df.columns and df[col].isna().all():
            df = df.drop(columns=col)  # runs from before the column: no column of blanks
    if "n" not in df.columns:
        return df
    return df.sort_values(["source", "n"], ascending=[True, False], kind="stable").reset_index(drop=True)
