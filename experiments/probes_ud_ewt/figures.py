"""Figures and tables of experiments/probes_ud_ewt from the runs of run.sh.

    python experiments/probes_ud_ewt/figures.py [results/probes_ud_ewt]     # figures + tables.md
    python experiments/probes_ud_ewt/figures.py --select SWEEP_DIR METRIC    # "layer head" of the best job
    python experiments/probes_ud_ewt/figures.py --margins [results/probes_ud_ewt]  # margins.md

Reads each job's ``probe_scores.parquet`` (mean over seeds, sd, Student's t interval) and ``metrics.json``
(per-seed values, for differences such as UAS minus the best offset), the collected ``sweep.parquet`` of the
head sweep, and ``timings.tsv`` (written by run.sh). Writes, next to this script, ``layer_probes.png``,
``head_sweep.png`` and ``tables.md``: every number the README quotes.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import yaml
from scipy import stats

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from probing.config import Multiplicity  # noqa: E402
from probing.probes.arc.probe import ARC_BASELINES  # noqa: E402
from probing.probes.edge import EDGE_BASELINES  # noqa: E402
from probing.probes.relation import RELATION_BASELINES  # noqa: E402
from probing.stats.multiplicity import adjust  # noqa: E402
from probing.stats.seeds import seed_t_p  # noqa: E402
from probing.sweep import find_jobs  # noqa: E402

HERE = Path(__file__).resolve().parent
# each probe's headline score and the trivial baselines its margin is taken over (the best of them on eval)
MARGINS = {"relation": ("accuracy", RELATION_BASELINES), "arc": ("uas", ARC_BASELINES),
           "edge": ("roc_auc", EDGE_BASELINES)}
BASELINE_NAMES = {"majority_accuracy": "majority class", "baseline_offset_accuracy": "offset",
                  "baseline_offset_pos_accuracy": "offset + UPOS", "right_branching_uas": "right-branching",
                  "best_offset_uas": "best offset", "chains_uas": "chains",
                  "baseline_distance_roc_auc": "distance alone"}
LEVEL = 0.95
ALPHA = 0.05  # the false discovery rate of a count of heads that pass, Benjamini-Hochberg across the heads


# ---- reading ---------------------------------------------------------------------------------------------
def jobs(sweep: Path) -> list[dict]:
    """One record per finished job of a sweep dir (or single run dir): its identity, probe_scores and seeds."""
    out = []
    for job in find_jobs(sweep):
        if not (job / "probe_scores.parquet").is_file():
            continue
        m = json.loads((job / "metrics.json").read_text())
        scores = pd.read_parquet(job / "probe_scores.parquet").set_index("metric")
        out.append({"job": job, "probe": m["probe"], "layer": m["layer"], "head": m["head"],
                    "head_set": m["head_set"], "eval_split": m["eval_split"], "train_split": m["train_split"],
                    "scores": scores, "seeds": m["seeds"], "seconds": m.get("seconds"),
                    "train_sentences": m.get("train_sentences"), "margin_baseline": m.get("margin_baseline"),
                    "negatives": (yaml.safe_load((job / ".hydra" / "config.yaml").read_text()) or {}).get(
                        "probe", {}).get("negatives")})
    return out


def one(records: list[dict], **where) -> dict:
    hits = [r for r in records if all(r[k] == v for k, v in where.items())]
    if len(hits) != 1:
        raise LookupError(f"{len(hits)} jobs match {where}")
    return hits[0]


def t_interval(values: list[float], level: float = LEVEL) -> tuple[float, float, float]:
    """Mean and Student's t interval of per-seed values (the same interval probe_scores gives)."""
    a = np.asarray(values, dtype=float)
    if len(a) < 2:
        return float(a.mean()), np.nan, np.nan
    half = stats.t.ppf(0.5 + level / 2, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a))
    return float(a.mean()), float(a.mean() - half), float(a.mean() + half)


def ci(r: dict, metric: str, signed: bool = False) -> str:
    """``mean [low, high]`` of a metric from the job's probe_scores (value only where no interval)."""
    s = r["scores"].loc[metric]
    return fmt(s["value"], s["ci_low"], s["ci_high"], signed)


