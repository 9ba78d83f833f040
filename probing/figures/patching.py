"""Static figures of ``task=patching`` (matplotlib, Agg): each position's head effects as a layer x head grid,
the residual stream's effects as layer x position, and the atlas (attention accuracy on the pairs' arcs against
the effect, a point per head)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _grid(ax, values: np.ndarray, marks: np.ndarray, xlabel: str, ylabel: str, xticks=None) -> object:
    lim = max(1e-6, float(np.nanmax(np.abs(values))))
    im = ax.imshow(values, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto", origin="lower")
    for y, x in zip(*np.nonzero(marks)):
        ax.text(x, y, "•", ha="center", va="center", fontsize=7, color="black")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if xticks is not None:
        ax.set_xticks(range(len(xticks)), xticks, fontsize=7)
    return im


def effect_heatmaps(heads: pd.DataFrame, title: str, fig_dir: Path) -> list[Path]:
    """``patching_<position>.png``: every head's normalised effect (0 clean, 1 corrupt), a dot where
    ``p_adjusted`` < 0.05."""
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for position, t in heads.groupby("position", sort=False):
        n_layers, n_heads = int(t["layer"].max()) + 1, int(t["head"].max()) + 1
        values = t.pivot(index="layer", columns="head", values="effect").to_numpy()
        marks = t.pivot(index="layer", columns="head", values="p_adjusted").to_numpy() < 0.05
        fig, ax = plt.subplots(figsize=(0.35 * n_heads + 2.2, 0.3 * n_layers + 1.6), dpi=90)
        im = _grid(ax, values, marks, "head", "layer")
        fig.colorbar(im, ax=ax, label="effect (0 clean, 1 corrupt)")
        ax.set_title(f"{title}\nheads patched at {position} (n = {int(t['n_pairs'].iloc[0])}; • p_adj < 0.05)",
                     fontsize=8)
        path = fig_dir / f"patching_{position}.png"
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def residual_heatmap(residual: pd.DataFrame, title: str, path: Path) -> Path:
    """Layer x position: the effect of patching each layer's input there."""
    positions = list(dict.fromkeys(residual["position"]))
    values = residual.pivot(index="layer", columns="position", values="effect")[positions].to_numpy()
    marks = residual.pivot(index="layer", columns="position", values="p_adjusted")[positions].to_numpy() < 0.05
    fig, ax = plt.subplots(figsize=(0.8 * len(positions) + 2.4, 0.3 * len(values) + 1.6), dpi=90)
    im = _grid(ax, values, marks, "position", "layer (input patched)", positions)
    fig.colorbar(im, ax=ax, label="effect")
    ax.set_title(f"{title}\nresidual stream", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def atlas_scatters(atlas: pd.DataFrame, per_relation: dict, title: str, fig_dir: Path) -> list[Path]:
    """``patching_atlas_<relation>.png``: x attention accuracy from target to cue, y the effect at every piece, a
    point per head coloured by layer, the offset baseline as a vertical line."""
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for rel, a in atlas.groupby("relation", sort=False):
        n_layers = int(a["layer"].max()) + 1
        fig, ax = plt.subplots(figsize=(5.0, 3.8), dpi=90)
        sc = ax.scatter(a["attention_accuracy"], a["effect"], c=a["layer"], cmap=plt.get_cmap("viridis", n_layers),
                        vmin=-0.5, vmax=n_layers - 0.5, s=18)
        ax.axvline(float(a["offset_baseline"].iloc[0]), color="grey", ls="--", lw=0.8, label="offset baseline")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel(f"attention accuracy, target → cue ({rel})")
        ax.set_ylabel("effect when patched (all pieces)")
        r = per_relation.get(rel, {})
        rho = (f"ρ = {r['spearman']:.2f} [{r['spearman_ci_low']:.2f}, {r['spearman_ci_high']:.2f}], "
               if r else "")
        ax.set_title(f"{title}\n{rel}: {rho}n = {int(a['n_pairs'].iloc[0])} scored pairs", fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
        fig.colorbar(sc, ax=ax, label="layer")
        fig.tight_layout()
        path = fig_dir / f"patching_atlas_{''.join(c if c.isalnum() else '_' for c in rel)}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths
