"""Views of the inspector: a PNG grid of every head's word-level map, an offline HTML page, bertviz pages."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from probing.corpus import Sentence
from probing.report.html import figure_div, image_tag, render_template, write_page

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SentenceView:
    """One inspected sentence: position labels, position-level maps ``(L, H, M, M)`` and the head choices."""

    index: int
    sentence: Sentence
    source: str
    labels: list[str]
    prefix: int
    maps: np.ndarray
    choices: Any  # probing.analysis.choices.Choices
    png: Optional[Path]


def png_grid(maps: np.ndarray, prefix: int, words: Sequence[str], choices: Any, path: Path, title: str) -> Path:
    """Every head's word-level map (rows: query word, columns: attended word) in a layers x heads grid.

    With a gold tree, a red dot marks the cells where the head's most-attended word is the gold head.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_layers, n_heads = maps.shape[:2]
    n = len(words)
    w = np.asarray(maps, dtype=np.float32)[:, :, prefix:prefix + n, prefix:prefix + n]
    cell = 0.5 + 0.12 * n  # inches per panel: room for 7-point word labels
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(cell * n_heads + 0.6, cell * n_layers + 0.8),
                             squeeze=False, gridspec_kw={"wspace": 0.05, "hspace": 0.12})
    gold = choices.gold
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer, head]
            image = ax.imshow(w[layer, head], cmap="Blues", vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if gold is not None:
                hit = np.flatnonzero(gold[layer, head])
                ax.scatter(choices.word[layer, head, hit], hit, s=4, c="#d62728", marker="o", linewidths=0)
                ax.set_title(f"L{layer} H{head}  {len(hit)}/{n - 1}", fontsize=6, pad=1.5)
            else:
                ax.set_title(f"L{layer} H{head}", fontsize=6, pad=1.5)
            if head == 0:
                ax.set_yticks(range(n))
                ax.set_yticklabels(words, fontsize=7)
            if layer == n_layers - 1:
                ax.set_xticks(range(n))
                ax.set_xticklabels(words, fontsize=7, rotation=90)
    fig.colorbar(image, ax=axes, fraction=0.012, pad=0.01, label="attention weight (word level)")
    fig.suptitle(title + ("  (red dot: most-attended word is the gold head)" if gold is not None else ""),
                 fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path


def _choices(view: SentenceView) -> dict:
    """What the ``choices_table`` macro shows: one row per head, one cell per query word with the chosen
    position (a special token that wins is named, with the best word in parentheses)."""
    ch, words, labels, prefix = view.choices, view.sentence.words, view.labels, view.prefix
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
            rows.append({"head": f"L{layer} H{head}", "gold": gold, "cells": cells})
    return {"words": list(words), "has_gold": ch.gold is not None, "rows": rows,
            "gold_words": None if heads is None else [words[h] if h >= 0 else "ROOT" for h in heads]}


def _head_view(view: SentenceView) -> Any:
    """A plotly heatmap of one head's position-level map with a slider over all layers and heads."""
    import plotly.graph_objects as go

    maps = np.asarray(view.maps, dtype=np.float32)
    n_layers, n_heads, m, _ = maps.shape
    labels = view.labels
    # open on the head that picks the gold head most often (L0 H0 without a tree)
    gold = view.choices.gold
    start = int(np.argmax(gold.sum(-1))) if gold is not None else 0
    l0, h0 = divmod(start, n_heads)
    hover = [[f"{labels[q]} \u2192 {labels[k]}" for k in range(m)] for q in range(m)]
    fig = go.Figure(go.Heatmap(
        z=np.round(maps[l0, h0], 4).tolist(), x=list(range(m)), y=list(range(m)), text=hover,
        hovertemplate="%{text}<br>weight %{z:.3f}<extra></extra>", colorscale="Blues", zmin=0, zmax=1))
    steps = [dict(method="update", label=f"L{layer}H{head}",
                  args=[{"z": [np.round(maps[layer, head], 4).tolist()]},
                        {"title.text": f"layer {layer}, head {head}"}])
             for layer in range(n_layers) for head in range(n_heads)]
    ticks = dict(tickmode="array", tickvals=list(range(m)), ticktext=labels)
    fig.update_layout(
        title=dict(text=f"layer {l0}, head {h0}"), height=520, width=620, margin=dict(l=90, r=20, t=50, b=150),
        xaxis=dict(title="attended to (key)", side="bottom", **ticks),
        yaxis=dict(title="query", autorange="reversed", **ticks),
        sliders=[dict(active=start, steps=steps, currentvalue=dict(prefix="head "), pad=dict(t=70))])
    return fig


def write_html(views: Sequence[SentenceView], path: Path, model_name: str) -> Path:
    """One offline page: per sentence the choices table, an interactive head view, and the PNG grid."""
    sentences = [{"index": v.index, "words": v.sentence.words, "source": v.source,
                  "head_view": figure_div(_head_view(v)), "choices": _choices(v),
                  "png": image_tag(v.png, "all heads") if v.png is not None and Path(v.png).is_file() else None}
                 for v in views]
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
        attention = [torch.from_numpy(np.asarray(v.maps[layer], dtype=np.float32))[None]
                     for layer in range(v.maps.shape[0])]
        for name, fn in (("head_view", head_view), ("model_view", model_view)):
            try:
                got = fn(attention, list(v.labels), html_action="return")
                doc = getattr(got, "data", got)
                written.append(write_page(out_dir / f"bertviz_{name}_{v.index}.html", str(doc)))
            except Exception as e:  # noqa: BLE001 - bertviz's API changes between versions
                log.warning("bertviz %s skipped (%s: %s)", name, type(e).__name__, e)
    return written
