"""Tables and figures of the head-importance experiment from ``task=importance`` run dirs (one per readout). Every
number the README quotes is in one of the tables written here:

- ``readouts.md``: each readout's unablated score beside its trivial baselines (left and right chains; the
  majority label), the margin over the best of them and whether it clears ``importance.baseline_margin``, the
  score with every head ablated, the readout's fit, the evaluation arcs and the stage wall times;
- ``heads.md``: per readout, the five largest single-head drops on all arcs and the three smallest, the five heads
  of largest gradient importance and every leave-one-layer-in drop, with their bootstrap intervals and (drops)
  the one-sided bootstrap p-value of harm adjusted across the 72 heads (the 6 layers);
- ``per_relation.md``: per readout and relation, the head whose ablation costs most on a seeded half of the
  evaluation sentences, its drop there and its drop and interval on the other half, and how many heads' drops
  pass the test adjusted across heads on all sentences; ``per_relation_summary.md``: per readout, the mean drop of
  the chosen heads on the choosing half against the scoring half (the winner's curse), the held-out intervals
  above and below 0, and the heads passing over all relations;
- ``link.md``: Spearman over heads between attention accuracy and single-head importance, per readout, relation
  and direction, with its interval, one-sided bootstrap p, Benjamini-Hochberg p_adjusted and decision;
- ``link_summary.md``: per readout and direction, the links tested, those BH-positive, and those whose interval
  lies above or below 0;
- ``pruning.md``: the pruning curves on all arcs, each point with its interval over sentences (random orders: their
  mean curve, resampled jointly, and the min-max band of the single orders), the all-heads-ablated floor and the
  share of the room down to it lost;
- ``prunable.md``: per readout and order (each random order, and their mean curve), the largest fraction of heads
  removed with the score within 5 points of the unablated score, the score there with its interval, the floor, the
  room down to it and the share of it lost there, and the curve's peak;
- ``passing.md`` (with ``--passing``): ``per_relation.md``'s columns from runs of the same readouts, sentences and
  seed with more bootstrap resamples (enough for a head's drop to pass the test adjusted across 72 heads);
- ``pruning_refit.md`` (with ``--refit``): the curves of a run with ``importance.pruning_refit=true`` (the readout
  refitted at every point with that point's heads ablated) beside the same orders' curves of the frozen run of
  the same readout, sentences and seed.

Figures (named by readout): ``importance_vs_attention_<readout>.png`` (per relation, the single-head drop heatmap
beside the dep→head attention-accuracy heatmap), ``pruning_all_<readout>.png`` (curves on all arcs with their
intervals, the random mean's interval and the band of the single random orders, the 5-point line, the
all-heads-ablated floor and the trivial baselines), ``importance_<relation>_<readout>.png`` (the
run's scatter of attention accuracy against importance). Attention accuracy is each run's own ``heads`` table
(computed on the evaluation sentences), or ``--heads`` (a ``task=heads`` run dir over the same sentences).

    python experiments/head_importance_ud_ewt/summarise.py RUN_DIR [RUN_DIR ...] [--heads HEADS_RUN_DIR] \
        [--relations all nsubj det ...] [--passing RUN_DIR ...] [--refit REFIT_RUN_DIR] [--frozen FROZEN_RUN_DIR] \
        [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from probing.results import read_table  # noqa: E402
from probing.tasks.importance import _within_5_points  # noqa: E402

HERE = Path(__file__).resolve().parent
LABELS = {"accuracy": "relation-probe accuracy", "uas": "attachment-readout UAS", "cosine": "embedding cosine",
          "mlm_accuracy": "masked-LM accuracy"}
STAGES = ("probe", "ablation", "gradient", "attention_accuracy", "pruning")


def heatmaps(imp: pd.DataFrame, link: pd.DataFrame, accuracy: pd.DataFrame, relations: list[str], metric: str,
             path: Path) -> None:
    one = imp[(imp.method == "ablation") & (imp.metric == f"{metric}_drop")]
    fig, axes = plt.subplots(len(relations), 2, figsize=(9, 2.4 * len(relations)), squeeze=False, dpi=90)
    for row, rel in zip(axes, relations):
        drop = one[one.relation == rel].pivot(index="layer", columns="head", values="score")
        acc = accuracy[(accuracy.relation == rel)].pivot(index="layer", columns="head", values="accuracy")
        im0 = row[0].imshow(drop.to_numpy(float), cmap="magma", aspect="auto")
        im1 = row[1].imshow(acc.to_numpy(float), cmap="viridis", aspect="auto", vmin=0, vmax=1)
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


def pruning_figure(prune: pd.DataFrame, metrics: dict, metric: str, title: str, path: Path) -> None:
    """The curves on all arcs: informed orders and the random orders' mean as lines with their 95% intervals
    over sentences, the single random orders as a min-max band, the unablated score minus 5 points dashed, the
    all-heads-ablated floor and the trivial baselines dotted."""
    t = prune[prune.relation == "all"]
    fig, ax = plt.subplots(figsize=(5.6, 3.8), dpi=90)
    for order, s in t.groupby("order", sort=True):
        s = s.sort_values("fraction_removed")
        x = s.fraction_removed.to_numpy(float)
        if order == "random":
            band = s.groupby("fraction_removed")["score"]
            ax.fill_between(band.min().index.to_numpy(float), band.min().to_numpy(), band.max().to_numpy(),
                            alpha=0.12, color="grey", label=f"random ({s.seed.nunique()} orders: min-max)")
            continue
        mean = order == "random_mean"
        (line,) = ax.plot(x, s.score.to_numpy(), marker="o", ms=3, color="dimgrey" if mean else None,
                          label="random (mean)" if mean else str(order))
        ax.fill_between(x, s.ci_low.to_numpy(float), s.ci_high.to_numpy(float), alpha=0.2, color=line.get_color())
    clean = metrics[f"clean_{metric}"]
    ax.axhline(clean - 0.05, color="black", ls="--", lw=0.8, label="unablated − 5 points")
    ax.axhline(float(t.floor.iloc[0]), color="tab:purple", ls=":", lw=1, label="all heads ablated")
    for name, value in (metrics.get("readout_baselines") or {}).items():
        ax.axhline(value, color="tab:red", ls=":", lw=0.9)
        ax.annotate(name, (1.0, value), xytext=(-2, 2), textcoords="offset points", ha="right", fontsize=7,
                    color="tab:red")
    ax.set_xlabel("fraction of heads removed")
    ax.set_ylabel(LABELS.get(metric, metric))
    ax.legend(fontsize=7)
    ax.set_title(f"{title} · all arcs", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def markdown(df: pd.DataFrame) -> str:
    """A markdown table, floats to 3 decimals, p-values to 4, missing values empty."""
    def cell(col: str, v) -> str:
        if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA:
            return ""
        if isinstance(v, (float, np.floating)):
            return f"{v:.4f}" if col in ("p", "p_adjusted") or col.startswith("smallest_p") else f"{v:.3f}"
        return str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(c, v) for c, v in zip(df.columns, row)) + " |"
              for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def readout_row(readout: str, metric: str, metrics: dict, imp: pd.DataFrame, prune: pd.DataFrame) -> dict:
    """metrics.json's readout against its baselines, its score with every head ablated, fit and timings."""
    base = metrics.get("readout_baselines") or {}
    t = prune[(prune.relation == "all")]
    fit = metrics.get("readout_fit") or {}
    row = {"readout": readout, "metric": metric, "eval_sentences": metrics["eval_sentences"],
           "arcs": int(imp[(imp.method == "ablation") & (imp.relation == "all")].n.iloc[0]),
           "train_sentences": metrics["train_sentences"], "unablated": metrics[f"clean_{metric}"],
           "baselines": ", ".join(f"{k} {v:.3f}" for k, v in base.items()),
           "best_baseline": max(base.values()) if base else None, "margin": metrics.get("readout_margin"),
           "beats_by_0.05": metrics.get("readout_beats_baselines"),
           "all_heads_ablated": float(t.floor.iloc[0]),
           "room_to_floor": metrics[f"clean_{metric}"] - float(t.floor.iloc[0]),
           "fit": (f"held-out UAS {fit['heldout_uas']:.3f} on {fit['heldout_sentences']} sentences, best epoch "
                   f"{fit['best_epoch']} of {fit['epochs_run']}" if fit.get("heldout_uas") is not None else "")}
    seconds = metrics.get("stage_seconds", {})
    row.update({f"{s}_s": round(seconds[s]) for s in STAGES if s in seconds})
    row["total_s"] = round(metrics["seconds"]) if "seconds" in metrics else None
    return row


def head_rows(readout: str, metric: str, imp: pd.DataFrame, top: int = 5) -> list[dict]:
    """The largest single-head drops and gradient importances on all arcs, and every leave-one-layer-in drop."""
    rows = []
    a = imp[imp.relation == "all"]
    for method, m in (("ablation", f"{metric}_drop"), ("gradient", "gradient"), ("layer_in", f"{metric}_drop")):
        t = a[(a.method == method) & (a.metric == m)]
        if method == "layer_in":
            t = t.sort_values("layer")
        else:  # stable: ties keep head order, as metrics.json's most_important_* does
            ranked = t.sort_values("score", ascending=False, kind="stable")
            t = ranked.head(top) if method == "gradient" else pd.concat([ranked.head(top), ranked.tail(3)])
        for r in t.itertuples():
            head = f"L{int(r.layer)}" + ("" if pd.isna(r.head) else f"H{int(r.head)}")
            rows.append({"readout": readout, "method": method, "measure": m,
                         "head": head if method != "layer_in" else f"only L{int(r.layer)} kept",
                         "score": r.score, "ci_low": r.ci_low, "ci_high": r.ci_high, "p_adjusted": r.p_adjusted})
    return rows


def per_relation_rows(readout: str, heldout: pd.DataFrame) -> list[dict]:
    """The run's importance_heldout rows: the head chosen on one half, its drop on the other."""
    return [{"readout": readout, "relation": r.relation, "head": f"L{int(r.layer)}H{int(r.head)}",
             "drop_choosing_half": r.chosen_drop, "arcs_scoring_half": int(r.n), "drop": r.score,
             "ci_low": r.ci_low, "ci_high": r.ci_high, "heads_passing": int(r.heads_passing),
             "heads_tested": int(r.heads_tested)}
            for r in heldout.sort_values("relation").itertuples()]


