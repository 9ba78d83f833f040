"""Dashboard figures of probes on representations: per-layer curves of the structural probes'
UUAS, DSpr, root accuracy and NSpr and of MDL codelengths, every source on the same axes (a random-init
model is a dashed line labelled so, the embedding layer a dotted level), and layer x head grids of a
structural probe on each head's output beside the attention accuracy of the same heads.

Builders return ``(title, figure, n_heatmaps)`` like :mod:`probing.report.dashboard_figures`.
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from probing import schema
from probing.config import Direction, Features, LabelSet, Measure, ProbeKind
from probing.report import plotly_json as P
from probing.report.dashboard_figures import Fig, grid

STRUCTURAL = (ProbeKind.distance.value, ProbeKind.depth.value)
# per-layer panels, in page order: (probe kind, metric); a control metric is drawn dotted beside its metric
LAYER_PANELS = ((ProbeKind.distance.value, "uuas"), (ProbeKind.distance.value, "dspr"),
                (ProbeKind.depth.value, "root_accuracy"), (ProbeKind.depth.value, "nspr"),
                (ProbeKind.relation.value, "codelength_bits"), (ProbeKind.relation.value, "compression"),
                (ProbeKind.edge.value, "codelength_bits"), (ProbeKind.edge.value, "compression"))
CONTROL = {"codelength_bits": "control_codelength_bits", "compression": "control_compression"}
# the grid of a structural probe per head: its headline metric
HEAD_METRIC = {k.value: schema.PROBE_HEADLINE[k] for k in (ProbeKind.distance, ProbeKind.depth)}
TREE_METHOD = "mst_undirected"  # the trees table's undirected tree: scored by UUAS, as the distance probe is
_RANDOM = re.compile(r"-random\d+$")  # probing.encoder.model_label of a model.random_init copy
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
_COLS = 3  # panels per row of the per-layer curves


def probe_rows(src: Any) -> Optional[pd.DataFrame]:
    """A source's probe rows with a ``kind``, a ``features`` (attention, hidden, heads) and a ``model``
    column, layer and head numeric (None: no probe rows). ``features`` is the rows' own column, else (run dirs
    written before it) their ``measure`` when it names vectors, else the swept ``probe.features``, else the
    run config's."""
    df = src.probes
    if df is None or not len(df):
        return None
    cfg_probe = src.config.get("probe") or {}
    kind = df["probe"].astype(str) if "probe" in df.columns else str(cfg_probe.get("kind", "probe"))
    vectors = {f.value for f in Features} - {Features.attention.value}
    if "features" in df.columns and df["features"].notna().any():
        features = df["features"].astype(str)
    elif "measure" in df.columns and df["measure"].notna().any():
        read = df["measure"].astype(str)
        features = read.where(read.isin(vectors), Features.attention.value)
    elif "probe.features" in df.columns:
        features = df["probe.features"].astype(str)
    else:
        features = str(cfg_probe.get("features", Features.attention.value))
    model = str((src.config.get("model") or {}).get("name"))
    if "model" in df.columns and df["model"].notna().any():
        model = df["model"].astype("string").fillna(model).astype(str)
    return df.assign(kind=kind, features=features, model=model,
                     layer=pd.to_numeric(df.get("layer"), errors="coerce"),
                     head=pd.to_numeric(df.get("head"), errors="coerce"),
                     value=pd.to_numeric(df["value"], errors="coerce"))


def is_random_init(src: Any, model: str) -> bool:
    """A random-weights baseline (``model.random_init=true``): its model label or its run config says so."""
    return bool(_RANDOM.search(model)) or bool((src.config.get("model") or {}).get("random_init"))


def _lines(sources: Sequence[Any]) -> list[tuple[str, bool, pd.DataFrame]]:
    """``(name, random_init, rows)`` per source x model x features of per-layer jobs (head unset)."""
    out = []
    for s in sources:
        df = probe_rows(s)
        if df is None:
            continue
        df = df[df["layer"].notna() & df["head"].isna()]
        for (model, features), part in df.groupby(["model", "features"], sort=False):
            random = is_random_init(s, str(model))
            name = ("random init: " if random else "") + s.label + ("" if features == "hidden" else f" · {features}")
            out.append((name, random, part))
    return out


