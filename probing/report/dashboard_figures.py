"""Plotly figures of the dashboard: sources side by side in every figure, one colour scale per row.

Each builder returns ``(title, figure, n_heatmaps)`` tuples; the page counts the heatmaps it expects. The
figures are plotly JSON dicts built with :mod:`probing.report.plotly_json` (no figure objects: they cost
seconds per run).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from probing import schema
from probing.config import Direction, LabelSet, ProbeKind
from probing.report import plotly_json as P

Fig = tuple[str, Any, int]

LABEL_SETS = tuple(s.value for s in LabelSet)
DIRECTIONS = tuple(d.value for d in Direction)
# A probe's main score comes first (relation: accuracy, arc: UAS, edge: ROC AUC); the best head of a layer is
# the one with the highest main score.
PROBE_PRIMARY = tuple(schema.PROBE_HEADLINE.values())
# drawn by probing.report.dashboard_probes instead: structural probes, and codelengths (bits: not on a 0-1 axis)
OWN_FIGURES = (ProbeKind.distance.value, ProbeKind.depth.value)
NOT_ON_SCORE_AXIS = ("codelength_bits", "compression")


def grid(df: pd.DataFrame, value: str, n_layers: int, n_heads: int) -> np.ndarray:
    """``(n_layers, n_heads)`` array of ``df[value]`` indexed by its layer and head columns (NaN elsewhere)."""
    out = np.full((n_layers, n_heads), np.nan)
    layer = df["layer"].to_numpy(dtype=int)
    head = df["head"].to_numpy(dtype=int)
    out[layer, head] = pd.to_numeric(df[value], errors="coerce").to_numpy(dtype=float)
    return out


def anchor(text: str) -> str:
    """The page anchor of a figure titled ``text`` (the overview links to it)."""
    return "h-" + "".join(c if c.isalnum() else "-" for c in text)


def heads_title(relation: str, label_set: str) -> str:
    """The title of a relation's heads figure (and, through :func:`anchor`, its anchor)."""
    return f"{relation} ({label_set})"


def shape_of(df: pd.DataFrame) -> tuple[int, int]:
    return int(df["layer"].max()) + 1, int(df["head"].max()) + 1


def _relation_order(frames: Sequence[pd.DataFrame]) -> list[str]:
    """Relations, most frequent first (by their largest count ``n`` in any source)."""
    counts: dict[str, float] = {}
    for df in frames:
        per = df.groupby("relation")["n"].max() if "n" in df.columns else df.groupby("relation").size()
        for rel, n in per.items():
            counts[rel] = max(counts.get(rel, 0.0), float(n))
    return sorted(counts, key=lambda r: (-counts[r], r))


