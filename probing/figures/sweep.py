"""Heatmaps of a collected sweep (``probing-collect``): a metric over the swept layers and heads."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from probing import schema  # noqa: E402


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_")


def sweep_heatmaps(table: pd.DataFrame, others: list[str], out_dir: Path) -> list[Path]:
    """One PNG per metric (and per combination of the values of ``others``, swept keys besides layer and head):
    layer rows x head columns, a column ``all`` for jobs that used every head of a layer."""
    if table.empty or table["layer"].isna().all():
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("heatmap_*.png"):  # figures of an earlier collect of this sweep
        stale.unlink()
    data = table[table["layer"].notna()].copy()
    data["head_col"] = data["head"].map(lambda h: "all" if pd.isna(h) else int(h))
    paths = []
    groups = data.groupby(others, dropna=False) if others else [((), data)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        suffix = "".join(f"__{_slug(f'{k}={v}')}" for k, v in zip(others, key))
        for metric, m in part.groupby("metric", sort=True):
            if schema.is_count(metric):
                continue
            grid = m.pivot_table(index="layer", columns="head_col", values="value", aggfunc="mean")
            cols = sorted(c for c in grid.columns if c != "all")
            cols += ["all"] if "all" in grid.columns else []
            grid = grid[cols].sort_index()
            # at least 3.6 x 2.4 inches: a layer-only sweep (one column) stays a readable strip
            fig, ax = plt.subplots(figsize=(max(3.6, 1.0 + 0.55 * len(cols)), max(2.4, 1.0 + 0.45 * len(grid))))
            im = ax.imshow(grid.to_numpy(dtype=float), aspect="auto", cmap="viridis")
            ax.set_xticks(range(len(cols)), [str(c) for c in cols])
            ax.set_yticks(range(len(grid)), [str(int(i)) for i in grid.index])
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            title = metric + "".join(f"  {k}={v}" for k, v in zip(others, key))
            ax.set_title(title, fontsize=9)
            if grid.size <= 120:
                for (r, c), v in pd.DataFrame(grid.to_numpy()).stack().items():
                    ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w")
            fig.colorbar(im, ax=ax)
            fig.tight_layout()
            path = out_dir / f"heatmap_{_slug(metric)}{suffix}.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            paths.append(path)
    return paths
