"""Figures and tables of the structural-probes experiment from its three sweeps and a ``task=heads`` run:

- ``layers.png``: UUAS, DSpr, root accuracy and NSpr per hidden layer (0 = the embedding layer) of the trained
  model beside the random-init one (``--hidden``: the distance/depth sweep over layers and ``model.random_init``);
- ``heads.png``: the layer x head grid of distance-probe UUAS from each head's context vectors (``--heads``: the
  72-job sweep) beside the same heads' attention accuracy (``--attention``: relation ``all``, the better of the two
  directions), and their scatter with Spearman's rho over the 72 heads;
- ``mdl.png``: online codelength per layer of the relation probe and of its control task, and compression
  (``--mdl``: the ``probe=relation probe.mdl=true`` sweep);
- ``results.md``: the numbers behind the figures (markdown tables), pasted into the README.

    python experiments/structural_probes_ud_ewt/summarise.py --hidden SWEEP [SWEEP] --heads SWEEP --mdl SWEEP \
        --attention HEADS_RUN [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from probing.config import DataConfig, DataKind  # noqa: E402
from probing.corpus.cache import load_corpus_cached  # noqa: E402
from probing.probes.structural_metrics import gold_edges, mst_edges  # noqa: E402
from probing.results import read_table  # noqa: E402

HERE = Path(__file__).resolve().parent
STRUCTURAL = ("uuas", "dspr", "root_accuracy", "nspr")
TITLES = {"uuas": "UUAS (distance probe)", "dspr": "DSpr (distance probe)",
          "root_accuracy": "root accuracy (depth probe)", "nspr": "NSpr (depth probe)"}


def jobs(sweep: Path) -> pd.DataFrame:
    """One row per finished job of a sweep: its ``metrics.json`` (jobs without one are left out, and counted)."""
    rows, missing = [], []
    for d in sorted(p for p in sweep.iterdir() if p.is_dir() and p.name.isdigit()):
        f = d / "metrics.json"
        if f.is_file():
            rows.append({**json.loads(f.read_text()), "job": int(d.name)})
        else:
            missing.append(d.name)
    if missing:
        print(f"{sweep}: {len(missing)} job(s) without metrics.json: {', '.join(missing)}")
    return pd.DataFrame(rows)


def layer_table(hidden: pd.DataFrame) -> pd.DataFrame:
    """Per model and layer: UUAS, DSpr (distance jobs), root accuracy, NSpr (depth jobs), epochs and seconds."""
    out = []
    for (model, layer), g in hidden.groupby(["model", "layer"]):
        row = {"model": model, "layer": int(layer)}
        for _, r in g.iterrows():
            for k in STRUCTURAL:
                if k in r and pd.notna(r[k]):
                    row[k] = float(r[k])
            row[f"{r['probe']}_epochs"] = int(r["epochs"])
            row[f"{r['probe']}_s"] = float(r["probe_seconds"])
        out.append(row)
    return pd.DataFrame(out).sort_values(["model", "layer"])


def linear_uuas(data_dir: Path, split: str = "test") -> float:
    """UUAS of the linear-structure baseline (each non-punctuation word joined to the next one: the spanning tree
    of the distances |i - j|), punctuation left out as for the probes."""
    data = DataConfig(name="ud_ewt", kind=DataKind.ud_ewt, dir=str(data_dir))
    found = total = 0
    for s in load_corpus_cached(data, split, "results/cache").sentences:
        heads, keep = np.asarray(s.heads), np.array([u != "PUNCT" for u in s.upos])
        n = len(heads)
        pred = mst_edges(np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(float), keep)
        gold = gold_edges(heads, keep)
        found += int(np.isin(pred[:, 0] * n + pred[:, 1], gold[:, 0] * n + gold[:, 1]).sum())
        total += len(gold)
    return found / total


def layers_figure(table: pd.DataFrame, path: Path, linear: float | None = None) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), dpi=80)
    for ax, metric in zip(axes, STRUCTURAL):
        for model, g in table.groupby("model"):
            if metric in g:
                random, full = "random" in model, "all of train" in model
                ax.plot(g.layer, g[metric], marker="s" if random else "^" if full else "o",
                        linestyle="--" if random else ":" if full else "-",
                        label=f"{model}{' (random init)' if random else ''}")
        if metric == "uuas" and linear is not None:
            ax.axhline(linear, color="grey", linestyle=":", label=f"linear chain ({linear:.3f})")
        ax.set_title(TITLES[metric], fontsize=10)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_xticks(range(int(table.layer.max()) + 1))
        ax.grid(alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=8)
    n = table.attrs.get("n_train")
    fig.suptitle("MiniLM on UD EWT test: structural probes per hidden layer (trained on "
                 f"{f'{n:,} words of EWT train' if n else 'EWT train'} unless marked 'all of train'; stopped on dev)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def attention_accuracy(run: Path) -> pd.DataFrame:
    """Per head: attention accuracy of relation ``all`` (label set as_is) in each direction and their maximum."""
    h = read_table(run, "heads")
    h = h[(h.relation == "all") & (h.label_set == "as_is") & (h.measure == "attention")]
    wide = h.pivot_table(index=["layer", "head"], columns="direction", values="accuracy").reset_index()
    wide["attention_max"] = wide[["dep_to_head", "head_to_dep"]].max(axis=1)
    return wide


def heads_figure(grid: pd.DataFrame, rho: dict, path: Path) -> None:
    uuas = grid.pivot(index="layer", columns="head", values="uuas").to_numpy()
    acc = grid.pivot(index="layer", columns="head", values="attention_max").to_numpy()
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.4), dpi=80)
    for ax, m, title, cmap in ((axes[0], uuas, "UUAS of a distance probe on the head's context vectors", "magma"),
                               (axes[1], acc, "attention accuracy (relation all, better direction)", "viridis")):
        im = ax.imshow(m, cmap=cmap, aspect="auto")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(m.shape[1]))
        ax.set_yticks(range(m.shape[0]))
        fig.colorbar(im, ax=ax)
    axes[2].scatter(grid.attention_max, grid.uuas, s=14)
    for _, r in grid.nlargest(4, "uuas").iterrows():
        axes[2].annotate(f"L{int(r.layer)}H{int(r['head'])}", (r.attention_max, r.uuas), fontsize=7)
    axes[2].set_xlabel("attention accuracy (better direction)")
    axes[2].set_ylabel("UUAS from context vectors")
    axes[2].set_title(f"{len(grid)} heads: Spearman rho = {rho['attention_max'][0]:.2f} (p = {rho['attention_max'][1]:.2g})",
                      fontsize=9)
    axes[2].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def mdl_figure(mdl: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), dpi=80)
    axes[0].plot(mdl.layer, mdl.codelength_bits / 1000, marker="o", label="relation labels")
    axes[0].plot(mdl.layer, mdl.control_codelength_bits / 1000, marker="s", linestyle="--", label="control task")
    axes[0].plot(mdl.layer, mdl.uniform_codelength_bits / 1000, color="grey", linestyle=":", label="uniform code")
    axes[0].set_ylabel("online codelength (kbits)")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=8)
    axes[1].plot(mdl.layer, mdl.compression, marker="o", label="relation labels")
    axes[1].plot(mdl.layer, mdl.control_compression, marker="s", linestyle="--", label="control task")
    axes[1].set_ylabel("compression (uniform / online)")
    for ax in axes:
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_xticks(range(int(mdl.layer.max()) + 1))
        ax.grid(alpha=0.3)
    n = int(mdl.n_train.iloc[0]) if "n_train" in mdl else None
    fig.suptitle(f"MDL (online code) of the relation probe on [x_i; x_j; x_i*x_j] per layer"
                 f"{f', {n} training arcs' if n else ''}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def markdown(df: pd.DataFrame) -> str:
    """A markdown table: floats under 1 to 4 decimals, under 100 to 2, others to 1."""
    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else f"{v:.{4 if abs(v) < 1 else 2 if abs(v) < 100 else 1}f}"
        return str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(cell(v) for v in row) + " |"
                              for row in df.itertuples(index=False)]) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=Path, nargs="+",
                    help="sweep(s) of probe=distance / depth over layers (and model.random_init)")
    ap.add_argument("--hidden-full", type=Path, nargs="*", default=[],
                    help="run or sweep dirs of the same probes on all of EWT train, drawn beside the others")
    ap.add_argument("--heads", type=Path, help="the 72-job sweep of distance probes on head context vectors")
    ap.add_argument("--mdl", type=Path, help="sweep of probe=relation probe.mdl=true over layers")
    ap.add_argument("--attention", type=Path, help="a task=heads run dir on EWT (its heads table)")
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data/ud_english_ewt"),
                    help="UD EWT, for the linear-structure baseline's UUAS on test")
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    md = []
    if args.hidden:
        hidden = pd.concat([jobs(d) for d in args.hidden], ignore_index=True)
        table = layer_table(hidden)
        n_train = int(hidden.n_train.iloc[0]) if hidden.n_train.nunique() == 1 else None
        if args.hidden_full:
            full = pd.concat([jobs(d) if not (d / "metrics.json").is_file() else
                              pd.DataFrame([json.loads((d / "metrics.json").read_text())]) for d in args.hidden_full],
                             ignore_index=True)
            full = layer_table(full.assign(model=full.model + ", all of train"))
            table = pd.concat([table, full], ignore_index=True)
        table.attrs["n_train"] = n_train
        linear = linear_uuas(args.data_dir) if args.data_dir.is_dir() else None
        layers_figure(table, args.out / "layers.png", linear)
        md += ["## Per hidden layer (EWT test)\n", markdown(table),
               f"Linear-structure baseline (each non-punctuation word joined to the next), EWT test UUAS: {linear}\n"]
    if args.heads:
        heads = jobs(args.heads)[["layer", "head", "uuas", "dspr", "epochs", "probe_seconds"]]
        md += [f"## Heads: {len(heads)} jobs, probe seconds {heads.probe_seconds.sum():.0f} in all "
               f"(median {heads.probe_seconds.median():.1f})\n"]
        if args.attention:
            grid = heads.merge(attention_accuracy(args.attention), on=["layer", "head"])
            rho = {k: tuple(spearmanr(grid[k], grid.uuas)) for k in ("dep_to_head", "head_to_dep", "attention_max")}
            heads_figure(grid, rho, args.out / "heads.png")
            md.append(markdown(pd.DataFrame([{"attention accuracy": k, "n heads": len(grid), "spearman rho": r,
                                              "p": p} for k, (r, p) in rho.items()])))
            # layers differ in both (early layers attend and write more syntax): rho within each layer too
            within = [{"layer": int(lay), "spearman rho (better direction)": spearmanr(g.attention_max, g.uuas)[0],
                       "mean uuas": g.uuas.mean(), "mean attention accuracy": g.attention_max.mean()}
                      for lay, g in grid.groupby("layer")]
            md += ["Within each layer (12 heads):\n", markdown(pd.DataFrame(within))]
            top = grid.sort_values("uuas", ascending=False).head(8)
            md += ["Top heads by UUAS from context vectors:\n", markdown(top[[
                "layer", "head", "uuas", "dspr", "dep_to_head", "head_to_dep"]])]
    if args.mdl:
        mdl = jobs(args.mdl).sort_values("layer")
        mdl_figure(mdl, args.out / "mdl.png")
        cols = ["layer", "n_train", "accuracy", "control_accuracy", "codelength_bits", "control_codelength_bits",
                "uniform_codelength_bits", "compression", "control_compression", "codelength_ratio", "probe_seconds"]
        md += ["## MDL of the relation probe per layer\n", markdown(mdl[[c for c in cols if c in mdl]])]
    (args.out / "results.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
