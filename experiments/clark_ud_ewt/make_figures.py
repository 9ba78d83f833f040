"""Read the runs of this experiment and write its committed outputs (every number the README quotes):

- ``figures/best_heads_{dev,test}.md``: per relation, the head chosen on one half of the split's sentences and
  scored on the other (both ways, averaged), beside the in-sample maximum, the best offset and the
  Benjamini-Hochberg-adjusted decision;
- ``figures/best_heads_test_from_dev.md``: the head chosen on all of dev, scored on test;
- ``figures/trees.md``: the best single-head spanning tree of each split, and the one chosen on the other split;
- ``figures/patterns.md``: attention to [CLS], [SEP], punctuation, neighbours and row entropy per layer;
- ``figures/best_heads.png``: held-out accuracy (chosen on dev, scored on test) against the best offset.

    python experiments/clark_ud_ewt/make_figures.py       # the latest run of each kind under results/
    python experiments/clark_ud_ewt/make_figures.py RUN_DIR [RUN_DIR ...]

Runs: ``probing -m experiment=clark_ud_ewt data.split=dev,test`` (cross-fitted) and
``probing experiment=clark_ud_ewt data.split=test heads.select_split=dev``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402

from probing.results import read_table  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The relations of the README's figure, in its order.
FOCUS = ["det", "nsubj", "obj", "amod", "case", "advmod", "aux", "compound", "nmod:poss", "mark"]


def kind(run: Path) -> str:
    """``dev``, ``test`` (cross-fitted) or ``test_from_dev`` (chosen on dev), from the run's saved config."""
    cfg = yaml.safe_load((run / ".hydra" / "config.yaml").read_text())
    split, select = cfg["data"]["split"], (cfg.get("heads") or {}).get("select_split")
    return split if select is None else f"{split}_from_{select}"


def latest_runs() -> dict[str, Path]:
    """The newest run dir of each kind under results/clark_ud_ewt/heads/."""
    found: dict[str, Path] = {}
    runs = sorted((ROOT / "results" / "clark_ud_ewt" / "heads").glob("**/best_heads.csv"),
                  key=lambda p: p.stat().st_mtime)
    for csv in runs:
        found[kind(csv.parent)] = csv.parent
    if not found:
        sys.exit("no clark_ud_ewt runs found: run  probing -m experiment=clark_ud_ewt data.split=dev,test")
    return found