def per_relation_summary(per_rel: pd.DataFrame) -> pd.DataFrame:
    """Per readout: relations, the chosen heads' mean drop where chosen and held out, held-out intervals above
    and below 0, and heads passing (summed over relations)."""
    return pd.DataFrame([{"readout": r, "relations": len(t), "mean_drop_choosing_half": t.drop_choosing_half.mean(),
                          "mean_drop_scoring_half": t["drop"].mean(), "ci_above_0": int((t.ci_low > 0).sum()),
                          "ci_below_0": int((t.ci_high < 0).sum()), "heads_passing": int(t.heads_passing.sum())}
                         for r, t in per_rel.groupby("readout", sort=False)])


def link_summary(link: pd.DataFrame) -> pd.DataFrame:
    """Per readout and direction: relations tested, BH-positive links, intervals above 0 and below 0."""
    rows = []
    for (readout, direction), t in link.groupby(["readout", "direction"], sort=False):
        rows.append({"readout": readout, "direction": direction, "relations": len(t),
                     "positive_bh": int(t.positive.fillna(False).astype(bool).sum()),
                     "ci_above_0": int((t.ci_low > 0).sum()), "ci_below_0": int((t.ci_high < 0).sum()),
                     "smallest_p": float(t.p.min()), "smallest_p_adjusted": float(t.p_adjusted.min())})
    return pd.DataFrame(rows)