def heads_figures(sources: Sequence[Any]) -> list[Fig]:
    """One figure per label set x relation: rows accuracy and gain over the best positional baseline,
    columns direction x source (sources of different measures side by side, each column titled by its
    measure). Base-label relations identical to an as-is relation are not repeated."""
    with_heads = [s for s in sources if s.heads is not None and len(s.heads)]
    if not with_heads:
        return []
    out: list[Fig] = []
    as_is_n: dict[str, tuple] = {}
    shapes = {id(s): shape_of(s.heads) for s in with_heads}
    for label_set in LABEL_SETS + tuple(sorted({ls for s in with_heads for ls in _label_sets(s.heads)}
                                               - set(LABEL_SETS))):
        frames = [(s, _label_set(s.heads, label_set)) for s in with_heads]
        frames = [(s, df) for s, df in frames if len(df)]
        if not frames:
            continue
        for rel in _relation_order([df for _, df in frames]):
            per = [(s, df[df["relation"] == rel]) for s, df in frames]
            per = [(s, df) for s, df in per if len(df)]
            signature = tuple((s.label, int(df["n"].sum()) if "n" in df else len(df), round(df["accuracy"].sum(), 6))
                              for s, df in per)
            if label_set == "as_is":
                as_is_n[rel] = signature
            elif as_is_n.get(rel) == signature:
                continue  # the base label equals the as-is label here: same numbers, not shown twice
            dirs = [d for d in DIRECTIONS if any((df["direction"] == d).any() for _, df in per)]
            dirs += sorted({d for _, df in per for d in df["direction"].unique()} - set(dirs))
            has_base = all("baseline_accuracy" in df.columns for _, df in per)
            metrics = ["accuracy"] + (["gain over baseline"] if has_base else [])
            cols = [(d, s, df[df["direction"] == d]) for d in dirs for s, df in per]
            cols = [c for c in cols if len(c[2])]
            titles = [f"{s.label}<br>{d} · {m}" for m in metrics for d, s, _ in cols]
            fig = P.grid_figure(len(metrics), len(cols), titles, horizontal_spacing=0.03, vertical_spacing=0.12)
            count = 0
            cells = [_head_cells(df, shapes[id(s)]) for _, s, df in cols]  # per column, for both rows
            for r, metric in enumerate(metrics, start=1):
                for c, (d, s, df) in enumerate(cols, start=1):
                    acc, extra = cells[c - 1]
                    z = acc if metric == "accuracy" else acc - extra[3]
                    hover = ("L%{y} H%{x}<br>" + metric + " %{z:.3f}<br>accuracy %{customdata[7]:.3f} "
                             "[%{customdata[0]:.3f}, %{customdata[1]:.3f}]<br>n %{customdata[2]}<br>"
                             "baseline %{customdata[3]:.3f} (offset %{customdata[4]})"
                             + ("<br>gain CI [%{customdata[5]:.3f}, %{customdata[6]:.3f}]"
                                if "gain_ci_low" in df.columns else ""))
                    custom = np.round(np.stack(extra + [acc], axis=-1), 4)
                    fig["data"].append(P.on(P.heatmap(z, "coloraxis" if r == 1 else "coloraxis2", hover, custom),
                                           r, c, len(cols)))
                    count += 1
            P.layer_head_axes(fig, len(metrics), len(cols), *shapes[id(per[0][0])])
            layout = fig["layout"]
            layout.update(
                height=300 * len(metrics) + 40, margin=dict(b=40, l=50, r=80, t=70),
                coloraxis=P.coloraxis("Viridis", "acc", dict(len=0.9 / len(metrics), y=1, yanchor="top"), cmax=1,
                                     cmin=0),
                coloraxis2=P.coloraxis("RdBu", "gain", dict(len=0.45, y=0, yanchor="bottom"), cmid=0,
                                      reversescale=True))
            for a in layout.get("annotations", []):
                a["font"] = {**a.get("font", {}), "size": 11}
            out.append((heads_title(rel, label_set), fig, count))
    return out


