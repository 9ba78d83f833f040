"""Tables and figures of the structural-probes experiment, from the run dirs under one results dir.

    python experiments/structural_probes_ud_ewt/summarise.py results/structural_probes_ud_ewt [--out DIR]

reads (each a sweep dir of numbered jobs, or one run dir; a missing one leaves its section out):

- ``layers``: ``probe=distance,depth`` on hidden layers 0-6 of the trained and the random-init model, EWT test;
- ``layers_dev``: the same probes of the trained model scored on EWT dev (the split the best layer is chosen on);
- ``full_train``, ``full_train_random``: layer 3's probes of either model trained on all of EWT train (what the
  subsample costs);
- ``heads``, ``heads_dev``: ``probe=distance probe.features=heads`` for each of the 72 heads, EWT test and dev;
- ``heads_offset``: the same on test with ``probe.word_offset=-1,1`` (each word read as its neighbour's vector);
- ``heads_offset_dev``: the same scored on EWT dev (the split the control's offset is chosen on);
- ``heads_random``: the head grid of the random-init model, EWT test;
- ``attention_test``, ``attention_test_random``: ``task=heads`` on EWT test (attention accuracy per head);
- ``mdl``: ``probe=relation probe.features=hidden probe.mdl=true`` per layer.

and writes ``results.md`` (every number the README quotes), ``layers.png``, ``heads.png`` and ``mdl.png`` into
``--out`` (default: this folder). Intervals: ``[lo, hi]`` after a structural score is the 95% bootstrap interval
over EWT test sentences of the 3 seeds' mean (the run's ``sentences_ci_low/high``); ``sd`` is the sd across
seeds; MDL intervals are Student's t intervals across the 3 seeds; Spearman's rho over heads has a percentile
interval over resampled heads.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy.stats import rankdata  # noqa: E402

from probing.config import DataConfig, DataKind  # noqa: E402
from probing.corpus.cache import load_corpus_cached  # noqa: E402
from probing.probes.structural.metrics import (  # noqa: E402
    dspr_terms,
    ratio_of_groups,
    tree_distances,
    uuas_terms,
)
from probing.results import read_table  # noqa: E402
from probing.stats.bootstrap import percentile_interval, resample_counts  # noqa: E402

HERE = Path(__file__).resolve().parent
STRUCTURAL = ("uuas", "dspr", "root_accuracy", "nspr")
NAMES = {"uuas": "UUAS", "dspr": "DSpr", "root_accuracy": "root accuracy", "nspr": "NSpr"}
OBJECTIVE = {"distance": "uuas", "depth": "root_accuracy"}
KBIT = 1024  # bits in a kbit, as in Voita and Titov's notebook (online_codelength / 1024)
HEAD_RESAMPLES = 10_000
SEED = 0


# ----------------------------------------------------------------------------------------------- reading runs

def job_dirs(path: Path) -> list[Path]:
    """A run dir, or the finished numbered jobs of a sweep dir (unfinished ones are named and left out)."""
    if (path / "metrics.json").is_file():
        return [path]
    subs = sorted((p for p in path.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))
    missing = [p.name for p in subs if not (p / "metrics.json").is_file()]
    if missing:
        print(f"{path}: {len(missing)} job(s) without metrics.json left out: {', '.join(missing)}")
    return [p for p in subs if (p / "metrics.json").is_file()]


def probe_runs(path: Path) -> pd.DataFrame:
    """One row per probe job: its settings (from ``run_meta.json``) and, per metric of ``probe_scores``, the
    mean over seeds (``m``), the seeds' sd (``m_sd``), their t interval (``m_tlo``, ``m_thi``) and the bootstrap
    interval over eval sentences (``m_lo``, ``m_hi``)."""
    rows = []
    for d in job_dirs(path):
        cfg = json.loads((d / "run_meta.json").read_text())["config"]
        p, m = cfg["probe"], json.loads((d / "metrics.json").read_text())
        row = {"dir": str(d), "random_init": bool(cfg["model"]["random_init"]), "kind": p["kind"],
               "features": p["features"], "layer": p["layer"], "head": p["head"], "offset": p["word_offset"],
               "eval_split": p["eval_split"], "max_train_sentences": p["max_train_sentences"],
               "seeds": len(m["seeds"]["seeds"]), "seed_values": m["seeds"]["values"]}
        for _, s in read_table(d, "probe_scores").iterrows():
            k = s["metric"]
            row.update({k: s["value"], f"{k}_sd": s["sd"], f"{k}_tlo": s["ci_low"], f"{k}_thi": s["ci_high"],
                        f"{k}_lo": s["sentences_ci_low"], f"{k}_hi": s["sentences_ci_high"]})
        rows.append(row)
    return pd.DataFrame(rows)


def attention_accuracy(run: Path) -> pd.DataFrame:
    """Per head: attention accuracy on relation ``all`` (label set as_is) in each direction, and the better of
    the two (``attention``)."""
    h = read_table(run, "heads")
    h = h[(h.relation == "all") & (h.label_set == "as_is") & (h.measure == "attention")]
    wide = h.pivot_table(index=["layer", "head"], columns="direction", values="accuracy").reset_index()
    wide["attention"] = wide[["dep_to_head", "head_to_dep"]].max(axis=1)
    wide.columns.name = None
    return wide.astype({"layer": int, "head": int})


# ------------------------------------------------------------------------------------------------- baselines

def linear_baselines(data_dir: Path, cache: str, n_resamples: int = 1000, seed: int = SEED) -> dict:
    """UUAS and DSpr of the linear chain (each word's predicted distance to another is |i - j|: the spanning
    tree joins each non-punctuation word to the next) on EWT test, punctuation as for the probes, with the
    percentile interval over the same kind of sentence resamples as the probes'."""
    data = DataConfig(name="ud_ewt", kind=DataKind.ud_ewt, dir=str(data_dir))
    sents = load_corpus_cached(data, "test", cache).sentences
    pred = [np.abs(np.arange(len(s.heads))[:, None] - np.arange(len(s.heads))[None, :]).astype(float)
            for s in sents]
    punct = [np.array([u == "PUNCT" for u in s.upos]) for s in sents]
    terms = {"uuas": uuas_terms(pred, [s.heads for s in sents], punct),
             "dspr": dspr_terms(pred, [tree_distances(s.heads) for s in sents])}
    weights = resample_counts(len(sents), n_resamples, seed).astype(np.float64)
    out = {}
    for k, t in terms.items():
        lo, hi = percentile_interval(ratio_of_groups(t, weights), 0.95)
        out[k] = (float(ratio_of_groups(t)), float(lo), float(hi))
    return out