def _ci(lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"[{f.format(lo)}, {f.format(hi)}]"


def markdown(best: pd.DataFrame) -> str:
    """One run's best heads (as_is labels), ``all`` first, then by arc count: held out first."""
    b = best[best["label_set"] == "as_is"].copy()
    b["order"] = (b["relation"] != "all").astype(int)
    b = b.sort_values(["order", "n"], ascending=[True, False])
    lines = ["| relation | n | held-out head(s) | held-out accuracy [95% CI] | held-out gain [95% CI] | p (BH) | "
             "beats | in-sample max: head, accuracy | best offset |", "|---|---:|---|---|---|---:|---|---|---|"]
    for r in b.itertuples():
        mark = "**" if pd.notna(r.beats_baseline) and bool(r.beats_baseline) else ""
        lines.append(f"| {mark}{r.relation}{mark} | {r.n} | {r.held_out_heads} | {r.held_out_accuracy:.3f} "
                     f"{_ci(r.held_out_ci_low, r.held_out_ci_high)} | {r.held_out_gain:+.3f} "
                     f"{_ci(r.held_out_gain_ci_low, r.held_out_gain_ci_high, True)} | {r.p_adjusted:.4f} | "
                     f"{'yes' if mark else 'no'} | {r.layer}-{r.head} {r.direction}, {r.accuracy:.3f} | "
                     f"{r.baseline_accuracy:.3f} ({r.baseline_offset:+d}) |")
    return "\n".join(lines)


def trees_markdown(trees: dict[str, pd.DataFrame]) -> str:
    """The best single-head tree per split and method, in-sample and chosen on the other split."""
    lines = ["| split | sentences | method | score | in-sample best head: score | chosen on the other split: head, "
             "score | left chain | right chain |", "|---|---:|---|---|---|---|---:|---:|"]
    for split, other in (("dev", "test"), ("test", "dev")):
        t, o = trees[split], trees[other]
        for method, score in (("mst_directed", "uas"), ("mst_directed", "uuas"), ("mst_undirected", "uuas")):
            rows, orows = t[t["method"] == method], o[o["method"] == method]
            best = rows.loc[rows[score].idxmax()]
            pick = orows.loc[orows[score].idxmax()]
            held = rows[(rows["layer"] == pick["layer"]) & (rows["head"] == pick["head"])
                        & (rows["direction"] == pick["direction"])].iloc[0]
            lines.append(f"| {split} | {int(best['sentences'])} | {method} | {score} | {best['layer']}-{best['head']} {best['direction']}: "
                         f"{best[score]:.3f} | {pick['layer']}-{pick['head']}: {held[score]:.3f} | "
                         f"{best[f'left_branching_{score}']:.3f} | {best[f'right_branching_{score}']:.3f} |")
    return "\n".join(lines) + ("\n\nThe first 500 sentences of each split (those within the run's tree length); "
                               "punctuation included; directed trees are given the gold root. Left chain: every "
                               "word's head is the next word; right chain: the previous word.\n")


def patterns_markdown(patterns: dict[str, pd.DataFrame]) -> str:
    cols = ["cls", "sep", "punct", "next", "prev", "self", "entropy", "uniform_entropy"]
    lines = ["| split | layer | " + " | ".join(cols) + " |", "|---|---:|" + "---:|" * len(cols)]
    for split, p in patterns.items():
        for r in p.itertuples():
            lines.append(f"| {split} | {r.layer} | " + " | ".join(f"{getattr(r, c):.3f}" for c in cols) + " |")
    return "\n".join(lines) + "\n\nMean over heads and attending rows (special tokens kept; entropy in nats).\n"


def figure(best: pd.DataFrame, path: Path) -> None:
    """Per focus relation: the held-out accuracy of the head chosen on dev, scored on test, with its interval,
    beside the best offset on test."""
    b = best[best["label_set"] == "as_is"].set_index("relation").reindex(FOCUS)
    fig, ax = plt.subplots(figsize=(10, 3.8))
    x = np.arange(len(FOCUS))
    err = np.vstack([b["held_out_accuracy"] - b["held_out_ci_low"], b["held_out_ci_high"] - b["held_out_accuracy"]])
    ax.bar(x - 0.2, b["held_out_accuracy"], 0.4, yerr=err, capsize=2, label="head chosen on dev (test accuracy)")
    ax.bar(x + 0.2, b["held_out_baseline_accuracy"], 0.4, alpha=0.5, label="best offset (test)")
    ax.set_xticks(x)
    ax.set_xticklabels(FOCUS)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title("MiniLM-L6, UD English EWT test: the head chosen on dev against the best fixed offset")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path)
    args = ap.parse_args()
    runs = {kind(r): r for r in args.runs} if args.runs else latest_runs()
    missing = {"dev", "test", "test_from_dev"} - set(runs)
    if missing:
        sys.exit(f"missing runs: {', '.join(sorted(missing))} (see this script's docstring)")
    out = HERE / "figures"
    out.mkdir(exist_ok=True)
    for k, run in sorted(runs.items()):
        (out / f"best_heads_{k}.md").write_text(markdown(read_table(run, "best_heads")) + "\n")
    trees = {k: read_table(runs[k], "trees") for k in ("dev", "test")}
    (out / "trees.md").write_text(trees_markdown(trees))
    (out / "patterns.md").write_text(patterns_markdown({k: read_table(runs[k], "patterns_layers")
                                                        for k in ("dev", "test")}))
    figure(read_table(runs["test_from_dev"], "best_heads"), out / "best_heads.png")
    print(f"wrote {out}: " + ", ".join(f"{k} <- {v}" for k, v in sorted(runs.items())))


if __name__ == "__main__":
    main()
