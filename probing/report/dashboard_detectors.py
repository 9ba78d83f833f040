"""The dashboard's head types: what kind of head each one is, from a heads run's detectors table.

A head's type is the detector it passes (adjusted test below ``heads.alpha``) with the largest gain of its
score over its null; a head that passes none has no type. Each source gets a layer x head map of that gain,
each cell labelled with its type, and the page a table of every typed head with its score, null, interval
and adjusted p-value.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

from probing.report import plotly_json as P
from probing.report.dashboard_figures import Fig, grid, shape_of

# the cell labels of the map: short enough for a 12-head row
SHORT = {"previous": "prev", "next": "next", "self": "self", "first": "first", "punctuation": "punct",
         "duplicate": "dup", "induction": "ind"}


def head_types(detectors: pd.DataFrame) -> pd.DataFrame:
    """One row per head that passes a detector: ``layer, head, type`` and that detector's ``score, null,
    gain, ci_low, ci_high, p_adjusted`` (the passing detector with the largest gain; ties: table order)."""
    d = detectors[detectors["passes"].astype("boolean").fillna(False).astype(bool)].copy()
    d["gain"] = d["score"] - d["null"]
    d = d.sort_values("gain", ascending=False, kind="stable").drop_duplicates(["layer", "head"])
    d = d.rename(columns={"detector": "type"}).sort_values(["layer", "head"])
    return d[["layer", "head", "type", "score", "null", "gain", "ci_low", "ci_high", "p_adjusted"]].reset_index(
        drop=True)


def type_figures(sources: Sequence[Any]) -> list[Fig]:
    """One figure: per source with a detectors table, the layer x head map of each head's type (its label)
    and gain over its null (colour); untyped heads are blank."""
    per = [(s, head_types(s.detectors), s.detectors) for s in sources
           if s.detectors is not None and len(s.detectors)]
    if not per:
        return []
    fig = P.grid_figure(1, len(per), [s.label for s, _, _ in per])
    for c, (s, typed, every) in enumerate(per, start=1):
        n_layers, n_heads = shape_of(every)
        z = grid(typed, "gain", n_layers, n_heads)
        label = np.full((n_layers, n_heads), "", dtype=object)
        custom = np.full((n_layers, n_heads, 4), "", dtype=object)
        for r in typed.itertuples(index=False):
            label[r.layer, r.head] = SHORT.get(r.type, r.type)
            custom[r.layer, r.head] = [r.type, f"{r.score:.3f}", f"{r.null:.3f}", f"{r.p_adjusted:.2g}"]
        trace = P.heatmap(z, "coloraxis", "L%{y} H%{x}<br>%{customdata[0]}: score %{customdata[1]}, null "
                                          "%{customdata[2]}<br>p adjusted %{customdata[3]}", custom)
        trace.update(text=label.tolist(), texttemplate="%{text}", textfont={"size": 9})
        fig["data"].append(P.on(trace, 1, c, len(per)))
    P.layer_head_axes(fig, 1, len(per), *shape_of(per[0][2]))
    fig["layout"].update(height=360, margin=dict(b=40, l=50, r=80, t=60),
                         coloraxis=P.coloraxis("Viridis", "gain", cmin=0))
    return [("head types", fig, len(per))]


def type_table(sources: Sequence[Any]) -> pd.DataFrame:
    """Every typed head of every source with a detectors table, the source first."""
    frames = [head_types(s.detectors).assign(source=s.label) for s in sources
              if s.detectors is not None and len(s.detectors)]
    if not frames:
        return pd.DataFrame()
    out = pd.concat(frames, ignore_index=True)
    return out[["source"] + [c for c in out.columns if c != "source"]]
