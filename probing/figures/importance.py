"""Static figures of ``task=importance`` (matplotlib, Agg): per relation, every head's attention accuracy
against its ablation importance (a point per head, coloured by layer), and the pruning curves."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in text)


def link_scatter(points: pd.DataFrame, link: pd.DataFrame, n_layers: int, title: str, fig_dir: Path
                 ) -> list[Path]:
    """``importance_<relation>.png``: a panel per direction, x attention accuracy, y score drop; ``points``
    has relation, direction, layer, head, accuracy, importance; ``link`` the Spearman rows."""
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    cmap = plt.get_cmap("viridis", n_layers)
    for rel, t in points.groupby("relation", sort=True):
        dirs = sorted(t["direction"].unique())
        fig, axes = plt.subplots(1, len(dirs), figsize=(4.2 * len(dirs), 3.6), squeeze=False, dpi=90)
        for ax, d in zip(axes[0], dirs):
            s = t[t["direction"] == d]
            sc = ax.scatter(s["accuracy"], s["importance"], c=s["layer"], cmap=cmap, vmin=-0.5,
                            vmax=n_layers - 0.5, s=18)
            r = link[(link["relation"] == rel) & (link["direction"] == d)]
            rho = (f"ρ = {r['rho'].iloc[0]:.2f} [{r['ci_low'].iloc[0]:.2f}, {r['ci_high'].iloc[0]:.2f}]"
                   if len(r) else "")
            ax.set_title(f"{d}  {rho}", fontsize=9)
            ax.set_xlabel("attention accuracy")
            if ax is axes[0][0]:
                ax.set_ylabel("score drop when ablated")
            ax.axhline(0, color="grey", lw=0.5)
        fig.colorbar(sc, ax=axes[0].tolist(), label="layer", ticks=range(n_layers))
        fig.suptitle(f"{title} · {rel}", fontsize=10)
        path = fig_dir / f"importance_{_safe(str(rel))}.png"
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths


def pruning_plot(pruning: pd.DataFrame, relation: str, ylabel: str, title: str, path: Path) -> Path:
    """The score against the fraction of heads removed: one line per informed order with its interval over
    sentences, the random orders' mean curve with its interval and the min–max band of the single orders, and
    the all-heads-ablated floor and the unablated score minus 5 points as horizontal lines."""
    t = pruning[pruning["relation"] == relation]
    fig, ax = plt.subplots(figsize=(5.2, 3.6), dpi=90)
    for order, s in t.groupby("order", sort=True):
        s = s.sort_values("fraction_removed")
        if order == "random":
            band = s.groupby("fraction_removed")["score"]
            x = band.min().index.to_numpy(float)
            ax.fill_between(x, band.min().to_numpy(), band.max().to_numpy(), alpha=0.15, color="grey",
                            label=f"random ({s['seed'].nunique()} orders: min–max)")
            continue
        x = s["fraction_removed"].to_numpy(float)
        colour = "dimgrey" if order == "random_mean" else None
        (line,) = ax.plot(x, s["score"].to_numpy(), marker="o", ms=3, color=colour,
                          label="random (mean, 95% interval)" if order == "random_mean" else str(order))
        if "ci_low" in s and s["ci_low"].notna().any():
            ax.fill_between(x, s["ci_low"].to_numpy(float), s["ci_high"].to_numpy(float), alpha=0.2,
                            color=line.get_color())
    if len(t) and "floor" in t:
        first = t.sort_values("fraction_removed").iloc[0]
        ax.axhline(float(t["floor"].iloc[0]), color="tab:red", ls=":", lw=1, label="all heads ablated")
        ax.axhline(float(first["unablated"]) - 0.05, color="black", ls="--", lw=0.8, label="unablated − 5 points")
    ax.set_xlabel("fraction of heads removed")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    ax.set_title(f"{title} · {relation}", fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
