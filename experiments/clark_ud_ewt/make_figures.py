"""Read the run tables of `probing -m experiment=clark_ud_ewt data.split=dev,test` and write this experiment's
committed outputs: the best-heads tables (markdown, pasted into README.md) and a figure of best head vs.
best baseline per relation for both splits.

    python experiments/clark_ud_ewt/make_figures.py                 # the latest multirun under results/
    python experiments/clark_ud_ewt/make_figures.py RUN_DIR [RUN_DIR ...]
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

from probing.results import read_table  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The relations of the README table, in its order.
FOCUS = ["det", "nsubj", "obj", "amod", "case", "advmod", "aux", "compound", "nmod:poss", "mark"]


def latest_runs() -> list[Path]:
    sweeps = sorted((ROOT / "results" / "clark_ud_ewt" / "multirun").glob("*"))
    for sweep in reversed(sweeps):
        runs = sorted(p for p in sweep.iterdir() if (p / "best_heads.csv").is_file())
        if runs:
            return runs
    sys.exit("no clark_ud_ewt runs found: run  probing -m experiment=clark_ud_ewt data.split=dev,test")


def markdown(best: pd.DataFrame) -> str:
    """One split's best heads (as_is labels), ``all`` first, then by arc count."""
    b = best[best["label_set"] == "as_is"].copy()
    b["order"] = (b["relation"] != "all").astype(int)
    b = b.sort_values(["order", "n"], ascending=[True, False])
    lines = ["| relation | n | head (layer-head, 0-based) | direction | accuracy [95% CI] | best baseline (offset) "
             "| difference [95% CI] |", "|---|---:|---|---|---|---|---|"]
    for r in b.itertuples():
        mark = "**" if r.gain_ci_low > 0 else ""
        lines.append(f"| {mark}{r.relation}{mark} | {r.n} | {r.layer}-{r.head} | {r.direction} | "
                     f"{r.accuracy:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}] | {r.baseline_accuracy:.3f} "
                     f"({r.baseline_offset:+d}) | {r.gain:+.3f} [{r.gain_ci_low:+.3f}, {r.gain_ci_high:+.3f}] |")
    return "\n".join(lines)


def figure(bests: dict[str, pd.DataFrame], path: Path) -> None:
    """Best head and best baseline per focus relation, one bar group per split, with the CIs."""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    x = np.arange(len(FOCUS))
    width = 0.8 / (2 * len(bests))
    for k, (split, best) in enumerate(bests.items()):
        b = best[best["label_set"] == "as_is"].set_index("relation").reindex(FOCUS)
        off = (2 * k - len(bests)) * width + width / 2
        err = np.vstack([b["accuracy"] - b["ci_low"], b["ci_high"] - b["accuracy"]])
        ax.bar(x + off, b["accuracy"], width, yerr=err, capsize=2, label=f"best head ({split})")
        ax.bar(x + off + width, b["baseline_accuracy"], width, alpha=0.5, label=f"best offset ({split})")
    ax.set_xticks(x)
    ax.set_xticklabels(FOCUS)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("MiniLM-L6 on UD English EWT: best single head per relation vs. best fixed offset")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path)
    args = ap.parse_args()
    runs = args.runs or latest_runs()
    bests: dict[str, pd.DataFrame] = {}
    for run in runs:
        best = read_table(run, "best_heads")
        if best is None:
            sys.exit(f"{run}: no best_heads table")
        bests[str(best["split"].iloc[0])] = best
    out = HERE / "figures"
    out.mkdir(exist_ok=True)
    for split, best in bests.items():
        (out / f"best_heads_{split}.md").write_text(markdown(best) + "\n")
        print(f"## {split}\n\n{markdown(best)}\n")
    figure(bests, out / "best_heads.png")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
