"""Summarise a `probing -m experiment=context_mixing_ud_ewt heads.measure=...` sweep: where each measure sends
its mass per layer (Kobayashi et al. 2020's comparison of weights and norms), and the best head (or layer)
per relation under each measure: held out (chosen on one half of the sentences, scored on the other, both
ways; the gain over the best offset tested one-sided and adjusted across relations, Benjamini-Hochberg)
beside the in-sample maximum, which the choice biases upward. Writes shares.png and tables.md beside this
script.

Run:  python experiments/context_mixing_ud_ewt/summarise.py \
          results/context_mixing_ud_ewt/heads/multirun/<time>
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).parent
PER_HEAD = ("attention", "norm")  # measures with one map per head; the others have one per layer
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


def where(measure: str, layer: int, head: int) -> str:
    """``layer-head`` for a per-head measure, ``L<layer>`` for a per-layer one."""
    return f"{layer}-{head}" if measure in PER_HEAD else f"L{layer}"


def folds(measure: str, held_out_heads: str) -> list[str]:
    """The head (or layer) and direction chosen in each fold, from ``held_out_heads`` ("2-8 dep_to_head (+1),
    ...")."""
    out = []
    for part in str(held_out_heads).split(", "):
        lh, direction = part.split(" ")[:2]
        layer, head = (int(x) for x in lh.split("-"))
        out.append(f"{where(measure, layer, head)} {direction}")
    return out


def interval(lo: float, hi: float, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    return f"[{f.format(lo)}, {f.format(hi)}]"


def yes_no(v) -> str:
    return "" if pd.isna(v) else ("yes" if bool(v) else "no")


def best_tables(best: pd.DataFrame, measures: list[str], family: int) -> list[str]:
    """The held-out tables: per relation and measure (wide, then long with the in-sample maximum beside), and
    the heads chosen under ``attention`` and ``norm`` side by side; ``family``: the relations adjusted
    together."""
    out = ["\n\n## Best head (per-head measures) or layer (per-layer measures) per relation, held out\n",
           "Held-out accuracy [95% CI] of the head chosen on the other half of the sentences (two-fold "
           "cross-fitting over even and odd sentences, the two halves' scores averaged), and whether its gain "
           "over the best offset (also chosen held out) survives Benjamini-Hochberg adjustment across the "
           f"{family} rows of the label set (the {family - 1} relations with at least 100 arcs and `all`, every "
           "arc pooled) at alpha 0.05.\n"]
    rows = []
    for rel in RELATIONS:
        row = {"relation": rel}
        for m in measures:
            b = best[(best["relation"] == rel) & (best["measure"] == m)]
            if len(b):
                b = b.iloc[0]
                ci = interval(b["held_out_ci_low"], b["held_out_ci_high"])
                row[m] = f"{b['held_out_accuracy']:.3f} {ci} {yes_no(b['beats_baseline'])}"
        rows.append(row)
    out.append(markdown(pd.DataFrame(rows)))

    out.append("\n\n## The same, with the heads chosen and the in-sample maximum\n")
    out.append("held-out heads: the head (or layer) and direction chosen on each half; offset: the held-out "
               "accuracy of the best offset (head = word + offset, chosen held out too); gain: held-out "
               "accuracy minus offset, [95% CI]; p (BH): the one-sided bootstrap p-value of the gain, "
               "adjusted; in-sample max: the most accurate head over all sentences, chosen and scored on the "
               "same sentences (biased upward by the choice), against the best offset over all sentences.\n")
    rows = []
    for rel in RELATIONS:
        for m in measures:
            b = best[(best["relation"] == rel) & (best["measure"] == m)]
            if not len(b):
                continue
            b = b.iloc[0]
            rows.append({
                "relation": rel, "measure": m, "held-out heads": "; ".join(folds(m, b["held_out_heads"])),
                "held-out accuracy": f"{b['held_out_accuracy']:.3f} "
                                     f"{interval(b['held_out_ci_low'], b['held_out_ci_high'])}",
                "offset": f"{b['held_out_baseline_accuracy']:.3f}",
                "gain": f"{b['held_out_gain']:+.3f} "
                        f"{interval(b['held_out_gain_ci_low'], b['held_out_gain_ci_high'], True)}",
                "p (BH)": f"{b['p_adjusted']:.3g}", "beats offset": yes_no(b["beats_baseline"]),
                "in-sample max": f"{where(m, int(b['layer']), int(b['head']))} {b['direction']} "
                                 f"{b['accuracy']:.3f} {interval(b['ci_low'], b['ci_high'])}",
                "in-sample offset": f"{b['baseline_accuracy']:.3f}"})
    out.append(markdown(pd.DataFrame(rows)))

    if all(m in measures for m in PER_HEAD):
        out.append("\n\n## The heads chosen under attention and under norm (held out)\n")
        rows = []
        for rel in RELATIONS:
            b = {m: best[(best["relation"] == rel) & (best["measure"] == m)] for m in PER_HEAD}
            if any(not len(x) for x in b.values()):
                continue
            a, n = (b[m].iloc[0] for m in PER_HEAD)
            fa, fn = folds("attention", a["held_out_heads"]), folds("norm", n["held_out_heads"])
            rows.append({"relation": rel, "attention: heads chosen": "; ".join(fa),
                         "norm: heads chosen": "; ".join(fn),
                         "same in both halves": "yes" if fa == fn else "no",
                         "attention held out": f"{a['held_out_accuracy']:.3f} "
                                               f"{interval(a['held_out_ci_low'], a['held_out_ci_high'])}",
                         "norm held out": f"{n['held_out_accuracy']:.3f} "
                                          f"{interval(n['held_out_ci_low'], n['held_out_ci_high'])}",
                         "norm - attention": f"{n['held_out_accuracy'] - a['held_out_accuracy']:+.3f}"})
        out.append(markdown(pd.DataFrame(rows)))
    return out


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
    best = best[best["label_set"] == "as_is"]
    family = int(best[best["p_adjusted"].notna()].groupby("measure")["relation"].nunique().max())
    best = best[best["relation"].isin(RELATIONS)]
    if "held_out_accuracy" not in best.columns or best["held_out_accuracy"].isna().all():
        raise SystemExit(f"{args.sweep}: best_heads.csv has no held-out figures (heads.held_out=false, or a "
                         "run older than the held-out selection): rerun the sweep")
    out += best_tables(best, measures, family)
    (HERE / "tables.md").write_text("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
