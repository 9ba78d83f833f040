"""Figures and tables of the head-importance experiment from a ``task=importance`` run dir: per relation, the
single-head ablation importance heatmap beside the attention-accuracy heatmap (dep_to_head), the pruning
curves, and the correlation table (markdown).

    python experiments/head_importance_ud_ewt/summarise.py RUN_DIR [--relations all nsubj det ...]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from probing.importance.figures import pruning_plot  # noqa: E402
from probing.results import read_table  # noqa: E402

HERE = Path(__file__).resolve().parent


def heatmaps(imp: pd.DataFrame, link: pd.DataFrame, accuracy: pd.DataFrame, relations: list[str], path: Path) -> None:
    one = imp[(imp.method == "ablation") & (imp.metric == "accuracy_drop")]
    fig, axes = plt.subplots(len(relations), 2, figsize=(9, 2.4 * len(relations)), squeeze=False, dpi=90)
    for row, rel in zip(axes, relations):
        drop = one[one.relation == rel].pivot(index="layer", columns="head", values="score")
        acc = accuracy[(accuracy.relation == rel)].pivot(index="layer", columns="head", values="accuracy")
        im0 = row[0].imshow(drop.to_numpy(), cmap="magma", aspect="auto")
        im1 = row[1].imshow(acc.to_numpy(), cmap="viridis", aspect="auto", vmin=0, vmax=1)
        r = link[(link.relation == rel) & (link.direction == "dep_to_head")]
        rho = f"ρ = {r.rho.iloc[0]:.2f} [{r.ci_low.iloc[0]:.2f}, {r.ci_high.iloc[0]:.2f}]" if len(r) else ""
        row[0].set_title(f"{rel}: accuracy drop when ablated", fontsize=9)
        row[1].set_title(f"{rel}: attention accuracy (dep→head)  {rho}", fontsize=9)
        for ax, im in ((row[0], im0), (row[1], im1)):
            ax.set_xlabel("head")
            ax.set_ylabel("layer")
            fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def markdown(df: pd.DataFrame) -> str:
    """A markdown table, floats to 3 decimals."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--heads", type=Path, help="a task=heads run dir over the same sentences (heatmaps)")
    ap.add_argument("--relations", nargs="+", default=["all", "nsubj", "det", "case", "amod"])
    args = ap.parse_args()
    imp, link, prune = (read_table(args.run_dir, n) for n in ("importance", "importance_link", "pruning"))
    heads = read_table(args.heads, "heads") if args.heads else None
    if heads is not None:
        heads = heads[(heads.label_set == "as_is") & (heads.measure == "attention")]
    rels = [r for r in args.relations if r in set(imp.relation)]
    if heads is not None:
        heatmaps(imp, link, heads[heads.direction == "dep_to_head"], rels, HERE / "importance_vs_attention.png")
    pruning_plot(prune, "all", "relation-probe accuracy", "MiniLM · EWT dev", HERE / "pruning_all.png")
    (HERE / "link.md").write_text(markdown(link.sort_values(["direction", "relation"])))
    for f in ("importance_all.png", "importance_nsubj.png", "importance_det.png"):
        if (args.run_dir / "figures" / f).is_file():
            shutil.copy(args.run_dir / "figures" / f, HERE / f)


if __name__ == "__main__":
    main()
