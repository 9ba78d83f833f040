"""Views of the inspector: an offline HTML page with a section per measure (the weights first) and bertviz pages
of the weights; the PNG grid of every head's map is drawn by :mod:`probing.figures.inspect`."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from probing.corpus import Sentence
from probing.report.html import figure_div, image_tag, render_template, write_page

log = logging.getLogger(__name__)


# what each measure's maps hold, for the page and the figures (probing.config.Measure says more)
MEASURE_NOTES = {
    "attention": "the attention weights α (rows sum to 1)",
    "norm": "α·‖f(x_j)‖ per head (Kobayashi et al. 2020); rows not renormalised",
    "norm_layer": "‖Σ_h α f^h(x_j)‖ per layer; rows not renormalised",
    "alti": "ALTI per layer (Ferrando et al. 2022); rows sum to 1",
    "globenc": "GlobEnc per layer (Modarressi et al. 2022); rows sum to 1",
    "value_zeroing": "value zeroing per layer (Mohebbi et al. 2023); rows sum to 1",
    "rollout": "rollout of the head-mean weights with 0.5·A + 0.5·I, layer 0 up to each layer",
    "alti_rollout": "rollout of ALTI, layer 0 up to each layer",
    "globenc_rollout": "rollout of GlobEnc, layer 0 up to each layer",
    "value_zeroing_rollout": "rollout of value zeroing, layer 0 up to each layer",
}


@dataclass(frozen=True)
class MeasureView:
    """One measure of one sentence: position-level maps ``(L, H, M, M)`` (``H`` = 1 when ``per_layer``),
    the choices they give, and the PNG grid (None when not drawn)."""

    measure: str
    maps: np.ndarray
    choices: Any  # probing.heads.choices.Choices
    per_layer: bool
    png: Optional[Path]

    @property
    def note(self) -> str:
        return MEASURE_NOTES.get(self.measure, self.measure)

    @property
    def vmax(self) -> float:
        """Top of the colour scale: 1 for the weights (comparable across heads and runs), else the largest
        value, since norms are unbounded and per-layer shares spread thin."""
        if self.measure == "attention":
            return 1.0
        top = float(np.nanmax(self.maps)) if self.maps.size else 1.0
        return top if top > 0 else 1.0


@dataclass(frozen=True)
class SentenceView:
    """One inspected sentence: position labels and every measure shown, the weights first."""

    index: int
    sentence: Sentence
    source: str
    labels: list[str]
    prefix: int
    measures: tuple[MeasureView, ...]
    # inspect.pair: the two words' positions and, per measure, (name, per_layer, every head ranked by the link)
    pair: Optional[tuple[int, int, tuple[tuple[str, bool, Any], ...]]] = None

    @property
    def weights(self) -> MeasureView:
        return next(m for m in self.measures if m.measure == "attention")


def _choices(view: SentenceView, mv: MeasureView) -> dict:
    """What the ``choices_table`` macro shows: one row per head (or layer), one cell per query word with the
    chosen position (a special token that wins is named, with the best word in parentheses)."""
    ch, words, labels, prefix = mv.choices, view.sentence.words, view.labels, view.prefix
    n_layers, n_heads, n = ch.word.shape
    heads = view.sentence.heads
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            cells = []
            for q in range(n):
                pos, wd = int(ch.position[layer, head, q]), int(ch.word[layer, head, q])
                text = words[wd] if pos - prefix == wd else f"{labels[pos]} ({words[wd]})"
                cls = "l gold" if ch.gold is not None and ch.gold[layer, head, q] else "l"
                cells.append({"text": text, "cls": cls, "weight": float(ch.weight[layer, head, q])})
            gold = f"{int(ch.gold[layer, head].sum())}/{n - 1}" if ch.gold is not None else None
            rows.append({"head": f"L{layer}" if mv.per_layer else f"L{layer} H{head}", "gold": gold, "cells": cells})
    return {"words": list(words), "has_gold": ch.gold is not None, "rows": rows,
            "value": "weight" if mv.measure == "attention" else mv.measure,
            "gold_words": None if heads is None else [words[h] if h >= 0 else "ROOT" for h in heads]}


def _head_view(view: SentenceView, mv: MeasureView) -> Any:
    """A plotly heatmap of one head's (or layer's) position-level map with a slider over all of them."""
    import plotly.graph_objects as go

    maps = np.asarray(mv.maps, dtype=np.float32)
    n_layers, n_heads, m, _ = maps.shape
    labels = view.labels
    # open on the map that picks the gold head most often (the first without a tree)
    gold = mv.choices.gold
    start = int(np.argmax(gold.sum(-1))) if gold is not None else 0
    l0, h0 = divmod(start, n_heads)

    def name(layer: int, head: int) -> tuple[str, str]:
        if mv.per_layer:
            return f"L{layer}", f"{mv.measure}, layer {layer}"
        return f"L{layer}H{head}", f"{mv.measure}, layer {layer}, head {head}"

    hover = [[f"{labels[q]} \u2192 {labels[k]}" for k in range(m)] for q in range(m)]
    fig = go.Figure(go.Heatmap(
        z=np.round(maps[l0, h0], 4).tolist(), x=list(range(m)), y=list(range(m)), text=hover,
        hovertemplate=f"%{{text}}<br>{mv.measure} %{{z:.3f}}<extra></extra>", colorscale="Blues", zmin=0,
        zmax=mv.vmax))
    steps = [dict(method="update", label=name(layer, head)[0],
                  args=[{"z": [np.round(maps[layer, head], 4).tolist()]}, {"title.text": name(layer, head)[1]}])
             for layer in range(n_layers) for head in range(n_heads)]
    ticks = dict(tickmode="array", tickvals=list(range(m)), ticktext=labels)
    fig.update_layout(
        title=dict(text=name(l0, h0)[1]), height=520, width=620, margin=dict(l=90, r=20, t=50, b=150),
        xaxis=dict(title="attended to (key)", side="bottom", **ticks),
        yaxis=dict(title="query", autorange="reversed", **ticks),
        sliders=[dict(active=start, steps=steps, currentvalue=dict(prefix="layer " if mv.per_layer else "head "),
                      pad=dict(t=70))])
    return fig


def _pair(view: SentenceView) -> Optional[dict]:
    """The pair's ranking for the page: a sortable table per measure of every head (or layer), ranked by the
    larger of the two weights, beside its positional expectation and its rank by the excess over it."""
    if view.pair is None:
        return None
    from probing.report.dashboard import table_data

    a, b, ranked = view.pair
    wa, wb = view.sentence.words[a], view.sentence.words[b]
    tables = []
    for name, per_layer, df in ranked:
        shown = pd.DataFrame({
            "rank": df["rank"], "head": [f"L{r.layer}" if per_layer else f"L{r.layer}H{r.head}" for r in df.itertuples()],
            f"{wa}->{wb}": df["weight_ab"], f"{wb}->{wa}": df["weight_ba"], f"rank of {wb} in {wa}'s row": df["rank_b_in_a"],
            f"positional {b - a:+d}": df["positional_ab"], f"positional {a - b:+d}": df["positional_ba"],
            "excess": df["excess"], "rank by excess": df["rank_excess"]})
        tables.append({"measure": name, "table": table_data(shown)})
    return {"title": f"Heads linking {wa} (#{a}) and {wb} (#{b})", "tables": tables,
            "note": (f"Every {'layer' if ranked and ranked[0][1] else 'head'} ranked by the larger of {wa}->{wb} and "
                     f"{wb}->{wa}; positional: its mean weight at the same offset over the sentence's words, so a "
                     "head that links any two words that far apart ranks high by weight but not by excess. Click "
                     "a column to sort.")}


def write_html(views: Sequence[SentenceView], path: Path, model_name: str) -> Path:
    """One offline page: per sentence and measure (the weights first) an interactive view, the PNG grid
    and the choices table, with links between the measures."""
    sentences = []
    for v in views:
        measures = [{"name": mv.measure, "note": mv.note, "anchor": f"s{v.index}-{mv.measure}",
                     "per_layer": mv.per_layer, "head_view": figure_div(_head_view(v, mv)),
                     "choices": _choices(v, mv),
                     "png": image_tag(mv.png, f"{mv.measure}: every map")
                     if mv.png is not None and Path(mv.png).is_file() else None}
                    for mv in v.measures]
        sentences.append({"index": v.index, "words": v.sentence.words, "source": v.source, "measures": measures,
                          "pair": _pair(v)})
    text = render_template("inspector.html.j2", title=f"probing inspector: {model_name}", model_name=model_name,
                           sentences=sentences)
    return write_page(path, text)


def write_bertviz(views: Sequence[SentenceView], out_dir: Path) -> list[Path]:
    """bertviz head and model views of the position-level maps. They load d3 and jQuery from cdnjs, so
    they render only online; failures are warnings."""
    try:
        import torch
        from bertviz import head_view, model_view
    except Exception as e:  # noqa: BLE001 - optional extra
        log.warning("bertviz views skipped (%s)", e)
        return []
    written = []
    for v in views:
        weights = v.weights.maps
        attention = [torch.from_numpy(np.asarray(weights[layer], dtype=np.float32))[None]
                     for layer in range(weights.shape[0])]
        for name, fn in (("head_view", head_view), ("model_view", model_view)):
            try:
                got = fn(attention, list(v.labels), html_action="return")
                doc = getattr(got, "data", got)
                written.append(write_page(out_dir / f"bertviz_{name}_{v.index}.html", str(doc)))
            except Exception as e:  # noqa: BLE001 - bertviz's API changes between versions
                log.warning("bertviz %s skipped (%s: %s)", name, type(e).__name__, e)
    return written
