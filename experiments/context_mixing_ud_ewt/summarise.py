"""Summarise a `probing -m experiment=context_mixing_ud_ewt heads.measure=...` sweep: where each measure sends
its mass per layer (Kobayashi et al. 2020's comparison of weights and norms), and the best head (or layer) per
relation under each measure. Writes shares.png and tables.md beside this script.

Run:  python experiments/context_mixing_ud_ewt/summarise.py results/context_mixing_ud_ewt/multirun/<time>
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).parent
RELATIONS = ["nsubj", "obj", "det", "amod", "case", "advmod", "aux", "mark", "nmod:poss", "compound"]
TARGETS = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punctuation"}


def markdown(df: pd.DataFrame) -> str:
    """A plain markdown table (pandas' own needs tabulate, which the project does not depend on)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def load(sweep: Path, name: str) -> pd.DataFrame:
    """One table of every finished job of the sweep (jobs without metrics.json are unfinished: left out)."""
    parts = [pd.read_csv(job / f"{name}.csv") for job in sorted(sweep.iterdir())
             if (job / "metrics.json").is_file() and (job / f"{name}.csv").is_file()]
    return pd.concat(parts, ignore_index=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sweep", type=Path)
    args = ap.parse_args()
    layers = load(args.sweep, "patterns_layers")
    measures = list(dict.fromkeys(layers["measure"]))
    fig, axes = plt.subplots(1, len(TARGETS), figsize=(4.2 * len(TARGETS), 3.4), sharey=True)
    for ax, (col, label) in zip(axes, TARGETS.items()):
        for m in measures:
            d = layers[layers["measure"] == m]
            ax.plot(d["layer"], d[col], marker="o", label=m)
        ax.set_title(f"share of each word's row to {label}")
        ax.set_xlabel("layer (0-based)")
    axes[0].set_ylabel("mean share over words")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "shares.png", dpi=120)

    out = ["## Share of each word's row going to [CLS] / [SEP] / punctuation, per layer (EWT dev)\n"]
    wide = layers.pivot_table(index="layer", columns="measure", values=list(TARGETS), sort=False).round(3)
    wide.columns = [f"{TARGETS[t]} {m}" for t, m in wide.columns]
    out.append(markdown(wide.reset_index()))
    best = load(args.sweep, "best_heads")
    best = best[(best["label_set"] == "as_is") & best["relation"].isin(RELATIONS)]
    rows = []
    for rel in RELATIONS:
        row = {"relation": rel}
        for m in measures:
            b = best[(best["relation"] == rel) & (best["measure"] == m)]
            if len(b):
                b = b.iloc[0]
                where = f"{b['layer']}-{b['head']}" if m in ("attention", "norm") else f"L{b['layer']}"
                row[m] = (f"{where} {b['direction']} {b['accuracy']:.3f} [{b['ci_low']:.3f}, {b['ci_high']:.3f}]"
                          f" vs {b['baseline_accuracy']:.3f}")
        rows.append(row)
    out.append("\n\n## Best head (per-head measures) or layer (per-layer measures) per relation, with 95% CI, "
               "against the best offset\n")
    out.append(markdown(pd.DataFrame(rows)))
    (HERE / "tables.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