def val(r: dict, metric: str) -> float:
    return float(r["scores"].loc[metric, "value"])


def diff(r: dict, a: str, b: str) -> str:
    """``a - b`` per seed, with its t interval."""
    v = r["seeds"]["values"]
    return fmt(*t_interval([x - y for x, y in zip(v[a], v[b])]), signed=True)


def fmt(v: float, lo: float = np.nan, hi: float = np.nan, signed: bool = False) -> str:
    f = "{:+.3f}" if signed else "{:.3f}"
    if np.isnan(lo) or f.format(lo) == f.format(hi):  # no interval, or one narrower than the rounding
        return f.format(v)
    return f"{f.format(v)} [{f.format(lo)}, {f.format(hi)}]"


def markdown(rows: list[dict]) -> str:
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def name(r: dict) -> str:
    return "all 72 heads" if r["head_set"] == "all" else r["head_set"]


# ---- tables ----------------------------------------------------------------------------------------------
def relation_rows(records: list[dict]) -> list[dict]:
    return [{"heads": name(r), "accuracy": ci(r, "accuracy"), "control accuracy": ci(r, "control_accuracy"),
             "selectivity": ci(r, "selectivity", True), "macro-F1": ci(r, "macro_f1"),
             "majority class": ci(r, "majority_accuracy"),
             "control majority": ci(r, "control_majority_accuracy"), "train arcs": f"{val(r, 'n_train'):,.0f}", "eval arcs": f"{val(r, 'n_eval'):,.0f}"} for r in records]


def arc_rows(records: list[dict]) -> list[dict]:
    return [{"heads": name(r), "UAS": ci(r, "uas"), "control UAS": ci(r, "control_uas"),
             "selectivity": ci(r, "selectivity", True), "right-branching": ci(r, "right_branching_uas"),
             "best offset": f"{ci(r, 'best_offset_uas')} ({val(r, 'best_offset'):+.0f})",
             "UAS - best offset": diff(r, "uas", "best_offset_uas"),
             "train words": f"{val(r, 'n_train'):,.0f}", "eval words": f"{val(r, 'n_eval'):,.0f}"} for r in records]


def edge_rows(r: dict) -> list[dict]:
    return [{"heads": name(r), "ROC-AUC": ci(r, "roc_auc"), "accuracy": ci(r, "accuracy"),
             "majority class": ci(r, "majority_accuracy"), "control ROC-AUC": ci(r, "control_roc_auc"),
             "control accuracy": ci(r, "control_accuracy"),
             "control majority": ci(r, "control_majority_accuracy"),
             "selectivity (accuracy)": ci(r, "selectivity", True),
             "ROC-AUC - control ROC-AUC": diff(r, "roc_auc", "control_roc_auc"),
             "train pairs": f"{val(r, 'n_train'):,.0f}", "eval pairs": f"{val(r, 'n_eval'):,.0f}"}]


def seed_rows(records: list[dict], metric: str) -> list[dict]:
    """A metric's value for each seed (the control tasks differ most between seeds)."""
    return [{"heads": name(r), **{f"seed {k}": f"{v:.3f}" for k, v in zip(r["seeds"]["seeds"],
                                                                         r["seeds"]["values"][metric])}}
            for r in records]


def margin_rows(rel: dict, edge: dict) -> list[dict]:
    """Each task and its control against its own majority class (the two have different label distributions)."""
    return [{"all 72 heads": p, "task - majority": diff(r, "accuracy", "majority_accuracy"),
             "control - control majority": diff(r, "control_accuracy", "control_majority_accuracy")}
            for p, r in [("relation", rel), ("edge", edge)]]


def baseline_margin_rows(records: list[dict]) -> list[dict]:
    """Each all-heads probe's score beside its trivial baselines and its margin over the best of them: the
    seeds' t interval and the interval over eval sentences (bootstrap, probe_scores' sentences_ci)."""
    rows = []
    for r in records:
        score, names = MARGINS[r["probe"]]
        s = r["scores"].loc["margin"]
        rows.append({
            "probe, all 72 heads": r["probe"] + (f" ({r['negatives']} negatives)" if r["probe"] == "edge" else ""),
            "score": f"{score} {ci(r, score)}",
            "trivial baselines": ", ".join(f"{BASELINE_NAMES[k]} {val(r, k):.3f}" for k in names),
            "best baseline": BASELINE_NAMES[r["margin_baseline"]],
            "margin [t interval, seeds]": ci(r, "margin", True),
            "margin [interval, eval sentences]": fmt(s["value"], s["sentences_ci_low"], s["sentences_ci_high"], True),
            "eval items": f"{val(r, 'n_eval'):,.0f}"})
    return rows


def margins_table(out: Path) -> None:
    """``margins.md`` beside this script from the all-heads runs of run.sh (``out/all_heads``, and the edge probe
    with distance-matched negatives, ``out/edge_matched``)."""
    records = jobs(out / "all_heads") + jobs(out / "edge_matched")
    order = {"relation": 0, "arc": 1, "edge": 2}
    records.sort(key=lambda r: (order[r["probe"]], str(r["negatives"] != "uniform")))
    r0 = records[0]
    text = ("# Margins over trivial baselines, all 72 heads, EWT dev\n\n" + textwrap.fill(
        f"Written by `figures.py --margins` from the runs of `run.sh` (`{out}/all_heads`, `{out}/edge_matched`); do "
        "not edit by hand. "
        f"MiniLM, UD English EWT r2.16, probes trained on a seeded subsample of 1,500 of EWT train's 12,544 "
        f"sentences (another per seed, {len(r0['seeds']['seeds'])} seeds) and scored on EWT {r0['eval_split']}. Every "
        "baseline is fitted on the training sentences; the margin is the score minus the best baseline on the "
        "eval data (the strongest competitor), the mean over seeds with the seeds' Student's t interval and "
        "with a percentile bootstrap interval over the eval sentences (the seeds averaged under each resample). "
        "Relation: the most frequent label of the arc's signed offset to its head (clipped to -5..5), and of "
        "that offset with the dependent's UPOS. Arc: each word's head is the next word (right-branching), the "
        "best offset in -5..5, the chains (the better of -1 and +1 on train). Edge: a logistic regression on "
        "word distance alone; with distance-matched negatives the non-arcs have the arcs' distances, so "
        "distance alone is at chance.", 116) + "\n\n" + markdown(baseline_margin_rows(records)))
    (HERE / "margins.md").write_text(text)
    print(text)


def seed_values(r: dict, metric: str) -> np.ndarray:
    return np.asarray(r["seeds"]["values"][metric], dtype=float)


def passing_heads(diffs: np.ndarray) -> tuple[int, int]:
    """Of per-head, per-seed differences ``(heads, seeds)``: how many heads have a one-sided t p-value (mean
    above 0) below :data:`ALPHA` alone, and how many after Benjamini-Hochberg across all the heads."""
    p = seed_t_p(diffs)
    return int(np.sum(p < ALPHA)), int(np.sum(adjust(p, Multiplicity.bh) < ALPHA))