def pruning_table(prune: pd.DataFrame) -> pd.DataFrame:
    """The ``all`` curves of one run: a row per informed order and the random mean, and fraction removed, with
    its interval over sentences, the single random orders' min and max beside the mean, the floor and the share
    of the room down to it lost."""
    t = prune[prune.relation == "all"]
    band = (t[t.order == "random"].groupby("fraction_removed")["score"].agg(orders_min="min", orders_max="max"))
    out = t[t.order != "random"].merge(band, how="left", left_on="fraction_removed", right_index=True)
    out.loc[out.order != "random_mean", ["orders_min", "orders_max"]] = np.nan
    out = out[["readout", "order", "fraction_removed", "heads_removed", "score", "ci_low", "ci_high", "orders_min",
               "orders_max", "floor", "share_to_floor"]]
    return out.astype({"fraction_removed": float, "heads_removed": int}).reset_index(drop=True)


def prunable_rows(readout: str, prune: pd.DataFrame) -> list[dict]:
    """Per order (each random order, and the random orders' mean curve): the largest fraction removed before the
    all-arcs score first falls more than 5 points below the unablated score (metrics.json's rule), the score
    there, and the curve's peak with the fraction where it is reached."""
    t = prune[prune.relation == "all"]
    curves = [(o, "", s.set_index("fraction_removed")) for o, s in t.groupby("order", sort=True)
              if o not in ("random", "random_mean")]
    curves += [("random", str(int(seed)), s.set_index("fraction_removed"))
               for seed, s in t[t.order == "random"].groupby("seed", sort=True)]
    mean = t[t.order == "random_mean"]
    if len(mean):
        curves.append(("random", "mean", mean.set_index("fraction_removed")))
    heads = t.groupby("fraction_removed")["heads_removed"].first()
    rows = []
    for order, seed, c in curves:
        c = c.sort_index()
        curve = c.score
        f = _within_5_points(curve)
        rows.append({"readout": readout, "order": order, "seed": seed, "unablated": float(curve.iloc[0]),
                     "within_5_points_to": f, "heads_removed": int(heads[f]), "score_there": float(curve[f]),
                     "ci_low": float(c.ci_low[f]), "ci_high": float(c.ci_high[f]), "floor": float(c.floor.iloc[0]),
                     "room": float(curve.iloc[0] - c.floor.iloc[0]), "share_to_floor_there": float(c.share_to_floor[f]),
                     "peak": float(curve.max()), "peak_at": float(curve.idxmax())})
    return rows


