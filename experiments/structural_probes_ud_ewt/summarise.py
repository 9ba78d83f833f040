"""Figures and tables of the structural-probes experiment from its sweeps and a ``task=heads`` run:

- ``layers.png``: UUAS, DSpr, root accuracy and NSpr per hidden layer (0 = the embedding layer) of the trained
  model beside the random-init one and the linear chain (``--hidden``: distance/depth runs or sweeps on all of EWT
  train, over layers and ``model.random_init``);
- ``heads.png``: the layer x head grid of distance-probe UUAS from each head's context vectors (``--heads``: the
  72-job sweep) beside the same heads' attention accuracy (``--attention``: relation ``all``, the better of the two
  directions), and their scatter with Spearman's rho over the 72 heads;
- ``subsample.png``: the same probes trained on a subsample of EWT train (``--hidden-subsample``,
  ``--heads-subsample``: the ``probe.max_train_sentences`` sweeps) against all of it, per layer and per head;
- ``mdl.png``: online codelength and compression per layer of the relation probe and of its control task
  (``--mdl``: ``probe=relation probe.mdl=true`` runs or sweeps, one curve per number of training arcs);
- ``results.md``: the numbers behind the figures (markdown tables), pasted into the README.

    python experiments/structural_probes_ud_ewt/summarise.py --hidden DIR [DIR ...] --heads SWEEP \
        --attention HEADS_RUN --mdl DIR [DIR ...] [--hidden-subsample DIR ...] [--heads-subsample SWEEP] [--out DIR]
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

from probing.config import DataConfig, DataKind, ProbeConfig  # noqa: E402
from probing.corpus.cache import load_corpus_cached  # noqa: E402
from probing.probes.mdl import block_ends  # noqa: E402
from probing.probes.pairs import corpus_words, gold_arcs  # noqa: E402
from probing.probes.structural.metrics import gold_edges, mst_edges  # noqa: E402
from probing.results import read_table  # noqa: E402

HERE = Path(__file__).resolve().parent
STRUCTURAL = ("uuas", "dspr", "root_accuracy", "nspr")
TITLES = {"uuas": "UUAS (distance probe)", "dspr": "DSpr (distance probe)",
          "root_accuracy": "root accuracy (depth probe)", "nspr": "NSpr (depth probe)"}


def read_job(path: Path) -> dict:
    """A job's ``metrics.json``, with ``probe_seconds`` the fit's seconds (``stage_seconds.probe``)."""
    m = json.loads((path / "metrics.json").read_text())
    if "probe_seconds" not in m:
        m["probe_seconds"] = (m.get("stage_seconds") or {}).get("probe")
    return m


def runs(path: Path) -> pd.DataFrame:
    """One row per finished job: a run dir's ``metrics.json``, or those of a sweep's numbered job dirs (jobs
    without one are left out, and counted)."""
    if (path / "metrics.json").is_file():
        return pd.DataFrame([{**read_job(path), "dir": str(path)}])
    rows, missing = [], []
    for d in sorted(p for p in path.iterdir() if p.is_dir() and p.name.isdigit()):
        f = d / "metrics.json"
        if f.is_file():
            rows.append({**read_job(d), "job": int(d.name), "dir": str(d)})
        else:
            missing.append(d.name)
    if missing:
        print(f"{path}: {len(missing)} job(s) without metrics.json: {', '.join(missing)}")
    return pd.DataFrame(rows)


def gather(paths: list[Path]) -> pd.DataFrame:
    return pd.concat([runs(p) for p in paths], ignore_index=True)


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
    return pd.DataFrame(out).sort_values(["model", "layer"]).reset_index(drop=True)


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


def control_pairs_seen(data_dir: Path, n_arcs: int | None, seed: int = 0) -> pd.DataFrame:
    """Per block of the relation probe's online code on ``n_arcs`` training arcs (the probe's own subsample and
    order, ``probe`` defaults): the share of arcs whose (dependent type, head type) pair -- the key of the control
    label -- occurs in the arcs before the block, and the entropy (bits) of the training labels."""
    pcfg = ProbeConfig()
    corpus = load_corpus_cached(DataConfig(name="ud_ewt", kind=DataKind.ud_ewt, dir=str(data_dir)), "train",
                                "results/cache")
    arcs = gold_arcs(corpus_words(corpus, range(len(corpus)), pcfg.label_set == "base", tuple(pcfg.punct_upos)),
                     pcfg.exclude_punct)
    if n_arcs is not None and n_arcs < len(arcs):
        arcs = arcs.take(np.sort(np.random.default_rng(seed).choice(len(arcs), size=n_arcs, replace=False)))
    order = np.random.default_rng(seed).permutation(len(arcs))
    keys, first = pd.factorize(pd.Series(arcs.word[order]).astype(str) + "\x1f" + arcs.head_word[order].astype(str))
    first_seen = pd.Series(np.arange(len(keys))).groupby(keys).transform("min").to_numpy()
    ends = block_ends(len(arcs))
    share = [float(np.mean(first_seen[lo:hi] < lo)) for lo, hi in zip(ends[:-1], ends[1:]) if hi > lo]
    p = pd.Series(arcs.relation).value_counts(normalize=True).to_numpy()
    return pd.DataFrame({"n_arcs": len(arcs), "train_items": [int(lo) for lo, hi in zip(ends[:-1], ends[1:]) if hi > lo],
                         "pair_seen_before": share, "label_entropy_bits": float(-(p * np.log2(p)).sum()),
                         "n_labels": len(p)})


def _label(model: str) -> str:
    return f"{model} (random init)" if "random" in model else model


def layers_figure(table: pd.DataFrame, path: Path, linear: float | None, n_sentences: int | None) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), dpi=80)
    for ax, metric in zip(axes, STRUCTURAL):
        for model, g in table.groupby("model"):
            if metric in g and g[metric].notna().any():
                random = "random" in model
                ax.plot(g.layer, g[metric], marker="s" if random else "o", linestyle="--" if random else "-",
                        label=_label(model))
        if metric == "uuas" and linear is not None:
            ax.axhline(linear, color="grey", linestyle=":", label=f"linear chain ({linear:.3f})")
        ax.set_title(TITLES[metric], fontsize=10)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_xticks(range(int(table.layer.max()) + 1))
        ax.grid(alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=8)
    train = f"all {n_sentences:,} sentences of EWT train" if n_sentences else "EWT train"
    fig.suptitle(f"MiniLM on UD EWT test: structural probes per hidden layer (trained on {train}; stopped on dev)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def subsample_table(full: pd.DataFrame, sub: pd.DataFrame) -> pd.DataFrame:
    """Per model and layer: each metric with all of train, on the subsample, and the difference."""
    both = full.merge(sub, on=["model", "layer"], suffixes=("_full", "_sub"))
    out = both[["model", "layer"]].copy()
    for k in STRUCTURAL:
        if f"{k}_full" in both and f"{k}_sub" in both:
            out[f"{k} full"], out[f"{k} sub"] = both[f"{k}_full"], both[f"{k}_sub"]
            out[f"{k} diff"] = both[f"{k}_full"] - both[f"{k}_sub"]
    return out


def subsample_figure(comp: pd.DataFrame, heads: pd.DataFrame | None, n_sub: int | None, path: Path) -> None:
    panels = 3 if heads is not None else 2
    fig, axes = plt.subplots(1, panels, figsize=(4.6 * panels, 3.4), dpi=80)
    for ax, metric in zip(axes, ("uuas", "root_accuracy")):
        for model, g in comp.groupby("model"):
            if f"{metric} full" not in g:
                continue
            line = ax.plot(g.layer, g[f"{metric} full"], marker="o", label=f"{_label(model)}, all of train")[0]
            ax.plot(g.layer, g[f"{metric} sub"], marker="o", linestyle=":", color=line.get_color(), alpha=0.7,
                    label=f"{_label(model)}, subsample")
        ax.set_title(TITLES[metric], fontsize=9)
        ax.set_xlabel("layer (0 = embeddings)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    if heads is not None:
        ax = axes[2]
        ax.scatter(heads.uuas_sub, heads.uuas_full, s=12)
        lo, hi = heads[["uuas_sub", "uuas_full"]].min().min(), heads[["uuas_sub", "uuas_full"]].max().max()
        ax.plot([lo, hi], [lo, hi], color="grey", linestyle=":")
        ax.set_xlabel("UUAS, subsample")
        ax.set_ylabel("UUAS, all of train")
        ax.set_title(f"{len(heads)} heads' context vectors (distance probe)", fontsize=9)
        ax.grid(alpha=0.3)
    fig.suptitle(f"All of EWT train against a subsample of it ({n_sub:,} words)" if n_sub else
                 "All of EWT train against a subsample of it", fontsize=10)
    fig.tight_layout()
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
    fig.suptitle("MiniLM heads on UD EWT test (probes trained on all of EWT train)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def mdl_figure(mdl: pd.DataFrame, path: Path, block_layer: int = 3) -> None:
    """Bits per arc and compression per layer, one pair of curves (task, control) per training-set size, and
    the bits per arc of each block of layer ``block_layer``'s online code against the arcs before it."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.6), dpi=80)
    for n, g in mdl.groupby("n_train"):
        g = g.sort_values("layer")
        line = axes[0].plot(g.layer, g.codelength_bits / n, marker="o", label=f"relation labels, {n:,} arcs")[0]
        c = line.get_color()
        axes[0].plot(g.layer, g.control_codelength_bits / n, marker="s", linestyle="--", color=c,
                     label=f"control task, {n:,} arcs")
        axes[1].plot(g.layer, g.compression, marker="o", color=c)
        axes[1].plot(g.layer, g.control_compression, marker="s", linestyle="--", color=c)
        one = g[g.layer == block_layer]
        if len(one):
            b = read_table(Path(one.dir.iloc[0]), "mdl_blocks")
            b = b[b.train_items > 0]
            for labels, style in (("task", "-"), ("control", "--")):
                bb = b[b["labels"] == labels]
                axes[2].plot(bb.train_items, bb.bits / (bb.end - bb.start), marker=".", linestyle=style, color=c)
    k = mdl.uniform_codelength_bits.iloc[0] / mdl.n_train.iloc[0]
    for ax in (axes[0], axes[2]):
        ax.axhline(k, color="grey", linestyle=":", label="uniform code (log2 K)" if ax is axes[0] else None)
    axes[0].set_ylabel("online codelength per arc (bits)")
    axes[1].axhline(1.0, color="grey", linestyle=":")
    axes[1].set_ylabel("compression (uniform / online)")
    for ax in axes[:2]:
        ax.set_xlabel("layer (0 = embeddings)")
        ax.set_xticks(range(int(mdl.layer.max()) + 1))
    axes[2].set_xscale("log")
    axes[2].set_xlabel(f"arcs before the block (layer {block_layer})")
    axes[2].set_ylabel("bits per arc of the block")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=5, fontsize=7)
    fig.suptitle("MDL (online code) of the relation probe on [x_i; x_j; x_i*x_j] per layer, and of its control task "
                 "(solid: relation labels, dashed: control)", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
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


def heads_section(heads: pd.DataFrame, attention: Path | None, out: Path) -> list[str]:
    md = [f"## Heads: {len(heads)} jobs, probe seconds {heads.probe_seconds.sum():.0f} in all "
          f"(median {heads.probe_seconds.median():.1f}), {int(heads.n_train.iloc[0]):,} training words\n"]
    if attention is None:
        return md
    grid = heads.merge(attention_accuracy(attention), on=["layer", "head"])
    rho = {k: tuple(spearmanr(grid[k], grid.uuas)) for k in ("dep_to_head", "head_to_dep", "attention_max")}
    heads_figure(grid, rho, out / "heads.png")
    md.append(markdown(pd.DataFrame([{"attention accuracy": k, "n heads": len(grid), "spearman rho": r, "p": p}
                                     for k, (r, p) in rho.items()])))
    # layers differ in both (early layers attend and write more syntax): rho within each layer too
    within = [{"layer": int(lay), "spearman rho (better direction)": spearmanr(g.attention_max, g.uuas)[0],
               "mean uuas": g.uuas.mean(), "mean attention accuracy": g.attention_max.mean()}
              for lay, g in grid.groupby("layer")]
    md += ["Within each layer (12 heads):\n", markdown(pd.DataFrame(within))]
    top = grid.sort_values("uuas", ascending=False).head(8)
    md += ["Top heads by UUAS from context vectors:\n",
           markdown(top[["layer", "head", "uuas", "dspr", "dep_to_head", "head_to_dep"]])]
    best = grid.loc[grid.attention_max.idxmax()]
    md.append(f"Best attending head: L{int(best.layer)}H{int(best['head'])} (attention accuracy "
              f"{best.attention_max:.4f}, UUAS from its context vectors {best.uuas:.4f}, rank "
              f"{int((grid.uuas > best.uuas).sum()) + 1} of {len(grid)})\n")
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=Path, nargs="+",
                    help="run or sweep dirs of probe=distance / depth over layers (and model.random_init), all train")
    ap.add_argument("--hidden-subsample", type=Path, nargs="*", default=[],
                    help="run or sweep dirs of the same probes on a subsample of EWT train, for subsample.png")
    ap.add_argument("--heads", type=Path, help="the 72-job sweep of distance probes on head context vectors")
    ap.add_argument("--heads-subsample", type=Path, help="the same sweep on a subsample of EWT train")
    ap.add_argument("--mdl", type=Path, nargs="*", default=[],
                    help="run or sweep dirs of probe=relation probe.mdl=true over layers")
    ap.add_argument("--attention", type=Path, help="a task=heads run dir on EWT (its heads table)")
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data/ud_english_ewt"),
                    help="UD EWT, for the linear-structure baseline's UUAS on test")
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    md, table, heads = [], None, None
    if args.hidden:
        hidden = gather(args.hidden)
        table = layer_table(hidden)
        sentences = int(hidden.n_train_sentences.max()) if "n_train_sentences" in hidden else None
        linear = linear_uuas(args.data_dir) if args.data_dir.is_dir() else None
        layers_figure(table, args.out / "layers.png", linear, sentences)
        md += [f"## Per hidden layer (EWT test; probes trained on all of EWT train, {int(hidden.n_train.max()):,} "
               "words)\n", markdown(table),
               f"Linear-structure baseline (each non-punctuation word joined to the next), EWT test UUAS: {linear}\n"]
    if args.heads:
        heads = runs(args.heads)
        md += heads_section(heads, args.attention, args.out)
    if table is not None and args.hidden_subsample:
        sub = gather(args.hidden_subsample)
        n_sub = int(sub.n_train.iloc[0]) if sub.n_train.nunique() == 1 else None
        comp = subsample_table(table, layer_table(sub))
        both = None
        if heads is not None and args.heads_subsample:
            both = heads.merge(runs(args.heads_subsample), on=["layer", "head"], suffixes=("_full", "_sub"))
        subsample_figure(comp, both, n_sub, args.out / "subsample.png")
        md += [f"## All of EWT train against the {n_sub:,}-word subsample (per hidden layer)\n", markdown(comp)]
        if both is not None:
            diff = both.uuas_full - both.uuas_sub
            md.append(f"Heads ({len(both)}): UUAS all of train minus subsample: median {diff.median():.4f}, "
                      f"min {diff.min():.4f}, max {diff.max():.4f}; Spearman between the two grids "
                      f"{spearmanr(both.uuas_full, both.uuas_sub)[0]:.4f}\n")
    if args.mdl:
        mdl = gather(args.mdl).sort_values(["n_train", "layer"])
        mdl_figure(mdl, args.out / "mdl.png")
        cols = ["layer", "n_train", "accuracy", "control_accuracy", "codelength_bits", "control_codelength_bits",
                "uniform_codelength_bits", "compression", "control_compression", "codelength_ratio", "probe_seconds"]
        md += ["## MDL of the relation probe per layer\n", markdown(mdl[[c for c in cols if c in mdl]])]
        if args.data_dir.is_dir():
            # the control label is a function of the arc's type pair: how many pairs has a block's code seen?
            seen = pd.concat([control_pairs_seen(args.data_dir, int(n)) for n in sorted(mdl.n_train.unique())]
                             + [control_pairs_seen(args.data_dir, None)], ignore_index=True)
            md += ["Control task: share of a block's arcs whose (dependent, head) type pair occurs before the block "
                   "(last five blocks), and the entropy of the training labels (the codelength per arc of a probe "
                   "that predicts their marginal distribution):\n",
                   markdown(seen.groupby("n_arcs").tail(5))]
    (args.out / "results.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
