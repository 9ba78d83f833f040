"""The inspector's PNG: every head's word-level map of one sentence under one measure, in a grid."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def png_grid(view: Any, prefix: int, words: Sequence[str], path: Path, title: str) -> Path:
    """Every head's word-level map of a ``MeasureView`` (:mod:`probing.report.inspect`; rows: query word,
    columns: attended word) in a layers x heads grid, or
    for a per-layer measure one panel per layer in a row.

    With a gold tree, a red dot marks the cells where the map's most-attended word is the gold head.
    """
    maps, choices = view.maps, view.choices
    n_layers, n_heads = maps.shape[:2]
    n = len(words)
    w = np.asarray(maps, dtype=np.float32)[:, :, prefix:prefix + n, prefix:prefix + n]
    # panel (row, column) of each (layer, head)
    cells = ([((0, layer), (layer, 0)) for layer in range(n_layers)] if view.per_layer
             else [((layer, head), (layer, head)) for layer in range(n_layers) for head in range(n_heads)])
    rows, cols = (1, n_layers) if view.per_layer else (n_layers, n_heads)
    vmax = view.vmax if view.measure == "attention" else max(float(np.nanmax(w)) if w.size else 1.0, 1e-12)
    cell = 0.5 + 0.12 * n  # inches per panel: room for 7-point word labels
    fig, axes = plt.subplots(rows, cols, figsize=(cell * cols + 0.6, cell * rows + 0.8),
                             squeeze=False, gridspec_kw={"wspace": 0.05, "hspace": 0.12})
    gold = choices.gold
    image = None
    for (r, c), (layer, head) in cells:
        ax = axes[r, c]
        image = ax.imshow(w[layer, head], cmap="Blues", vmin=0.0, vmax=vmax, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        name = f"L{layer}" if view.per_layer else f"L{layer} H{head}"
        if gold is not None:
            hit = np.flatnonzero(gold[layer, head])
            ax.scatter(choices.word[layer, head, hit], hit, s=4, c="#d62728", marker="o", linewidths=0)
            name += f"  {len(hit)}/{n - 1}"
        ax.set_title(name, fontsize=6, pad=1.5)
        if c == 0:
            ax.set_yticks(range(n))
            ax.set_yticklabels(words, fontsize=7)
        if r == rows - 1:
            ax.set_xticks(range(n))
            ax.set_xticklabels(words, fontsize=7, rotation=90)
    fig.colorbar(image, ax=axes, fraction=0.012 if rows > 1 else 0.04, pad=0.01,
                 label=f"{view.measure} (word level)")
    fig.suptitle(f"{title}  [{view.measure}: {view.note}]"
                 + ("  (red dot: most-attended word is the gold head)" if gold is not None else ""), fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path