def layer_figures(sources: Sequence[Any]) -> list[Fig]:
    """Per-layer curves of the structural probes and MDL codelengths: a panel per probe kind x metric, a
    line per source (a random-init model dashed, ``random init:``), the control task's codelength dotted,
    and a trained model's embedding layer (``hidden`` layer 0) as a dotted level across the layers."""
    lines = _lines(sources)
    panels = [p for p in LAYER_PANELS
              if any(((df["kind"] == p[0]) & (df["metric"] == p[1])).any() for _, _, df in lines)]
    if not panels:
        return []
    rows = -(-len(panels) // _COLS)
    cols = min(len(panels), _COLS)
    titles = [f"{m} (probe={k})" for k, m in panels] + [""] * (rows * cols - len(panels))
    fig = P.grid_figure(rows, cols, titles, horizontal_spacing=0.07, vertical_spacing=0.16)
    shown: set[str] = set()
    for k, (kind, metric) in enumerate(panels):
        r, c = divmod(k, cols)
        for i, (name, random, df) in enumerate(lines):
            colour = _COLOURS[i % len(_COLOURS)]
            for m, dash, label in ((metric, "dash" if random else "solid", name),
                                   (CONTROL.get(metric), "dot", f"{name} · control task")):
                pts = df[(df["kind"] == kind) & (df["metric"] == m)].groupby("layer")["value"].mean().sort_index()
                if m is None or not len(pts):
                    continue
                fig["data"].append(P.on(_line(pts.index, pts.to_numpy(), label, colour, dash, label not in shown),
                                        r + 1, c + 1, cols))
                shown.add(label)
                if m == metric and not random and df["features"].iloc[0] == Features.hidden.value and 0 in pts.index:
                    layers = [float(df["layer"].min()), float(df["layer"].max())]
                    emb = f"{name} · embedding layer (layer 0)"
                    fig["data"].append(P.on(_line(layers, [float(pts.loc[0])] * 2, emb, colour, "dot",
                                                  emb not in shown, mode="lines", width=1), r + 1, c + 1, cols))
                    shown.add(emb)
        axis = k + 1
        fig["layout"]["xaxis" if axis == 1 else f"xaxis{axis}"].update(title={"text": "layer"}, dtick=1)
    fig["layout"].update(height=330 * rows + 60, margin=dict(b=40, l=60, r=30, t=60),
                         legend={"orientation": "h", "y": -0.12 / rows})
    return [("probes on representations: per-layer scores against the random-init and embedding-layer "
             "baselines", fig, 0)]


def _line(x: Sequence[float], y: Sequence[float], name: str, colour: str, dash: str, legend: bool,
          mode: str = "lines+markers", width: float = 2) -> dict:
    return {"type": "scatter", "x": [float(v) for v in x], "y": [float(v) for v in y], "mode": mode, "name": name,
            "legendgroup": name, "showlegend": legend, "line": {"dash": dash, "color": colour, "width": width},
            "hovertemplate": f"{name}<br>layer %{{x}}: %{{y:.4f}}<extra></extra>"}


def _attention_grids(model: str, kind: str, sources: Sequence[Any]
                     ) -> tuple[Optional[Any], list[tuple[str, pd.DataFrame, str]]]:
    """The heads source of ``model`` and its grids of the same heads: attention accuracy over all relations
    per direction, and for the distance probe the UUAS of the undirected spanning tree decoded from each
    head's attention (its ``trees`` table), as ``(title, rows, value column)``."""
    for s in sources:
        h = s.heads
        if h is None or not len(h) or ("model" in h.columns and str(h["model"].iloc[0]) != model):
            continue
        h = _attention_only(h[h["relation"] == schema.ALL])
        if "label_set" in h.columns:
            h = h[h["label_set"] == LabelSet.as_is.value]
        got = [(f"attention accuracy (all relations, {d.value})", h[h["direction"] == d.value], "accuracy")
               for d in Direction if (h["direction"] == d.value).any()]
        t = _attention_only(s.trees) if s.trees is not None else None
        if kind == ProbeKind.distance.value and t is not None:
            t = t[(t["method"].astype(str) == TREE_METHOD) & t["head"].notna()]
            if len(t) and "uuas" in t.columns:
                got.append(("UUAS of its attention's spanning tree", t, "uuas"))
        if got:
            return s, got
    return None, []


def _attention_only(df: pd.DataFrame) -> pd.DataFrame:
    if "features" in df.columns:
        return df[df["features"].astype(str) == Features.attention.value]
    return df[df["measure"].astype(str) == Measure.attention.value] if "measure" in df.columns else df


def head_figures(sources: Sequence[Any]) -> list[Fig]:
    """Per source and structural probe kind with per-head jobs: the layer x head grid of its headline
    metric (UUAS, root accuracy) from each head's output vectors, beside the attention accuracy (all
    relations, each direction) of the same heads from a heads run of the same model in the page, and for
    the distance probe the UUAS of the tree decoded from each head's attention; the Spearman correlation
    over heads in each attention panel's title."""
    out: list[Fig] = []
    for s in sources:
        df = probe_rows(s)
        if df is None:
            continue
        df = df[df["layer"].notna() & df["head"].notna() & df["kind"].isin(STRUCTURAL)]
        for (kind, model), part in df.groupby(["kind", "model"], sort=False):
            metric = HEAD_METRIC[str(kind)]
            probe = part[part["metric"] == metric].groupby(["layer", "head"], as_index=False)["value"].mean()
            if not len(probe):
                continue
            heads_src, att = _attention_grids(str(model), str(kind), sources)
            shape = tuple(max(v) for v in zip(*[(int(t["layer"].max()) + 1, int(t["head"].max()) + 1)
                                                for t in [probe] + [a for _, a, _ in att]]))
            z = grid(probe, "value", *shape)
            titles = [f"{s.label}<br>{metric} of a probe on the head's output<br> "]
            grids = []
            for title, a, col in att:
                other = grid(a, col, *shape)
                both = np.isfinite(z) & np.isfinite(other)
                rho = (f"<br>ρ with {metric} {spearmanr(z[both], other[both])[0]:.2f} ({int(both.sum())} heads)"
                       if both.sum() > 2 else "")
                titles.append(f"{heads_src.label}<br>{title}{rho}")
                grids.append((other, col))
            fig = P.grid_figure(1, 1 + len(grids), titles, horizontal_spacing=0.09)
            fig["data"].append(P.on(P.heatmap(z, "coloraxis", f"L%{{y}} H%{{x}}<br>{metric} %{{z:.3f}}"), 1, 1,
                                    1 + len(grids)))
            for c, (other, col) in enumerate(grids, start=2):
                name = "attention accuracy" if col == "accuracy" else "attention tree UUAS"
                fig["data"].append(P.on(P.heatmap(other, "coloraxis2", f"L%{{y}} H%{{x}}<br>{name} %{{z:.3f}}"),
                                        1, c, 1 + len(grids)))
            P.layer_head_axes(fig, 1, 1 + len(grids), *shape)
            fig["layout"].update(height=400, margin=dict(b=40, l=50, r=80, t=100),
                                 coloraxis=P.coloraxis("Viridis", metric[:8], P.bar_right_of(fig, 1), cmin=0),
                                 coloraxis2=P.coloraxis("Viridis", "attention", dict(len=0.9), cmin=0))
            for a in fig["layout"].get("annotations", []):
                a["font"] = {**a.get("font", {}), "size": 11}
            note = "" if grids else " (no heads run of this model in the page: attention accuracy not shown)"
            out.append((f"probe={kind} on each head's output: {metric} per head{note}", fig, 1 + len(grids)))
    return out