# ------------------------------------------------------------------------------------------------ statistics

def rho_interval(x: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None, n: int = HEAD_RESAMPLES,
                 seed: int = SEED) -> tuple[float, float, float]:
    """Spearman's rho of x and y with the 95% percentile interval over ``n`` resamples of the heads (with
    replacement). With ``groups`` (a head's layer): the mean of the within-group rhos, heads resampled within
    their group."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    rng = np.random.default_rng(seed)

    def stat(idx: np.ndarray) -> float:
        if groups is None:
            return spearman(x[idx], y[idx])
        return float(np.nanmean([spearman(x[idx[groups[idx] == g]], y[idx[groups[idx] == g]])
                                 for g in np.unique(groups)]))

    every = np.arange(len(x))
    if groups is None:
        draws = [rng.integers(0, len(x), len(x)) for _ in range(n)]
    else:
        members = [np.flatnonzero(groups == g) for g in np.unique(groups)]
        draws = [np.concatenate([rng.choice(m, len(m)) for m in members]) for _ in range(n)]
    boot = np.array([stat(d) for d in draws])
    lo, hi = np.nanpercentile(boot, [2.5, 97.5])
    return stat(every), float(lo), float(hi)


def _pearson_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson's r of each row pair of ``a`` and ``b`` (NaN where a row is constant)."""
    a, b = a - a.mean(axis=-1, keepdims=True), b - b.mean(axis=-1, keepdims=True)
    den = np.sqrt((a ** 2).sum(axis=-1) * (b ** 2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (a * b).sum(axis=-1) / np.where(den > 0, den, 1.0), np.nan)


def partial_spearman(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Spearman's partial correlation of x and y given z along the last axis: the partial Pearson
    correlation of their mean ranks, (r_xy - r_xz r_yz) / sqrt((1 - r_xz^2)(1 - r_yz^2))."""
    rx, ry, rz = (rankdata(np.asarray(a, float), axis=-1) for a in (x, y, z))
    rxy, rxz, ryz = _pearson_rows(rx, ry), _pearson_rows(rx, rz), _pearson_rows(ry, rz)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rxy - rxz * ryz) / np.sqrt((1 - rxz ** 2) * (1 - ryz ** 2))


def partial_rho_interval(x: np.ndarray, y: np.ndarray, z: np.ndarray, groups: np.ndarray | None = None,
                         n: int = HEAD_RESAMPLES, seed: int = SEED) -> tuple[float, float, float]:
    """:func:`partial_spearman` of x and y given z with the 95% percentile interval over ``n`` resamples of
    the heads (with replacement). With ``groups``: the mean of the within-group partial correlations, heads
    resampled within their group."""
    x, y, z = (np.asarray(a, float) for a in (x, y, z))
    rng = np.random.default_rng(seed)
    if groups is None:
        parts = [np.arange(len(x))]
    else:
        parts = [np.flatnonzero(groups == g) for g in np.unique(groups)]

    def stat(draws: list[np.ndarray]) -> np.ndarray:  # draws: per group, (B, size) indices
        return np.nanmean(np.stack([partial_spearman(x[d], y[d], z[d]) for d in draws]), axis=0)

    point = float(stat([m[None, :] for m in parts])[0])
    boot = stat([m[rng.integers(0, len(m), (n, len(m)))] for m in parts])
    lo, hi = np.nanpercentile(boot, [2.5, 97.5])
    return point, float(lo), float(hi)


def rank_residuals(x: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The ranks of x less their least-squares line on the ranks of z (what a partial Spearman correlates)."""
    rx, rz = rankdata(x), rankdata(z)
    slope, icept = np.polyfit(rz, rx, 1)
    return rx - (slope * rz + icept)


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho (Pearson of mean ranks); NaN when either side is constant."""
    rx, ry = rankdata(x), rankdata(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = np.sqrt((rx ** 2).sum() * (ry ** 2).sum())
    return float((rx * ry).sum() / den) if den > 0 else float("nan")


# ------------------------------------------------------------------------------------------------ formatting

def ci(v: float, lo: float, hi: float, digits: int = 3) -> str:
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def cell(r: pd.Series | dict, k: str, digits: int = 3) -> str:
    if k not in r or pd.isna(r[k]):
        return ""
    return ci(r[k], r[f"{k}_lo"], r[f"{k}_hi"], digits)


def markdown(df: pd.DataFrame) -> str:
    def fmt(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "" if np.isnan(v) else f"{v:.3f}"
        return str(v)
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)])


def model_name(random_init: bool) -> str:
    return "random init" if random_init else "trained"


def subsample_note(df: pd.DataFrame) -> str:
    n = sorted({int(v) if pd.notna(v) else 0 for v in df.max_train_sentences})
    seeds = sorted(set(df.seeds))
    sizes = " / ".join("all 12,544" if v == 0 else f"{v:,}" for v in n)
    words = f" (about {df.n_train.mean():,.0f} words)" if "n_train" in df and len(n) == 1 else ""
    return (f"probes trained on {sizes} EWT train sentences{words}, a seeded subsample per seed, "
            f"{'/'.join(map(str, seeds))} seeds, stopped on EWT dev")


# ----------------------------------------------------------------------------------------------------- layers

def layer_table(layers: pd.DataFrame) -> pd.DataFrame:
    """One row per model and layer with every structural score (distance and depth jobs merged)."""
    rows = []
    for (ri, layer), g in layers.groupby(["random_init", "layer"]):
        row = {"random_init": ri, "layer": int(layer)}
        for _, r in g.iterrows():
            for k in STRUCTURAL:
                if k in r and pd.notna(r[k]):
                    row.update({c: r[c] for c in (k, f"{k}_sd", f"{k}_lo", f"{k}_hi")})
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["random_init", "layer"]).reset_index(drop=True)


def layers_section(layers: pd.DataFrame, dev: pd.DataFrame | None, full: pd.DataFrame | None,
                   linear: dict | None, out: Path) -> tuple[list[str], dict]:
    t = layer_table(layers)
    note = subsample_note(layers)
    md = [f"## Per hidden layer (EWT test; {note})\n",
          "Each cell: mean of the seeds [95% bootstrap interval over the 2,077 test sentences]; sd: across seeds. "
          "Layer 0 is the embedding layer's output.\n"]
    show = pd.DataFrame({"model": [model_name(r) for r in t.random_init], "layer": t.layer,
                         **{NAMES[k]: [cell(r, k) for _, r in t.iterrows()] for k in STRUCTURAL},
                         **{f"{NAMES[k]} sd": t[f"{k}_sd"] for k in ("uuas", "root_accuracy") if f"{k}_sd" in t}})
    md.append(markdown(show) + "\n")
    if linear:
        md.append("Linear chain on EWT test (predicted distance |i - j|: each non-punctuation word joined to the "
                  f"next): UUAS {ci(*linear['uuas'])}, DSpr {ci(*linear['dspr'])}.\n")
    chosen = {}
    if dev is not None and len(dev):
        rows = []
        dt = layer_table(dev[~dev.random_init])
        for kind, k in OBJECTIVE.items():
            if k not in dt or dt[k].isna().all():
                continue
            best = dt.loc[dt[k].idxmax()]
            layer = int(best.layer)
            chosen[kind] = layer
            test = t[(~t.random_init) & (t.layer == layer)].iloc[0]
            rand = t[(t.random_init) & (t.layer == layer)].iloc[0]
            second = t[~t.random_init].sort_values(k, ascending=False)
            rows.append({"score": NAMES[k], "layer chosen on dev": layer, "dev (in-sample)": cell(best, k),
                         "test (held out)": cell(test, k), "random init, same layer": cell(rand, k),
                         "test minus random init": f"{test[k] - rand[k]:+.3f}",
                         "best layer on test": int(second.iloc[0].layer)})
        devshow = pd.DataFrame({"layer": dt.layer, **{f"dev {NAMES[k]}": [cell(r, k) for _, r in dt.iterrows()]
                                                      for k in STRUCTURAL if k in dt}})
        md += ["### The best layer, chosen on EWT dev, scored on EWT test\n",
               "The layer with the highest dev score (over the 7 layers) is scored once on test; the in-sample "
               "dev maximum is shown beside it.\n", markdown(pd.DataFrame(rows)) + "\n",
               "The trained model's probes scored on EWT dev (the same fits; 2,001 sentences):\n",
               markdown(devshow) + "\n"]
    if full is not None and len(full):
        rows = []
        for _, r in full.sort_values(["random_init", "kind"], ascending=[True, False]).iterrows():
            sub = layers[(layers.random_init == r["random_init"]) & (layers.kind == r["kind"])
                         & (layers.layer == r["layer"])].iloc[0]
            for k in STRUCTURAL:
                if k in r and pd.notna(r[k]):
                    rows.append({"model": model_name(r["random_init"]), "layer": int(r["layer"]), "score": NAMES[k],
                                 f"{int(sub.max_train_sentences):,}-sentence subsamples": cell(sub, k),
                                 "all of EWT train": cell(r, k), "difference": f"{r[k] - sub[k]:+.3f}",
                                 "training words (all)": f"{r['n_train']:,.0f}"})
        md += ["### What the subsample costs (layer 3 trained on all 12,544 EWT train sentences, 3 seeds that "
               "differ only in the probe's initial weights and batch order)\n", markdown(pd.DataFrame(rows)) + "\n"]
    layers_figure(t, linear, note, out / "layers.png")
    return md, chosen


def layers_figure(t: pd.DataFrame, linear: dict | None, note: str, path: Path) -> None:
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8), dpi=80)
    for ax, k in zip(axes, STRUCTURAL):
        for ri, g in t.groupby("random_init"):
            if k not in g or g[k].isna().all():
                continue
            ax.errorbar(g.layer, g[k], yerr=[g[k] - g[f"{k}_lo"], g[f"{k}_hi"] - g[k]], capsize=3,
                        marker="s" if ri else "o", linestyle="--" if ri else "-", label=f"MiniLM, {model_name(ri)}")
        if linear and k in linear:
            ax.axhline(linear[k][0], color="grey", linestyle=":", label="linear chain")
        ax.set_title(f"{NAMES[k]} ({'distance' if k in ('uuas', 'dspr') else 'depth'} probe)", fontsize=10)
        ax.set_xlabel("hidden layer (0 = embeddings)")
        ax.set_xticks(range(7))
        ax.grid(alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=9)
    fig.suptitle(f"Structural probes per layer, UD EWT test ({note}); bars: 95% intervals over test sentences",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------------ heads

def grid(df: pd.DataFrame, value: str = "uuas") -> pd.DataFrame:
    return df.pivot(index="layer", columns="head", values=value).sort_index().sort_index(axis=1)


def positional_control(offset: pd.DataFrame, offset_dev: pd.DataFrame) -> pd.DataFrame:
    """Per head, the positional control: the offset (-1 or +1; a tie: -1) whose probe scores the higher UUAS
    on EWT dev, with that offset's test UUAS and interval (``control``, ``control_lo``, ``control_hi``,
    ``control_offset``), and the offset that scores higher on test (``test_better_offset``, for comparison
    only)."""
    keys = ["layer", "head"]

    def wide(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
        df = df.astype({"layer": int, "head": int, "offset": int})
        return df.pivot_table(index=keys, columns="offset", values=cols)

    t, d = wide(offset, ["uuas", "uuas_lo", "uuas_hi"]), wide(offset_dev, ["uuas"]).reindex(
        wide(offset, ["uuas"]).index)
    pick = np.where(d[("uuas", 1)] > d[("uuas", -1)], 1, -1)
    out = pd.DataFrame({"control_offset": pick}, index=t.index)
    for c, src in (("control", "uuas"), ("control_lo", "uuas_lo"), ("control_hi", "uuas_hi")):
        out[c] = np.where(pick == 1, t[(src, 1)], t[(src, -1)])
    out["test_better_offset"] = np.where(t[("uuas", 1)] > t[("uuas", -1)], 1, -1)
    return out.reset_index()


def heads_section(heads: pd.DataFrame, dev: pd.DataFrame | None, offset: pd.DataFrame | None,
                  offset_dev: pd.DataFrame | None, random: pd.DataFrame | None, attn: pd.DataFrame | None,
                  attn_random: pd.DataFrame | None, linear: dict | None, out: Path) -> list[str]:
    note = subsample_note(heads)
    keys = ["layer", "head"]
    h = heads[["layer", "head", "uuas", "uuas_lo", "uuas_hi", "uuas_sd", "dspr"]].astype({"layer": int, "head": int})
    md = [f"## Heads: a distance probe on each head's 32-d context vectors (EWT test; {note})\n",
          "Head (L, h) writes into hidden layer L + 1. Each UUAS: mean of the seeds [95% bootstrap interval over "
          "test sentences].\n"]
    if offset is not None and len(offset) and offset_dev is not None and len(offset_dev):
        h = h.merge(positional_control(offset, offset_dev), on=keys, how="left")
        h["margin"] = h.uuas - h.control
    elif offset is not None and len(offset):
        print("heads_offset_dev is missing: the positional control's offset is chosen on dev only, so the "
              "control is left out")
    if random is not None and len(random):
        r = random.astype({"layer": int, "head": int})[keys + ["uuas", "uuas_lo", "uuas_hi"]]
        h = h.merge(r.rename(columns={"uuas": "random", "uuas_lo": "random_lo", "uuas_hi": "random_hi"}),
                    on=keys, how="left")
    if attn is not None:
        h = h.merge(attn[keys + ["attention"]], on=keys, how="left")
    if attn_random is not None and "random" in h:
        h = h.merge(attn_random[keys + ["attention"]].rename(columns={"attention": "attention_random"}),
                    on=keys, how="left")

    # summary of the grids
    rows = [{"grid": "trained heads", "median UUAS": h.uuas.median(), "max UUAS": h.uuas.max(),
             "heads above the linear chain": int((h.uuas_lo > linear["uuas"][2]).sum()) if linear else ""}]
    if "control" in h:
        rows.append({"grid": "positional control (offset -1 or +1, chosen on dev)", "median UUAS": h.control.median(),
                     "max UUAS": h.control.max(),
                     "heads above the linear chain": int((h.control_lo > linear["uuas"][2]).sum()) if linear else ""})
    if "random" in h:
        rows.append({"grid": "random-init heads", "median UUAS": h.random.median(), "max UUAS": h.random.max(),
                     "heads above the linear chain": int((h.random_lo > linear["uuas"][2]).sum()) if linear else ""})
    md += ["### The grids at a glance\n",
           "Heads above the linear chain: the head's interval lies wholly above the chain's"
           + (f" ({ci(*linear['uuas'])})." if linear else ".") + "\n", markdown(pd.DataFrame(rows)) + "\n"]
    if "control" in h:
        beat = h.uuas_lo > h.control_hi
        below = h.uuas_hi < h.control_lo
        agree = int((h.control_offset == h.test_better_offset).sum())
        md.append(f"Against its own positional control (the same head's vectors read one word to the left or right, "
                  f"the offset whose probe scores higher on EWT dev, scored on test): {int(beat.sum())} of {len(h)} "
                  f"heads have their interval wholly above the control's, {int(below.sum())} wholly below; median "
                  f"margin {h.margin.median():+.3f} (min {h.margin.min():+.3f}, max {h.margin.max():+.3f}). The "
                  f"offset chosen on dev is -1 for {int((h.control_offset == -1).sum())} heads, +1 for "
                  f"{int((h.control_offset == 1).sum())}; it is the one that scores higher on test for {agree} of "
                  f"{len(h)}.\n")
    if "random" in h:
        md.append(f"Trained minus random-init, same head: median {np.median(h.uuas - h.random):+.3f}; "
                  f"{int((h.uuas_lo > h.random_hi).sum())} of {len(h)} trained heads have their interval wholly "
                  f"above their random-init twin's.\n")

    # the best head, chosen on dev
    if dev is not None and len(dev):
        d = dev.astype({"layer": int, "head": int})
        best = d.loc[d.uuas.idxmax()]
        hb = h[(h.layer == best.layer) & (h["head"] == best["head"])].iloc[0]
        second = h.sort_values("uuas", ascending=False).iloc[0]
        row = {"head chosen on dev": f"L{int(best.layer)}H{int(best['head'])}", "dev UUAS (in-sample)": cell(best, "uuas"),
               "test UUAS (held out)": cell(hb, "uuas")}
        if "control" in h:
            row["its positional control (test)"] = ci(hb.control, hb.control_lo, hb.control_hi)
        if "random" in h:
            row["its random-init twin (test)"] = ci(hb.random, hb.random_lo, hb.random_hi)
        row["best head on test"] = f"L{int(second.layer)}H{int(second['head'])} ({second.uuas:.3f})"
        md += ["### The best head, chosen on EWT dev (72 candidates), scored on EWT test\n",
               markdown(pd.DataFrame([row])) + "\n"]

    # top heads
    cols = ["layer", "head", "uuas", "uuas_lo", "uuas_hi"] + [c for c in ("control", "control_offset", "random",
                                                                         "attention") if c in h]
    top = h.sort_values("uuas", ascending=False).head(10)[cols].copy()
    top["UUAS"] = [ci(r.uuas, r.uuas_lo, r.uuas_hi) for r in top.itertuples()]
    top = top.drop(columns=["uuas", "uuas_lo", "uuas_hi"]).rename(columns={
        "control": "positional control", "control_offset": "control offset", "random": "random init",
        "attention": "attention accuracy"})
    top = top[["layer", "head", "UUAS"] + [c for c in top.columns if c not in ("layer", "head", "UUAS")]]
    md += ["### Top 10 heads by test UUAS (an in-sample ranking)\n", markdown(top) + "\n"]

    # the correlations with attention accuracy
    rho_rows = []
    if "attention" in h:
        pairs = [("trained heads: UUAS", h.uuas, h.attention, None)]
        if "control" in h:
            pairs += [("positional control: UUAS of the neighbour's vectors", h.control, h.attention, None),
                      ("trained heads: UUAS, the positional control's UUAS held fixed (partial)", h.uuas,
                       h.attention, h.control)]
        if "attention_random" in h:
            pairs.append(("random-init heads: UUAS (against their own attention accuracy)", h.random,
                          h.attention_random, None))
        for name, x, y, z in pairs:
            ok = (x.notna() & y.notna() & (z.notna() if z is not None else True)).to_numpy()
            x, y, layer = x.to_numpy()[ok], y.to_numpy()[ok], h.layer.to_numpy()[ok]
            if z is None:
                r, lo, hi = rho_interval(x, y)
                rw, lw, hw = rho_interval(x, y, groups=layer)
            else:
                z = z.to_numpy()[ok]
                r, lo, hi = partial_rho_interval(x, y, z)
                rw, lw, hw = partial_rho_interval(x, y, z, groups=layer)
            rho_rows.append({"UUAS grid (x) against attention accuracy (y)": name, "heads": len(x),
                             "Spearman rho [95% CI]": ci(r, lo, hi, 2),
                             "mean within-layer rho [95% CI]": ci(rw, lw, hw, 2)})
        md += ["### Do heads that attend along arcs also write the tree?\n",
               "Attention accuracy: how often a word's most-attended word is its gold head (or dependent), "
               "relation `all`, the better of the two directions, EWT test (`task=heads`). The partial row is "
               "Spearman's partial correlation of UUAS and attention accuracy given the positional control's UUAS "
               "(the partial Pearson correlation of the three ranks). Intervals: 95% "
               f"percentile over {HEAD_RESAMPLES:,} resamples of the 72 heads (with replacement; within each "
               "layer for the within-layer mean of the six 12-head rhos); the eval sentences are not resampled.\n",
               markdown(pd.DataFrame(rho_rows)) + "\n"]

    # the full grids
    md.append("### The grids (rows: layer, columns: head)\n")
    grids = [("UUAS, trained heads", "uuas"), ("positional control (offset chosen on dev)", "control"),
             ("UUAS, random-init heads", "random"), ("attention accuracy, trained", "attention"),
             ("attention accuracy, random init", "attention_random")]
    for title, col in grids:
        if col in h:
            g = grid(h, col).reset_index()
            g.columns = ["layer"] + [f"H{c}" for c in g.columns[1:]]
            md += [f"{title}:\n", markdown(g) + "\n"]
    heads_figure(h, rho_rows, note, out / "heads.png")
    return md


def heads_figure(h: pd.DataFrame, rho_rows: list[dict], note: str, path: Path) -> None:
    maps = [(c, t) for c, t in (("uuas", "UUAS: trained heads' context vectors"),
                                ("control", "positional control: the neighbour's vectors"),
                                ("random", "UUAS: random-init heads"),
                                ("attention", "attention accuracy (trained)")) if c in h]
    fig, axes = plt.subplots(2, 4, figsize=(18, 7.4), dpi=80)
    vmax = max(h[c].max() for c, _ in maps if c != "attention")
    vmin = min(h[c].min() for c, _ in maps if c != "attention")
    for ax, (c, title) in zip(axes[0], maps):
        m = grid(h, c).to_numpy()
        im = ax.imshow(m, cmap="viridis" if c == "attention" else "magma", aspect="auto",
                       **({} if c == "attention" else {"vmin": vmin, "vmax": vmax}))
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_xticks(range(m.shape[1]))
        ax.set_yticks(range(m.shape[0]))
        fig.colorbar(im, ax=ax)
    for ax in axes[0][len(maps):]:
        ax.axis("off")
    scat = [("uuas", "attention", "trained heads"), ("control", "attention", "positional control"),
            ("partial", "attention", "partial, given the control"),
            ("random", "attention_random", "random-init heads")]
    scat = [s for s in scat if (s[0] in h or (s[0] == "partial" and "control" in h)) and s[1] in h]
    for ax, (x, y, title), row in zip(axes[1], scat, rho_rows):
        if x == "partial":  # rank residuals on the control's ranks: what the partial correlation correlates
            ok = h[["uuas", "attention", "control"]].notna().all(axis=1)
            ax.scatter(rank_residuals(h.attention[ok], h.control[ok]), rank_residuals(h.uuas[ok], h.control[ok]),
                       s=14)
            ax.set_xlabel("rank of attention accuracy, less its fit on the control's rank")
            ax.set_ylabel("rank of UUAS, less its fit on the control's rank")
        else:
            ax.scatter(h[y], h[x], s=14)
            ax.set_xlabel("attention accuracy" + (" (random init)" if y == "attention_random" else ""))
            ax.set_ylabel("UUAS")
        ax.set_title(f"{title}: rho = {row['Spearman rho [95% CI]']}", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[1][len(scat):]:
        ax.axis("off")
    fig.suptitle(f"MiniLM's 72 heads on UD EWT test ({note})", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------------- MDL

def mdl_section(mdl: pd.DataFrame, out: Path) -> list[str]:
    rows, per = [], []
    for _, r in mdl.sort_values("layer").iterrows():
        v = r.seed_values
        n = np.asarray(v["n_train"])
        k_task = np.round(2.0 ** (np.asarray(v["uniform_codelength_bits"]) / n))  # the uniform code is n log2 K
        k_ctl = np.round(2.0 ** (np.asarray(v["control_uniform_codelength_bits"]) / n))
        t = {"layer": int(r.layer), "arcs": n.mean(), "K task": k_task, "K control": k_ctl}
        for key in ("codelength_bits", "control_codelength_bits", "uniform_codelength_bits", "compression",
                    "control_compression", "codelength_ratio", "accuracy", "control_accuracy", "selectivity",
                    "majority_accuracy", "control_majority_accuracy"):
            t[key] = (r[key], r[f"{key}_tlo"], r[f"{key}_thi"])
        per.append({"layer": int(r.layer), "task_bits_per_arc": np.asarray(v["codelength_bits"]) / n,
                    "control_bits_per_arc": np.asarray(v["control_codelength_bits"]) / n,
                    "uniform_bits_per_arc": np.log2(k_task), "control_uniform_bits_per_arc": np.log2(k_ctl),
                    "compression": np.asarray(v["compression"]),
                    "control_compression": np.asarray(v["control_compression"]), "dir": r.dir})
        rows.append(t)
    kb = lambda x: ci(x[0] / KBIT, x[1] / KBIT, x[2] / KBIT, 1)  # noqa: E731
    c2 = lambda x: ci(*x, 2)  # noqa: E731
    show = pd.DataFrame([{
        "layer": t["layer"], "arcs": f"{t['arcs']:,.0f}",
        "K (task / control)": f"{int(t['K task'].min())}-{int(t['K task'].max())} / "
                              f"{int(t['K control'].min())}-{int(t['K control'].max())}",
        "uniform kbits": f"{t['uniform_codelength_bits'][0] / KBIT:.1f}",
        "task kbits": kb(t["codelength_bits"]), "task compression": c2(t["compression"]),
        "control kbits": kb(t["control_codelength_bits"]), "control compression": c2(t["control_compression"]),
        "control / task codelength": c2(t["codelength_ratio"]),
    } for t in rows])
    acc = pd.DataFrame([{
        "layer": t["layer"], "accuracy": ci(*t["accuracy"]), "majority label": ci(*t["majority_accuracy"]),
        "control accuracy": ci(*t["control_accuracy"]), "control majority": ci(*t["control_majority_accuracy"]),
        "selectivity": ci(*t["selectivity"]),
    } for t in rows])
    ks = np.concatenate([t["K task"] for t in rows])
    kc = np.concatenate([t["K control"] for t in rows])
    n_sent = sorted({int(v) for v in mdl.max_train_sentences if pd.notna(v)})
    md = [f"## MDL: online codelength of the dependency labels per layer ({'/'.join(f'{v:,}' for v in n_sent)} "
          f"EWT train sentences a seed, non-punctuation arcs; {int(mdl.seeds.iloc[0])} seeds)\n",
          f"kbits of {KBIT} bits (Voita and Titov's convention). The uniform code spends log2 K bits an arc for K "
          f"labels: K = {int(ks.min())}-{int(ks.max())} relations in the seeds' training arcs, log2 K = "
          f"{np.log2(ks.min()):.2f}-{np.log2(ks.max()):.2f} bits (control labels: K = {int(kc.min())}-"
          f"{int(kc.max())}, {np.log2(kc.min()):.2f}-{np.log2(kc.max()):.2f} bits; each code's compression is "
          "against its own uniform code). Cells: mean of the seeds [95% t interval across seeds].\n",
          markdown(show) + "\n",
          "The probe trained on all of a seed's arcs, scored on the EWT test arcs (accuracy), beside the majority "
          "label of the training arcs and its control task (Hewitt and Liang: each dependent word type gets one "
          "label drawn from the training label distribution):\n", markdown(acc) + "\n"]
    per = pd.DataFrame(per)
    best = int(per.loc[per.compression.map(np.mean).idxmax(), "layer"])
    b = read_table(Path(per[per.layer == best].dir.iloc[0]), "mdl_blocks")
    md += [f"Each block of the online code at layer {best} (the layer with the highest task compression), first "
           "seed. Block 0 is sent with the uniform code; each later block with a probe trained on the arcs "
           "before it less a held-out part of them, whose cross-entropy chose the epoch kept (task / control). "
           "New types: the block's arcs whose dependent word type no earlier arc had (the control label is a "
           "function of that type), with the control's bits per arc on them and on the other arcs:\n",
           markdown(block_table(b)) + "\n"]
    mdl_figure(per, out / "mdl.png", n_sent)
    return md


def block_table(b: pd.DataFrame) -> pd.DataFrame:
    """One row per block of an ``mdl_blocks`` table: the arcs before it (trained on + held out), the epochs
    kept, bits per arc of task and control, the share of new dependent types and the control's bits per arc on
    new and on seen types."""
    t, c = (b[b["labels"] == lab].set_index("block") for lab in ("task", "control"))
    n = c.end - c.start
    seen = n - c.new_type_items
    return pd.DataFrame({
        "block": c.index, "arcs before": c.start, "held out": c.validation_items,
        "epochs (task / control)": [f"{int(e)} / {int(f)}" for e, f in zip(t.epochs.reindex(c.index), c.epochs)],
        "arcs in block": n, "task bits per arc": (t.bits / (t.end - t.start)).reindex(c.index),
        "control bits per arc": c.bits / n, "new types": c.new_type_items / n,
        "control bits per arc, new types": (c.new_type_bits / c.new_type_items.where(c.new_type_items > 0)),
        "control bits per arc, seen types": ((c.bits - c.new_type_bits) / seen.where(seen > 0)),
    }).reset_index(drop=True)


def mdl_figure(per: pd.DataFrame, path: Path, n_sent: list[int]) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15, 3.8), dpi=80)

    def band(ax, x, vals, **kw):
        m = np.array([v.mean() for v in vals])
        lo, hi = np.array([v.min() for v in vals]), np.array([v.max() for v in vals])
        line = ax.plot(x, m, **kw)[0]
        ax.fill_between(x, lo, hi, alpha=0.2, color=line.get_color())

    band(axes[0], per.layer, per.task_bits_per_arc, marker="o", label="relation labels")
    band(axes[0], per.layer, per.control_bits_per_arc, marker="s", linestyle="--", label="control task")
    axes[0].plot(per.layer, [v.mean() for v in per.uniform_bits_per_arc], color="grey", linestyle=":",
                 label="uniform code (log2 K)")
    axes[0].set_ylabel("online codelength per arc (bits)")
    band(axes[1], per.layer, per.compression, marker="o")
    band(axes[1], per.layer, per.control_compression, marker="s", linestyle="--")
    axes[1].axhline(1.0, color="grey", linestyle=":")
    axes[1].set_ylabel("compression (uniform / online)")
    for ax in axes[:2]:
        ax.set_xlabel("hidden layer (0 = embeddings)")
        ax.set_xticks(range(7))
    best = int(per.loc[per.compression.map(np.mean).idxmax(), "layer"])
    b = read_table(Path(per[per.layer == best].dir.iloc[0]), "mdl_blocks")
    b = b[b.start > 0]
    for labels, style in (("task", "-"), ("control", "--")):
        bb = b[b["labels"] == labels]
        axes[2].plot(bb.start, bb.bits / (bb.end - bb.start), marker=".", linestyle=style,
                     label="relation labels" if labels == "task" else "control task")
    axes[2].set_xscale("log")
    axes[2].set_xlabel(f"arcs before the block (layer {best}, first seed)")
    axes[2].set_ylabel("bits per arc of the block")
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=9)
    fig.suptitle("MDL (online code) of a relation probe on [x_i; x_j; x_i*x_j] per layer and of its control task "
                 f"({'/'.join(f'{v:,}' for v in n_sent)} EWT train sentences a seed; bands: range over seeds)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    fig.savefig(path)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------------- main

# results.md's sections in order: the start of each heading, and the run dir that writes it
SECTIONS = {"layers": ("## Per hidden layer", "layers"), "heads": ("## Heads", "heads"), "mdl": ("## MDL", "mdl")}


def previous_sections(path: Path) -> dict[str, list[str]]:
    """The sections of an existing ``results.md`` by :data:`SECTIONS` key (each a one-element list of its
    text), so a section whose runs are absent can be written again as it was."""
    if not path.is_file():
        return {}
    text, out = path.read_text(), {}
    starts = sorted((text.find("\n" + head) + 1, k) for k, (head, _) in SECTIONS.items() if "\n" + head in text)
    for (start, k), (end, _) in zip(starts, starts[1:] + [(len(text) + 1, None)]):
        out[k] = [text[start:end - 1].rstrip("\n") + "\n"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", type=Path, help="the results dir holding the runs named above")
    ap.add_argument("--data-dir", type=Path, default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder, for the linear-chain baselines on test (default: $UD_EWT_DIR)")
    ap.add_argument("--cache", default="results/cache", help="the corpus cache (extract.cache_dir)")
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    R = args.results

    def load(name: str) -> pd.DataFrame | None:
        p = R / name
        df = probe_runs(p) if p.is_dir() else None
        return df if df is not None and len(df) else None

    linear = linear_baselines(args.data_dir, args.cache) if args.data_dir.is_dir() else None
    kept = previous_sections(args.out / "results.md")
    parts: dict[str, list[str]] = {}
    layers = load("layers")
    if layers is not None:
        full = [f for f in (load("full_train"), load("full_train_random")) if f is not None]
        parts["layers"], _ = layers_section(layers, load("layers_dev"),
                                            pd.concat(full, ignore_index=True) if full else None, linear, args.out)
    heads = load("heads")
    if heads is not None:
        attn = attention_accuracy(R / "attention_test") if (R / "attention_test").is_dir() else None
        attn_r = (attention_accuracy(R / "attention_test_random") if (R / "attention_test_random").is_dir()
                  else None)
        parts["heads"] = heads_section(heads, load("heads_dev"), load("heads_offset"), load("heads_offset_dev"),
                                       load("heads_random"), attn, attn_r, linear, args.out)
    mdl = load("mdl")
    if mdl is not None:
        parts["mdl"] = mdl_section(mdl, args.out)
    carried = [k for k in SECTIONS if k not in parts and k in kept]
    for k in carried:
        print(f"{R / SECTIONS[k][1]} is missing: the {k} section (and its figure) of {args.out / 'results.md'} "
              "is kept as it was")
    md = ["# Structural probes and MDL on UD EWT: the tables\n",
          "Written by `summarise.py` from the runs of the README's commands; every number the README quotes is "
          "here."
          + (f" The {' and '.join(carried)} section{'s stand' if len(carried) > 1 else ' stands'} as an earlier run of "
             "this script wrote them (their run dirs were absent when it last ran)." if carried else "") + "\n"]
    for k in SECTIONS:
        md += parts.get(k, kept.get(k, []))
    (args.out / "results.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