def head_sweep_tables(heads: list[dict]) -> tuple[str, tuple[int, int]]:
    acc = sorted(heads, key=lambda r: (-val(r, "accuracy"), r["layer"], r["head"]))
    top = relation_rows(acc[:5])
    a = np.array([val(r, "accuracy") for r in heads])
    sel = np.array([val(r, "selectivity") for r in heads])
    lo = lambda r, m: float(r["scores"].loc[m, "ci_low"])  # noqa: E731
    maj = np.array([val(r, "majority_accuracy") for r in heads])
    above = sum(lo(r, "accuracy") > val(r, "majority_accuracy") for r in heads)
    sel_pos = sum(lo(r, "selectivity") > 0 for r in heads)
    acc_alone, acc_bh = passing_heads(np.stack([seed_values(r, "accuracy") - seed_values(r, "majority_accuracy")
                                                for r in heads]))
    sel_alone, sel_bh = passing_heads(np.stack([seed_values(r, "selectivity") for r in heads]))
    n = len(heads)
    sel_rank = sorted(heads, key=lambda r: -val(r, "selectivity"))[:5]
    summary = [
        {"over the 72 heads": "median accuracy", "value": f"{np.median(a):.3f}"},
        {"over the 72 heads": "lowest / highest accuracy", "value": f"{a.min():.3f} / {a.max():.3f}"},
        {"over the 72 heads": "majority class (per head, mean)", "value": f"{maj.mean():.3f}"},
        {"over the 72 heads": "heads whose accuracy interval lies above the majority class (each alone)",
         "value": f"{above}"},
        {"over the 72 heads": f"heads above the majority class, one-sided t over seeds: p < {ALPHA} alone / "
         f"BH-adjusted across the {n} heads", "value": f"{acc_alone} / {acc_bh}"},
        {"over the 72 heads": "median selectivity", "value": f"{np.median(sel):+.3f}"},
        {"over the 72 heads": "heads whose selectivity interval lies above 0 (each alone)", "value": f"{sel_pos}"},
        {"over the 72 heads": f"heads with selectivity above 0, one-sided t over seeds: p < {ALPHA} alone / "
         f"BH-adjusted across the {n} heads", "value": f"{sel_alone} / {sel_bh}"},
        {"over the 72 heads": "five most selective heads",
         "value": ", ".join(f"{r['head_set']} {val(r, 'selectivity'):+.3f}" for r in sel_rank)},
    ]
    text = ("## Single heads, relation probe, EWT dev: the five most accurate of 72 (in-sample maxima)\n\n"
            + markdown(top) + "\n" + markdown(summary))
    return text, (acc[0]["layer"], acc[0]["head"])


def held_out_rows(dev_head: dict, test_head: dict, dev_lrel: dict, test_lrel: dict, dev_larc: dict,
                  test_larc: dict) -> list[dict]:
    rows = []
    for what, d, t, m in [("single head, relation (best of 72)", dev_head, test_head, "accuracy"),
                          ("layer, relation (best of 6)", dev_lrel, test_lrel, "accuracy"),
                          ("layer, arc (best of 6)", dev_larc, test_larc, "uas")]:
        if m == "uas":
            base = f"RB {val(t, 'right_branching_uas'):.3f}, offset {val(t, 'best_offset_uas'):.3f}"
        else:
            base = f"majority {val(t, 'majority_accuracy'):.3f}"
        rows.append({"chosen on dev": what, "choice": t["head_set"], "metric": m, "dev (in-sample max)": ci(d, m),
                     "test": ci(t, m), "test control": ci(t, f"control_{m}"),
                     "test selectivity": ci(t, "selectivity", True), "test baselines": base,
                     "eval items (test)": f"{val(t, 'n_eval'):,.0f}"})
    return rows


def full_train_rows(sub_arc: dict, full_arc: dict) -> list[dict]:
    return [{"layer 3, arc probe": label, "train words": f"{val(r, 'n_train'):,.0f}", "UAS": ci(r, "uas"),
             "control UAS": ci(r, "control_uas"), "selectivity": ci(r, "selectivity", True),
             "compute s (3 seeds)": f"{r['seconds']:.0f}"}
            for label, r in [("1,500 sentences", sub_arc), ("all 12,544 sentences", full_arc)]]


def timing_rows(out: Path, heads: list[dict], allh: list[dict]) -> list[dict]:
    t = pd.read_csv(out / "timings.tsv", sep="\t", header=None, names=["step", "wall", "kb", "load", "n_jobs"])
    t = t.sort_values("wall").groupby("step", sort=False).tail(1)  # the run that computed (not a reuse)
    order = pd.read_csv(out / "timings.tsv", sep="\t", header=None)[0].drop_duplicates().tolist()
    t = t.set_index("step").loc[order]
    def step(s: str, wall: float) -> str:  # an extraction that took under a minute found its store
        return s + (" (store found, built before)" if s.startswith("extract") and wall < 60 else "")

    rows = [{"step": step(s, r.wall), "wall s": f"{r.wall:.0f}", "peak MiB (largest process)": f"{r.kb / 1024:,.0f}",
             "load average at start": f"{r.load:.1f}", "joblib workers": int(r.n_jobs)} for s, r in t.iterrows()]
    secs = np.array([r["seconds"] for r in heads])
    rows.append({"step": "head sweep: compute per job (3 seeds, task + control fits), median / max",
                 "wall s": f"{np.median(secs):.0f} / {secs.max():.0f}", "peak MiB (largest process)": "",
                 "load average at start": "", "joblib workers": ""})
    rows.append({"step": "all heads: compute per job (3 seeds), relation / arc / edge",
                 "wall s": " / ".join(f"{one(allh, probe=p)['seconds']:.0f}" for p in ("relation", "arc", "edge")),
                 "peak MiB (largest process)": "", "load average at start": "", "joblib workers": ""})
    return rows


