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

PATTERN_PANELS = (("cls", "[CLS]"), ("sep", "[SEP]"), ("sink", "the first position"), ("punct", "punctuation"),
                  ("next", "next position"), ("prev", "previous position"), ("self", "itself"))


def safe_name(text: str) -> str:
    """A file-name-safe version of a relation name (``nmod:poss`` -> ``nmod_poss``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def relation_heatmaps(table: pd.DataFrame, directions: Sequence[str], title: str, fig_dir: Path
                      ) -> list[Path]:
    """``heads_<relation>.png`` for every relation of ``table`` (one label set): one panel per direction, layer
    x head accuracy, the best cell outlined, the best head and the baseline in the panel's title. A direction
    with no row for a relation (``min_count`` kept it in the other direction only, common for a causal model's
    store) is an empty panel saying so; where the directions count different arcs, each panel names its n.

    The figure is laid out and drawn once; for each relation only the images, outlines and titles are drawn
    again over the saved background (matplotlib's blitting), which makes a figure about ten times cheaper
    than drawing it anew."""
    from PIL import Image

    n_layers, n_heads = int(table["layer"].max()) + 1, int(table["head"].max()) + 1
    width = 4.2 * len(directions) + 1.2
    fig, axes = plt.subplots(1, len(directions), figsize=(width, 3.9), squeeze=False, dpi=90)
    fig.subplots_adjust(left=0.8 / width, right=1 - 1.3 / width, bottom=0.14, top=0.74, wspace=0.28)
    panels = []
    for ax in axes[0]:
        im = ax.imshow(np.zeros((n_layers, n_heads)), vmin=0, vmax=1, cmap="viridis", aspect="auto",
                       animated=True)
        rect = ax.add_patch(plt.Rectangle((-0.5, -0.5), 1, 1, fill=False, ec="red", lw=2, animated=True))
        ax.title.set_animated(True)
        ax.title.set_fontsize(9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(n_heads))
        ax.set_yticks(range(n_layers))
        ax.tick_params(labelsize=7)
        panels.append((ax, im, rect))
    cax = fig.add_axes((1 - 1.0 / width, 0.14, 0.15 / width, 0.6))
    fig.colorbar(panels[0][1], cax=cax, label="accuracy")
    suptitle = fig.suptitle("", fontsize=10, animated=True)
    fig.canvas.draw()
    background = fig.canvas.copy_from_bbox(fig.bbox)
    paths = []
    for relation, rows in table.groupby("relation", sort=True):
        fig.canvas.restore_region(background)
        counts = {d: rows.loc[rows["direction"] == d, "n"] for d in directions}
        # a causal store scores each direction over the arcs it can see, so the counts may differ by panel
        shared = {int(c.iloc[0]) for c in counts.values() if len(c)}
        for panel, d in zip(panels, directions):
            _draw_panel(panel, rows[(rows["direction"] == d) & rows["accuracy"].notna()], d, (n_layers, n_heads),
                        len(shared) > 1)
        n_text = f"  (n={shared.pop()})" if len(shared) == 1 else ""
        suptitle.set_text(f"{relation}{n_text}\n{title}")
        fig.draw_artist(suptitle)
        path = fig_dir / f"heads_{safe_name(str(relation))}.png"
        buf = fig.canvas.buffer_rgba()
        tmp = path.with_name(f".{path.stem}.tmp.png")
        Image.frombuffer("RGBA", (buf.shape[1], buf.shape[0]), bytes(buf), "raw", "RGBA", 0, 1).convert(
            "RGB").save(tmp, compress_level=3)
        tmp.replace(path)  # whole or not at all
        paths.append(path)
    plt.close(fig)
    return paths


def _draw_panel(panel: tuple, sub: pd.DataFrame, direction: str, shape: tuple[int, int], name_n: bool) -> None:
    """One direction's panel of a relation over the saved background: the accuracy grid, the best cell outlined
    and titled with its baseline (``name_n``: with its arc count), or an empty panel saying it was not scored."""
    ax, im, rect = panel
    grid = np.full(shape, np.nan)
    grid[sub["layer"].to_numpy(dtype=int), sub["head"].to_numpy(dtype=int)] = sub["accuracy"].to_numpy()
    im.set_data(grid)
    if sub.empty:  # min_count kept this relation in the other direction only
        rect.set_visible(False)
        ax.title.set_text(f"{direction}: not scored\n(fewer arcs than min_count)")
    else:
        best = sub.loc[sub["accuracy"].idxmax()]
        rect.set_visible(True)
        rect.set_xy((best["head"] - 0.5, best["layer"] - 0.5))
        n = f", n={int(sub['n'].iloc[0])}" if name_n else ""
        ax.title.set_text(f"{direction}: best {int(best['layer'])}-{int(best['head'])} {best['accuracy']:.2f}{n}\n"
                          f"baseline ({int(best['baseline_offset']):+d}) {best['baseline_accuracy']:.2f}")
    for artist in (im, rect, *ax.spines.values(), ax.title):
        ax.draw_artist(artist)


def pattern_plot(patterns: pd.DataFrame, title: str, path: Path) -> Path:
    """Clark et al.'s figure 2 style: each head's mean attention to a position type, by layer; and the
    row entropy by layer against uniform attention."""
    fig, grid = plt.subplots(2, 4, figsize=(12, 5.6))
    axes = grid.ravel()
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