def _head_cells(df: pd.DataFrame, shape: tuple[int, int]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The accuracy grid of one heatmap and the grids its hover shows (NaN for a column the table lacks)."""
    acc = grid(df, "accuracy", *shape)
    extra = [grid(df, col, *shape) if col in df.columns else np.full_like(acc, np.nan)
             for col in ("ci_low", "ci_high", "n", "baseline_accuracy", "baseline_offset", "gain_ci_low",
                         "gain_ci_high")]
    return acc, extra


def _label_sets(df: pd.DataFrame) -> list[str]:
    return list(df["label_set"].unique()) if "label_set" in df.columns else ["as_is"]


def _label_set(df: pd.DataFrame, label_set: str) -> pd.DataFrame:
    if "label_set" not in df.columns:
        return df if label_set == "as_is" else df.iloc[0:0]
    return df[df["label_set"] == label_set]


HELD_OUT_SHOWN = ("held_out_head", "held_out_accuracy", "held_out_gain", "held_out_gain_ci_low", "held_out_gain_ci_high", "p_adjusted",
                  "beats_baseline")


def best_heads(sources: Sequence[Any]) -> pd.DataFrame:
    """Per source, label set, relation and direction: the head with the highest accuracy; where the run
    selected and scored heads on different sentences (its best_heads table), the held-out figures of the
    relation's chosen head come first, the in-sample maximum after them."""
    rows = []
    for s in sources:
        if s.heads is None or not len(s.heads):
            continue
        df = s.heads.copy()
        if "label_set" not in df.columns:
            df["label_set"] = LabelSet.as_is.value
        best = schema.best_heads(df, per=schema.BEST_PER + ("direction",))
        best = best.sort_values("label_set", key=lambda c: c != LabelSet.as_is.value, kind="stable")
        # a base label that collapsed nothing repeats its as-is row: keep the as-is one
        same = ["relation", "direction", "layer", "head"] + [c for c in ("n", "accuracy") if c in best.columns]
        best = best[~(best.duplicated(same, keep="first") & (best["label_set"] != "as_is"))]
        best.insert(0, "source", s.label)
        if "measure" not in best.columns or best["measure"].isna().all():
            best["measure"] = s.measure
        if "baseline_accuracy" in best.columns:
            best["gain"] = best["accuracy"] - best["baseline_accuracy"]
        rows.append(_with_held_out(best, s.best))
    if not rows:
        return pd.DataFrame()
    keep = ["source", "measure", "label_set", "relation", "direction", "layer", "head", *HELD_OUT_SHOWN, "accuracy",
            "ci_low", "ci_high", "n", "baseline_offset", "baseline_accuracy", "gain", "gain_ci_low", "gain_ci_high"]
    df = pd.concat(rows, ignore_index=True)
    df = df[[c for c in keep if c in df.columns and not (c in HELD_OUT_SHOWN and df[c].isna().all())]]
    if df["measure"].isna().all():
        df = df.drop(columns="measure")  # runs from before measures: no column of blanks
    sort = ["n", "accuracy"] if "n" in df.columns else ["accuracy"]
    return df.sort_values(sort, ascending=False, kind="stable").reset_index(drop=True)


def _with_held_out(best: pd.DataFrame, chosen: Optional[pd.DataFrame]) -> pd.DataFrame:
    """``best`` with the held-out columns of ``chosen`` (a best_heads table: per relation, the in-sample best
    head's row with the held-out figures of the head(s) chosen on other sentences, ``held_out_heads``) on the
    row of that relation and direction (blank elsewhere, and everywhere for a run without held-out figures)."""
    if chosen is None or chosen["held_out_accuracy"].isna().all():
        return best
    on = ["label_set", "relation", "direction"]
    picked = chosen.rename(columns={"held_out_heads": "held_out_head"}).astype({"direction": str})
    cols = [c for c in HELD_OUT_SHOWN if c in picked.columns]
    return best.merge(picked[on + cols], on=on, how="left")


def probe_figures(sources: Sequence[Any]) -> list[Fig]:
    """Probe accuracy per layer with control accuracy and selectivity (lines), and layer x head heatmaps
    of accuracy and selectivity for per-head jobs; one figure per probe kind, sources side by side
    (structural probes and codelengths: :mod:`probing.report.dashboard_probes`)."""
    out: list[Fig] = []
    with_probes = [s for s in sources if s.probes is not None and len(s.probes)]
    kinds = sorted({str(k) for s in with_probes for k in (s.probes["probe"].dropna().unique()
                                                         if "probe" in s.probes.columns else ["probe"])}
                   - set(OWN_FIGURES))
    for kind in kinds:
        per = _probe_rows(with_probes, kind)
        if not per:
            continue
        metrics = [m for m in schema.PROBE_SHOWN
                   if m not in NOT_ON_SCORE_AXIS and any((df["metric"] == m).any() for _, df in per)]
        if not metrics or metrics[0] not in PROBE_PRIMARY:
            continue  # no score to plot
        lines = _probe_lines(per, metrics)
        out.append((f"probe={kind}: accuracy, control and selectivity per layer", lines, 0))
        heat = [(s, df[df["layer"].notna() & df["head"].notna()]) for s, df in per]
        heat = [(s, df) for s, df in heat if len(df)]
        hm = [m for m in PROBE_PRIMARY + ("selectivity",) if any((df["metric"] == m).any() for _, df in heat)]
        if heat and hm:
            fig, count = _probe_heatmaps(heat, hm)
            out.append((f"probe={kind}: one probe per head", fig, count))
    return out


def _probe_rows(with_probes: Sequence[Any], kind: str) -> list[tuple[Any, pd.DataFrame]]:
    """Per source, its rows of probe ``kind`` with numeric layer, head and value (none: source left out)."""
    per = []
    for s in with_probes:
        df = s.probes
        df = df[df["probe"].astype(str) == kind] if "probe" in df.columns else df
        df = df.assign(layer=pd.to_numeric(df.get("layer"), errors="coerce"),
                       head=pd.to_numeric(df.get("head"), errors="coerce"),
                       value=pd.to_numeric(df["value"], errors="coerce"))
        if len(df):
            per.append((s, df))
    return per


def _probe_lines(per: Sequence[tuple[Any, pd.DataFrame]], metrics: Sequence[str]) -> dict:
    """One panel per source of per-layer lines: per-layer jobs as they are; per-head jobs as the best head of
    each layer (by the first headline metric), all its numbers from that same head; a job over all heads
    as a horizontal line."""
    fig = P.grid_figure(1, len(per), [s.label for s, _ in per], shared_yaxes=True)
    for c, (s, df) in enumerate(per, start=1):
        layer_jobs = df[df["layer"].notna() & df["head"].isna()]
        head_jobs = _best_head_per_layer(df[df["layer"].notna() & df["head"].notna()], metrics)
        for i, m in enumerate(metrics):
            if len(layer_jobs[layer_jobs["metric"] == m]):
                pts, how = layer_jobs[layer_jobs["metric"] == m].groupby("layer")["value"].mean(), "layer"
            elif len(head_jobs[head_jobs["metric"] == m]):
                pts, how = head_jobs[head_jobs["metric"] == m].groupby("layer")["value"].mean(), "best head"
            else:
                continue
            fig["data"].append(P.on({
                "type": "scatter", "x": pts.index.tolist(), "y": pts.to_numpy().tolist(),
                "mode": "lines+markers", "name": f"{m} ({how})", "legendgroup": m, "showlegend": c == 1,
                "line": {"dash": "dot" if "control" in m else "solid"},
                "marker": {"color": _COLOURS[i % len(_COLOURS)]}}, 1, c, len(per)))
        everything = df[df["layer"].isna() & df["head"].isna()]
        for m in ("accuracy", "selectivity"):
            v = everything[everything["metric"] == m]["value"]
            if len(v):
                P.hline(fig, float(v.iloc[0]), c, f"all heads: {m} {float(v.iloc[0]):.3f}")
        x = fig["layout"]["xaxis" if c == 1 else f"xaxis{c}"]
        x.update(title={"text": "layer"}, dtick=1)
    fig["layout"].update(height=360, margin=dict(b=40, l=50, r=30, t=60))
    return fig


def _probe_heatmaps(heat: Sequence[tuple[Any, pd.DataFrame]], hm: Sequence[str]) -> tuple[dict, int]:
    """Layer x head heatmaps of the per-head jobs, a row per metric of ``hm`` and a column per source, and
    how many heatmaps it holds."""
    fig = P.grid_figure(len(hm), len(heat), [f"{s.label} · {m}" for m in hm for s, _ in heat])
    count = 0
    for r, m in enumerate(hm, start=1):
        for c, (s, df) in enumerate(heat, start=1):
            sub = df[df["metric"] == m].groupby(["layer", "head"], as_index=False)["value"].mean()
            if not len(sub):
                continue
            z = grid(sub, "value", *shape_of(sub))
            axis = "coloraxis2" if m == "selectivity" else "coloraxis"
            trace = P.heatmap(z, axis, f"L%{{y}} H%{{x}}<br>{m} %{{z:.3f}}")
            fig["data"].append(P.on(trace, r, c, len(heat)))
            count += 1
    P.layer_head_axes(fig, len(hm), len(heat), *shape_of(heat[0][1]))
    fig["layout"].update(height=300 * len(hm) + 40, margin=dict(b=40, l=50, r=80, t=60),
                         coloraxis=P.coloraxis("Viridis", "acc", dict(len=0.45, y=1, yanchor="top")),
                         coloraxis2=P.coloraxis("RdBu", "sel.", dict(len=0.45, y=0, yanchor="bottom"), cmid=0,
                                                reversescale=True))
    return fig, count


def _best_head_per_layer(df: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """The rows of the head with the highest first headline metric in each layer."""
    if not len(df) or not metrics:
        return df.iloc[0:0]
    key = df[df["metric"] == metrics[0]].groupby(["layer", "head"], as_index=False)["value"].mean()
    if not len(key):
        return df.iloc[0:0]
    best = key.loc[key.groupby("layer")["value"].idxmax().to_numpy(), ["layer", "head"]]
    return df.merge(best, on=["layer", "head"])


_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def pattern_figures(sources: Sequence[Any]) -> list[Fig]:
    """One figure per attention-pattern metric (attention to [CLS], [SEP], punctuation, next/previous
    word, entropy...): layer x head heatmaps, sources side by side."""
    per = [s for s in sources if s.patterns is not None and len(s.patterns)]
    metrics: list[str] = []
    for s in per:
        metrics += [m for m in s.patterns["metric"].astype(str).unique() if m not in metrics]
    out: list[Fig] = []
    for m in metrics:
        cols = [(s, s.patterns[s.patterns["metric"].astype(str) == m]) for s in per]
        cols = [(s, df.groupby(["layer", "head"], as_index=False)["value"].mean()) for s, df in cols if len(df)]
        if all(df["value"].nunique(dropna=True) <= 1 for _, df in cols):
            continue  # the same for every head (e.g. the entropy of uniform attention): nothing to compare
        fig = P.grid_figure(1, len(cols), [s.label for s, _ in cols])
        for c, (s, df) in enumerate(cols, start=1):
            fig["data"].append(P.on(P.heatmap(grid(df, "value", *shape_of(df)), "coloraxis",
                                            f"L%{{y}} H%{{x}}<br>{m} %{{z:.3f}}"), 1, c, len(cols)))
        P.layer_head_axes(fig, 1, len(cols), *shape_of(cols[0][1]))
        fig["layout"].update(height=330, margin=dict(b=40, l=50, r=80, t=60),
                             coloraxis=P.coloraxis("Magma", m[:8], reversescale=True))
        out.append((f"pattern: {m}", fig, len(cols)))
    return out


def mds_figures(sources: Sequence[Any]) -> list[Fig]:
    """The MDS embedding of heads (from the analysis's head distances), coloured by layer."""
    per = [s for s in sources if s.mds is not None and len(s.mds)]
    if not per:
        return []
    fig = P.grid_figure(1, len(per), [s.label for s in per])
    for c, s in enumerate(per, start=1):
        df = s.mds
        fig["data"].append(P.on({
            "type": "scatter", "x": df["x"].tolist(), "y": df["y"].tolist(), "mode": "markers+text",
            "text": [f"{int(a)}-{int(b)}" for a, b in zip(df["layer"], df["head"])],
            "textposition": "top center", "textfont": {"size": 8},
            "marker": {"color": df["layer"].tolist(), "colorscale": [list(v) for v in P.colorscale("Viridis")],
                       "size": 9, "showscale": c == 1, "colorbar": {"title": {"text": "layer"}}},
            "hovertemplate": "L%{customdata[0]} H%{customdata[1]}<extra></extra>",
            "customdata": df[["layer", "head"]].to_numpy().tolist(), "showlegend": False}, 1, c, len(per)))
    fig["layout"].update(height=520, margin=dict(b=40, l=40, r=40, t=60))
    return [("MDS of heads (label: layer-head)", fig, 0)]


def tree_figures(sources: Sequence[Any]) -> list[Fig]:
    """UAS of the trees decoded from each head's attention (one figure per decoding method and direction),
    sources side by side; hover shows the left/right-branching baselines."""
    per = [s for s in sources if s.trees is not None and len(s.trees)]
    keys: list[tuple[str, str]] = []
    for s in per:
        for k in s.trees[["method", "direction"]].astype(str).drop_duplicates().itertuples(index=False):
            if tuple(k) not in keys:
                keys.append(tuple(k))
    out: list[Fig] = []
    for method, direction in keys:
        cols = [(s, s.trees[(s.trees["method"].astype(str) == method) & (s.trees["direction"].astype(str) == direction)
                            & s.trees["head"].notna()]) for s in per]
        cols = [(s, df) for s, df in cols if len(df)]
        if not cols:
            continue
        # undirected trees have no UAS (no arc direction to get right): their score is the UUAS
        score = "uas" if any(pd.to_numeric(df["uas"], errors="coerce").notna().any() for _, df in cols) else "uuas"
        if score not in cols[0][1].columns:
            continue
        fig = P.grid_figure(1, len(cols), [s.label for s, _ in cols])
        for c, (s, df) in enumerate(cols, start=1):
            shape = shape_of(df)
            extra = [grid(df, col, *shape) if col in df.columns else np.full(shape, np.nan)
                     for col in (f"left_branching_{score}", f"right_branching_{score}")]
            hover = (f"L%{{y}} H%{{x}}<br>{score.upper()} %{{z:.3f}}<br>left-branching %{{customdata[0]:.3f}}, "
                     "right-branching %{customdata[1]:.3f}")
            fig["data"].append(P.on(P.heatmap(grid(df, score, *shape), "coloraxis", hover,
                                            np.round(np.stack(extra, axis=-1), 4)), 1, c, len(cols)))
        P.layer_head_axes(fig, 1, len(cols), *shape_of(cols[0][1]))
        fig["layout"].update(height=330, margin=dict(b=40, l=50, r=80, t=60),
                             coloraxis=P.coloraxis("Viridis", score.upper(), cmin=0))
        out.append((f"trees: {method}, {direction} ({score.upper()})", fig, len(cols)))
    return out
