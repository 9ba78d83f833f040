"""Figures and tables of experiments/probes_ud_ewt from the collected sweeps (reads sweep.parquet only).

    python experiments/probes_ud_ewt/figures.py [results/probes_ud_ewt]

Writes layer_probes.png and head_sweep.png next to this script and prints the README's tables as Markdown.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).resolve().parent


def wide(sweep: Path) -> pd.DataFrame:
    """A per-layer sweep's metrics, one row per layer."""
    df = pd.read_parquet(sweep / "sweep.parquet")
    return df.pivot_table(index="layer", columns="metric", values="value").reset_index()


def markdown(df: pd.DataFrame, cols: list[str]) -> str:
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    body = ""
    for _, r in df.iterrows():
        cells = (f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols)
        body += "| " + " | ".join(cells) + " |\n"
    return head + body


def main(out: Path) -> None:
    rel = wide(out / "layer_sweep_relation")
    arc = wide(out / "layer_sweep_arc")
    allh = pd.read_parquet(out / "all_heads" / "sweep.parquet")
    allv = allh.pivot_table(index="probe", columns="metric", values="value")
    print("## relation probe per layer\n")
    print(markdown(rel, ["layer", "accuracy", "control_accuracy", "selectivity", "macro_f1",
                         "majority_accuracy"]))
    rel_cols = ["accuracy", "control_accuracy", "selectivity", "macro_f1"]
    print("all layers:", allv.loc["relation", rel_cols].round(3).to_dict())
    print("\n## arc probe per layer\n")
    print(markdown(arc, ["layer", "uas", "control_uas", "selectivity", "right_branching_uas",
                         "best_offset_uas"]))
    print("all layers:", allv.loc["arc", ["uas", "control_uas", "selectivity", "right_branching_uas",
                                          "best_offset_uas"]].round(3).to_dict())
    if "edge" in allv.index:
        edge_cols = ["roc_auc", "accuracy", "control_accuracy", "selectivity"]
        print("edge, all layers:", allv.loc["edge", edge_cols].round(3).to_dict())

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    a1.plot(rel["layer"], rel["accuracy"], "o-", label="relation probe")
    a1.plot(rel["layer"], rel["control_accuracy"], "s--", label="control task")
    a1.plot(rel["layer"], rel["majority_accuracy"], ":", color="grey", label="majority class")
    a1.axhline(allv.loc["relation", "accuracy"], color="C0", alpha=0.4, label="all layers")
    a1.set(xlabel="layer", ylabel="accuracy (EWT dev)", title="relation probe, one layer's 12 heads")
    a1.legend(fontsize=7)
    a2.plot(arc["layer"], arc["uas"], "o-", label="Attn probe")
    a2.plot(arc["layer"], arc["control_uas"], "s--", label="control task")
    a2.plot(arc["layer"], arc["right_branching_uas"], ":", color="grey", label="right-branching")
    a2.plot(arc["layer"], arc["best_offset_uas"], "-.", color="black", alpha=0.6, label="best offset")
    a2.axhline(allv.loc["arc", "uas"], color="C0", alpha=0.4, label="all layers")
    a2.set(xlabel="layer", ylabel="UAS (EWT dev, no punct.)", title="arc probe (Clark et al.'s Attn)")
    a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(HERE / "layer_probes.png", dpi=120)
    plt.close(fig)

    heads = pd.read_parquet(out / "head_sweep_relation" / "sweep.parquet")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    for ax, metric in zip(axes, ["accuracy", "selectivity"]):
        grid = heads[heads.metric == metric].pivot_table(index="layer", columns="head", values="value")
        im = ax.imshow(grid.to_numpy(dtype=float), cmap="viridis", aspect="auto")
        ax.set(xticks=range(grid.shape[1]), yticks=range(grid.shape[0]), xlabel="head", ylabel="layer",
               title=f"relation probe, one head: {metric}")
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(HERE / "head_sweep.png", dpi=120)
    plt.close(fig)
    best = heads[heads.metric == "accuracy"].sort_values("value", ascending=False).head(5)
    print("\nbest single heads (relation accuracy):", [(int(r.layer), int(r["head"]), round(r.value, 3))
                                                       for _, r in best.iterrows()])


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("results/probes_ud_ewt"))