# ---- figures ---------------------------------------------------------------------------------------------
def errbar(ax, records, metric, **kw):
    x = [r["layer"] for r in records]
    s = [r["scores"].loc[metric] for r in records]
    y = np.array([v["value"] for v in s])
    err = np.array([[v["value"] - v["ci_low"] for v in s], [v["ci_high"] - v["value"] for v in s]])
    ax.errorbar(x, y, yerr=np.nan_to_num(err), capsize=3, **kw)


def layer_figure(rel: list[dict], arc: list[dict], all_rel: dict, all_arc: dict) -> None:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    errbar(a1, rel, "accuracy", fmt="o-", label="relation probe")
    errbar(a1, rel, "control_accuracy", fmt="s--", label="control task")
    a1.plot([r["layer"] for r in rel], [val(r, "majority_accuracy") for r in rel], ":", color="grey",
            label="majority class")
    a1.plot([r["layer"] for r in rel], [val(r, "control_majority_accuracy") for r in rel], ":", color="C1",
            alpha=0.6, label="control majority")
    a1.axhline(val(all_rel, "accuracy"), color="C0", alpha=0.4, label="all 72 heads")
    a1.set(xlabel="layer", ylabel="accuracy (EWT dev)", title="relation probe, one layer's 12 heads")
    a1.legend(fontsize=7)
    errbar(a2, arc, "uas", fmt="o-", label="Attn probe")
    errbar(a2, arc, "control_uas", fmt="s--", label="control task")
    a2.plot([r["layer"] for r in arc], [val(r, "right_branching_uas") for r in arc], ":", color="grey",
            label="right-branching")
    a2.plot([r["layer"] for r in arc], [val(r, "best_offset_uas") for r in arc], "-.", color="black", alpha=0.6,
            label="best offset")
    a2.axhline(val(all_arc, "uas"), color="C0", alpha=0.4, label="all 72 heads")
    a2.set(xlabel="layer", ylabel="UAS (EWT dev, no punct.)", title="arc probe (Clark et al.'s Attn)")
    a2.legend(fontsize=7)
    fig.suptitle("mean of 3 seeds; bars: 95% t interval across seeds", fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "layer_probes.png", dpi=120)
    plt.close(fig)


def head_figure(heads: list[dict], best: tuple[int, int]) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    for ax, metric in zip(axes, ["accuracy", "selectivity"]):
        grid = np.full((6, 12), np.nan)
        for r in heads:
            grid[r["layer"], r["head"]] = val(r, metric)
        im = ax.imshow(grid, cmap="viridis", aspect="auto")
        ax.add_patch(plt.Rectangle((best[1] - 0.5, best[0] - 0.5), 1, 1, fill=False, edgecolor="red", lw=1.5))
        ax.set(xticks=range(12), yticks=range(6), xlabel="head", ylabel="layer",
               title=f"relation probe, one head: {metric} (dev, mean of 3 seeds)")
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(HERE / "head_sweep.png", dpi=120)
    plt.close(fig)


