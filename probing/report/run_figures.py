"""Static figures of the per-head analysis (matplotlib, Agg): heatmaps with the best cell marked, the
attention patterns by layer, and the MDS map of the heads."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

PATTERN_PANELS = (("cls", "[CLS]"), ("sep", "[SEP]"), ("punct", "punctuation"), ("next", "next position"),
                  ("prev", "previous position"), ("self", "itself"))


def safe_name(text: str) -> str:
    """A file-name-safe version of a relation name (``nmod:poss`` -> ``nmod_poss``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def relation_heatmap(rows: pd.DataFrame, relation: str, directions: Sequence[str], title: str, path: Path
                     ) -> Path:
    """One panel per direction: layer x head accuracy, the best cell outlined, the baseline in the title."""
    fig, axes = plt.subplots(1, len(directions), figsize=(4.2 * len(directions), 3.4), squeeze=False)
    for ax, d in zip(axes[0], directions):
        sub = rows[rows["direction"] == d]
        grid = sub.pivot(index="layer", columns="head", values="accuracy").sort_index()
        im = ax.imshow(grid.to_numpy(), vmin=0, vmax=1, cmap="viridis", aspect="auto")
        best = sub.loc[sub["accuracy"].idxmax()]
        ax.add_patch(plt.Rectangle((best["head"] - 0.5, best["layer"] - 0.5), 1, 1, fill=False, ec="red", lw=2))
        ax.set_title(f"{d}: best {int(best['layer'])}-{int(best['head'])} {best['accuracy']:.2f}\n"
                     f"baseline ({int(best['baseline_offset']):+d}) {best['baseline_accuracy']:.2f}", fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(grid.shape[1]))
        ax.set_yticks(range(grid.shape[0]))
        ax.tick_params(labelsize=7)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="accuracy")
    fig.suptitle(f"{relation}  (n={int(rows['n'].iloc[0])})  {title}", fontsize=10)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return path


def pattern_plot(patterns: pd.DataFrame, title: str, path: Path) -> Path:
    """Clark et al.'s figure 2 style: each head's mean attention to a position type, by layer; and the
    row entropy by layer against uniform attention."""
    fig, grid = plt.subplots(2, 4, figsize=(12, 5.6))
    axes = grid.ravel()
    axes[-1].axis("off")
    jitter = np.random.default_rng(0).uniform(-0.15, 0.15, len(patterns))
    for ax, (col, label) in zip(axes, PATTERN_PANELS):
        ax.scatter(patterns["layer"] + jitter, patterns[col], s=10, alpha=0.7)
        means = patterns.groupby("layer")[col].mean()
        ax.plot(means.index, means.to_numpy(), color="black", lw=1)
        ax.set_title(f"attention to {label}", fontsize=9)
        ax.set_xlabel("layer")
        ax.set_ylim(0, 1)
    ax = axes[len(PATTERN_PANELS)]
    ax.scatter(patterns["layer"] + jitter, patterns["entropy"], s=10, alpha=0.7, label="heads")
    ax.plot(*zip(*patterns.groupby("layer")["uniform_entropy"].mean().items()), color="gray", ls="--",
            label="uniform")
    ax.set_title("row entropy (nats)", fontsize=9)
    ax.set_xlabel("layer")
    ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def mds_plot(coords: pd.DataFrame, title: str, path: Path) -> Path:
    """The heads in two dimensions (MDS of their JS distances), coloured by layer."""
    fig, ax = plt.subplots(figsize=(5, 4.2))
    sc = ax.scatter(coords["x"], coords["y"], c=coords["layer"], cmap="viridis", s=30)
    for _, r in coords.iterrows():
        ax.annotate(f"{int(r['layer'])}-{int(r['head'])}", (r["x"], r["y"]), fontsize=5, alpha=0.6)
    fig.colorbar(sc, ax=ax, label="layer")
    ax.set_title(f"heads embedded by MDS of JS distances\n{title}", fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
