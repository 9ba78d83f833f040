"""Figures and tables of the head-importance experiment from ``task=importance`` run dirs (one per readout):
per relation, the single-head ablation importance heatmap beside the attention-accuracy heatmap (dep_to_head),
the pruning curves, the correlation table of every run (``link.md``) and the pruning curves on all arcs as a table
(``pruning.md``: per readout and order, the score at every fraction of heads removed; random orders as mean,
min and max). Figures are named by readout (``importance_vs_attention_<readout>.png``, ``pruning_all_<readout>.png``,
``importance_<relation>_<readout>.png``).

    python experiments/head_importance_ud_ewt/summarise.py RUN_DIR [RUN_DIR ...] --heads HEADS_RUN_DIR \
        [--relations all nsubj det ...]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from probing.figures.importance import pruning_plot  # noqa: E402
from probing.results import read_table  # noqa: E402

HERE = Path(__file__).resolve().parent


LABELS = {"accuracy": "relation-probe accuracy", "uas": "arc-probe UAS", "cosine": "embedding cosine",
          "mlm_accuracy": "masked-LM accuracy"}


def heatmaps(imp: pd.DataFrame, link: pd.DataFrame, accuracy: pd.DataFrame, relations: list[str], metric: str,
             path: Path) -> None:
    one = imp[(imp.method == "ablation") & (imp.metric == f"{metric}_drop")]
    fig, axes = plt.subplots(len(relations), 2, figsize=(9, 2.4 * len(relations)), squeeze=False, dpi=90)
    for row, rel in zip(axes, relations):
        drop = one[one.relation == rel].pivot(index="layer", columns="head", values="score")
        acc = accuracy[(accuracy.relation == rel)].pivot(index="layer", columns="head", values="accuracy")
        im0 = row[0].imshow(drop.to_numpy(), cmap="magma", aspect="auto")
        im1 = row[1].imshow(acc.to_numpy(), cmap="viridis", aspect="auto", vmin=0, vmax=1)
        r = link[(link.relation == rel) & (link.direction == "dep_to_head")]
        rho = f"ρ = {r.rho.iloc[0]:.2f} [{r.ci_low.iloc[0]:.2f}, {r.ci_high.iloc[0]:.2f}]" if len(r) else ""
        row[0].set_title(f"{rel}: {LABELS.get(metric, metric)} drop when ablated", fontsize=9)
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


def pruning_table(prune: pd.DataFrame) -> pd.DataFrame:
    """The ``all`` curves of one run: a row per (order, fraction removed), random orders pooled over seeds."""
    t = prune[prune.relation == "all"]
    out = (t.groupby(["readout", "order", "fraction_removed", "heads_removed"])["score"]
           .agg(score="mean", low="min", high="max").reset_index())
    return out.astype({"fraction_removed": float, "heads_removed": int})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dirs", type=Path, nargs="+", help="task=importance run dirs (one per readout)")
    ap.add_argument("--heads", type=Path, help="a task=heads run dir over the same sentences (heatmaps)")
    ap.add_argument("--relations", nargs="+", default=["all", "nsubj", "det", "case", "amod"])
    args = ap.parse_args()
    heads = read_table(args.heads, "heads") if args.heads else None
    if heads is not None:
        heads = heads[(heads.label_set == "as_is") & (heads.measure == "attention")]
    links, prunes = [], []
    for run_dir in args.run_dirs:
        imp, link, prune = (read_table(run_dir, n) for n in ("importance", "importance_link", "pruning"))
        readout = str(imp.readout.iloc[0])
        metric = str(imp[imp.metric.str.endswith("_drop")].metric.iloc[0])[: -len("_drop")]
        rels = [r for r in args.relations if r in set(imp.relation)]
        if heads is not None:
            heatmaps(imp, link, heads[heads.direction == "dep_to_head"], rels, metric,
                     HERE / f"importance_vs_attention_{readout}.png")
        pruning_plot(prune, "all", LABELS.get(metric, metric), f"MiniLM · EWT dev · {readout} readout",
                     HERE / f"pruning_all_{readout}.png")
        for rel in ("all", "nsubj", "det"):
            f = run_dir / "figures" / f"importance_{rel}.png"
            if f.is_file():
                shutil.copy(f, HERE / f"importance_{rel}_{readout}.png")
        links.append(link)
        prunes.append(pruning_table(prune))
    link = pd.concat(links, ignore_index=True)
    (HERE / "link.md").write_text(markdown(link.sort_values(["readout", "direction", "relation"])))
    (HERE / "pruning.md").write_text(markdown(pd.concat(prunes, ignore_index=True)))


if __name__ == "__main__":
    main()