# ---- main ------------------------------------------------------------------------------------------------
def main(out: Path) -> None:
    rel = sorted(jobs(out / "layer_sweep_relation"), key=lambda r: r["layer"])
    arc = sorted(jobs(out / "layer_sweep_arc"), key=lambda r: r["layer"])
    allh = jobs(out / "all_heads")
    all_rel, all_arc, all_edge = (one(allh, probe=p) for p in ("relation", "arc", "edge"))
    heads = jobs(out / "head_sweep_relation")
    held = jobs(out / "held_out")
    level = int(round(100 * rel[0]["seeds"]["level"]))
    n_seeds = len(rel[0]["seeds"]["seeds"])
    parts = [
        "# Tables of experiments/probes_ud_ewt\n\n" + textwrap.fill(
        f"Written by `figures.py` from the runs of `run.sh` (`{out}`); do not edit by hand. MiniLM, UD English "
        f"EWT r2.16, probes trained on a seeded subsample of 1,500 of the 12,544 train sentences (another per "
        f"seed) and scored on the split named. Each score is the mean of {n_seeds} seeds with its {level}% "
        "Student's t interval across seeds in brackets; baselines without an interval do not vary with the seed "
        "(or vary by less than 0.0005). Punctuation dependents are neither trained on nor scored.", 116) + "\n",
        "## Relation probe, EWT dev\n\n" + markdown(relation_rows(rel + [all_rel])),
        "## Arc probe (Attn), EWT dev\n\nRight-branching: each word's head is the next word. Best offset: the "
        "offset in -5..5\nwith the best UAS on the training sample (in brackets).\n\n"
        + markdown(arc_rows(arc + [all_arc])),
        "## Arc probe: control UAS per seed, EWT dev\n\n" + markdown(seed_rows(arc + [all_arc], "control_uas")),
        "## Edge probe, all 72 heads, EWT dev\n\n" + markdown(edge_rows(all_edge)),
        "## Task and control, each against its own majority class, all 72 heads, EWT dev\n\n"
        + markdown(margin_rows(all_rel, all_edge)),
    ]
    head_text, best = head_sweep_tables(heads)
    parts.append(head_text)
    if held:
        brel = select(out / "layer_sweep_relation", "accuracy")[0]
        barc = select(out / "layer_sweep_arc", "uas")[0]
        dev_head = one(heads, layer=best[0], head=best[1])
        parts.append("## Held out: chosen on EWT dev, scored on EWT test\n\nThe dev column is the maximum over "
                     "the candidates (biased upwards); the test columns score\nthe same choice on other "
                     "sentences.\n\n" + markdown(held_out_rows(
                         dev_head, one(held, probe="relation", head_set=f"L{best[0]}H{best[1]}"),
                         one(rel, layer=brel), one(held, probe="relation", head_set=f"L{brel}"),
                         one(arc, layer=barc), one(held, probe="arc", head_set=f"L{barc}"))))
    if (out / "full_train_layer3").is_dir():
        full = jobs(out / "full_train_layer3")
        parts.append("## All of EWT train against the 1,500-sentence subsample, layer 3, EWT dev\n\n" + markdown(
            full_train_rows(one(arc, layer=3), one(full, probe="arc"))))
    if (out / "single_L0H0").is_dir():  # the lone job and the sweep's job for the same head: same numbers?
        lone, swept = one(jobs(out / "single_L0H0")), one(heads, layer=0, head=0)
        gap = (lone["scores"]["value"] - swept["scores"]["value"].reindex(lone["scores"].index)).abs().max()
        parts.append("## Same config, same numbers\n\n" + markdown([{
            "compared": "one job run alone (L0H0) against the head sweep's L0H0 job",
            "metrics": len(lone["scores"]), "largest absolute difference": f"{gap:.1e}"}]))
    if (out / "timings.tsv").is_file():
        parts.append("## Wall times (2 CPU cores shared with other work; `nice -n 10`)\n\n"
                     + markdown(timing_rows(out, heads, allh)))
    (HERE / "tables.md").write_text("\n".join(parts))
    layer_figure(rel, arc, all_rel, all_arc)
    head_figure(heads, best)
    print((HERE / "tables.md").read_text())


def select(sweep: Path, metric: str) -> tuple[int, int]:
    """The job with the highest mean ``metric`` of a collected sweep (ties: lowest layer, then head)."""
    df = pd.read_parquet(sweep / "sweep.parquet")
    df = df[df.metric == metric].sort_values(["value", "layer", "head"], ascending=[False, True, True])
    row = df.iloc[0]
    return int(row["layer"]), (int(row["head"]) if pd.notna(row["head"]) else -1)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--select":
        print(*select(Path(sys.argv[2]), sys.argv[3]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--margins":
        margins_table(Path(sys.argv[2]) if len(sys.argv) > 2 else Path("results/probes_ud_ewt"))
    else:
        main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("results/probes_ud_ewt"))