def refit_table(frozen: pd.DataFrame, refit: pd.DataFrame) -> pd.DataFrame:
    """The all-arcs curves of a refit run beside the frozen run's curves of the same orders (the gradient
    order is chosen with the frozen readout in both, so the orders are the same): a row per order and point (the
    single random orders, not their mean)."""
    cols = ["order", "seed", "fraction_removed", "heads_removed"]
    keep = ["score", "ci_low", "ci_high", "floor"]
    f = frozen[(frozen.relation == "all") & (frozen.order != "random_mean")][cols + keep]
    r = refit[(refit.relation == "all") & (refit.order != "random_mean")][cols + keep]
    t = f.merge(r, on=cols, suffixes=("_frozen", "_refit"))
    t.insert(0, "readout", str(refit.readout.iloc[0]))
    t["seed"] = t.seed.astype("string").fillna("")
    t["refit_minus_frozen"] = t.score_refit - t.score_frozen
    return t.astype({"fraction_removed": float, "heads_removed": int}).reset_index(drop=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dirs", type=Path, nargs="+", help="task=importance run dirs (one per readout)")
    ap.add_argument("--heads", type=Path, help="a task=heads run dir over the same sentences (else each run's own)")
    ap.add_argument("--relations", nargs="+", default=["all", "nsubj", "det", "case", "amod"])
    ap.add_argument("--passing", type=Path, nargs="+", default=[],
                    help="runs with more bootstrap resamples: their held-out rows and heads passing (passing.md)")
    ap.add_argument("--refit", type=Path, help="a run with importance.pruning_refit=true (pruning_refit.md)")
    ap.add_argument("--frozen", type=Path, help="the frozen run --refit is set beside (default: the run dir of "
                                                "the same readout)")
    ap.add_argument("--out", type=Path, default=HERE, help="where the tables and figures go (default: here)")
    args = ap.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    fixed = read_table(args.heads, "heads") if args.heads else None
    links, prunes, readouts, heads, per_rel, prunable = [], [], [], [], [], []
    for run_dir in args.run_dirs:
        imp, link, prune, held = (read_table(run_dir, n) for n in ("importance", "importance_link", "pruning",
                                                                   "importance_heldout"))
        metrics = json.loads((run_dir / "metrics.json").read_text())
        readout, metric = str(imp.readout.iloc[0]), metrics["conventions"]["score"]
        acc = fixed if fixed is not None else read_table(run_dir, "heads")
        acc = acc[(acc.label_set == "as_is") & (acc.measure == "attention") & (acc.direction == "dep_to_head")]
        rels = [r for r in args.relations if r in set(imp.relation)]
        heatmaps(imp, link, acc, rels, metric, out / f"importance_vs_attention_{readout}.png")
        pruning_figure(prune, metrics, metric, f"MiniLM · EWT dev · {readout} readout",
                       out / f"pruning_all_{readout}.png")
        for rel in ("all", "nsubj", "det"):
            f = run_dir / "figures" / f"importance_{rel}.png"
            if f.is_file():
                shutil.copy(f, out / f"importance_{rel}_{readout}.png")
        links.append(link)
        prunes.append(pruning_table(prune))
        readouts.append(readout_row(readout, metric, metrics, imp, prune))
        heads += head_rows(readout, metric, imp)
        per_rel += per_relation_rows(readout, held)
        prunable += prunable_rows(readout, prune)
    if args.passing:
        rows = []
        for d in args.passing:
            metrics = json.loads((d / "metrics.json").read_text())
            rows += [{**r, "resamples": metrics["heads_passing_power"]["resamples"]}
                     for r in per_relation_rows(str(metrics["readout"]), read_table(d, "importance_heldout"))]
        (out / "passing.md").write_text(markdown(pd.DataFrame(rows)))
    if args.refit:
        refit = read_table(args.refit, "pruning")
        frozen = (read_table(args.frozen, "pruning") if args.frozen else
                  next(read_table(d, "pruning") for d in args.run_dirs
                       if str(read_table(d, "pruning").readout.iloc[0]) == str(refit.readout.iloc[0])))
        (out / "pruning_refit.md").write_text(markdown(refit_table(frozen, refit)))
    link = pd.concat(links, ignore_index=True).sort_values(["readout", "direction", "relation"])
    link = link[["readout", "relation", "direction", "n_heads", "rho", "ci_low", "ci_high", "ci_resampled", "p",
                 "p_adjusted", "positive"]]
    (out / "link.md").write_text(markdown(link))
    (out / "link_summary.md").write_text(markdown(link_summary(link)))
    (out / "pruning.md").write_text(markdown(pd.concat(prunes, ignore_index=True)))
    (out / "readouts.md").write_text(markdown(pd.DataFrame(readouts)))
    (out / "heads.md").write_text(markdown(pd.DataFrame(heads)))
    (out / "per_relation.md").write_text(markdown(pd.DataFrame(per_rel)))
    (out / "per_relation_summary.md").write_text(markdown(per_relation_summary(pd.DataFrame(per_rel))))
    (out / "prunable.md").write_text(markdown(pd.DataFrame(prunable)))


if __name__ == "__main__":
    main()
