"""Tables of the decoder write-up, from the run dirs under one results dir.

    python experiments/decoder_ud_ewt/summarise.py results/decoder_ud_ewt [--dir PATH/TO/UD_English-EWT]

reads (a missing one leaves its section out; the commands are in conf/experiment/decoder_ud_ewt.yaml):

- ``smollm2_q4``, ``smollm2_q4_random``, ``minilm``: ``task=heads`` on EWT test with the best head of each
  relation chosen on EWT dev (SmolLM2-135M-Instruct Q4_1 dequantised, the same shape with random weights, and
  all-MiniLM-L6-v2);
- ``distance``: a sweep of ``probe=distance probe.features=hidden`` over layers of SmolLM2 (trained on a seeded
  subsample of EWT train, stopped on dev, scored on test).

and writes ``results.md`` (every number the README quotes) and the CSV tables beside it in this folder.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from probing.results import read_table

HERE = Path(__file__).resolve().parent
RUNS = {"smollm2_q4": "SmolLM2-135M-Instruct (Q4_1)", "smollm2_q4_random": "SmolLM2 shape, random weights",
        "minilm": "all-MiniLM-L6-v2"}


def _structural():
    """The structural write-up's readers (job dirs, probe runs, the linear-chain baselines)."""
    spec = importlib.util.spec_from_file_location("structural_summarise",
                                                  HERE.parent / "structural_probes_ud_ewt" / "summarise.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def per_layer(run: Path) -> pd.DataFrame:
    """Per layer and direction, over the arcs a head can see (relation ``all``, label set as_is): the mean and the
    best head accuracy over the layer's heads, the share of heads above the best positional baseline, and the
    baseline; per layer the mean attention to the first position (``sink``)."""
    h = read_table(run, "heads")
    h = h[(h.relation == "all") & (h.label_set == "as_is")]
    g = h.groupby(["layer", "direction"])
    out = pd.DataFrame({"mean_accuracy": g.accuracy.mean(), "best_accuracy": g.accuracy.max(),
                        "share_above_baseline": g.apply(lambda d: float((d.gain_ci_low > 0).mean()),
                                                        include_groups=False),
                        "baseline_accuracy": g.baseline_accuracy.first(), "n": g.n.first()}).reset_index()
    sink = read_table(run, "patterns").groupby("layer").sink.mean().rename("sink").reset_index()
    return out.merge(sink, on="layer").astype({"layer": int})


def best_heads(run: Path) -> pd.DataFrame:
    b = read_table(run, "best_heads")
    b = b[b.label_set == "as_is"]
    cols = ["relation", "direction", "held_out_n", "held_out_heads", "held_out_accuracy", "held_out_ci_low",
            "held_out_ci_high", "held_out_baseline_accuracy", "held_out_gain", "held_out_gain_ci_low",
            "held_out_gain_ci_high", "p_adjusted", "beats_baseline", "layer", "head", "accuracy"]
    return b[[c for c in cols if c in b.columns]].reset_index(drop=True)


def fmt_best(b: pd.DataFrame) -> list[str]:
    md = ["| relation | direction | test arcs | head (chosen on dev) | test accuracy [95% CI] | best offset | "
          "gain [95% CI] | BH p | beats |", "|---|---|---:|---|---|---:|---|---:|---|"]
    for _, r in b.iterrows():
        md.append(f"| {r.relation} | {r.direction} | {int(r.held_out_n):,} | {r.held_out_heads} | "
                  f"{r.held_out_accuracy:.3f} [{r.held_out_ci_low:.3f}, {r.held_out_ci_high:.3f}] | "
                  f"{r.held_out_baseline_accuracy:.3f} | {r.held_out_gain:+.3f} [{r.held_out_gain_ci_low:+.3f}, "
                  f"{r.held_out_gain_ci_high:+.3f}] | {r.p_adjusted:.3g} | {'yes' if r.beats_baseline else 'no'} |")
    return md


def detectors(run: Path) -> pd.DataFrame:
    """Per detector: how many heads pass (score - null above heads.detector_min_gain, BH across heads) and the
    head with the largest gain, its score, null and interval."""
    d = read_table(run, "detectors")
    d = d.assign(gain=d.score - d.null)
    rows = []
    for name, g in d.groupby("detector", sort=False):
        top = g.loc[g.gain.idxmax()]
        rows.append({"detector": name, "heads": len(g), "passing": int(g.passes.fillna(False).astype(bool).sum()),
                     "top_head": f"{int(top.layer)}-{int(top['head'])}", "score": top.score, "null": top.null,
                     "ci_low": top.ci_low, "ci_high": top.ci_high, "n_sentences": int(top.n_sentences)})
    return pd.DataFrame(rows)


def fmt_detectors(name: str, t: pd.DataFrame) -> list[str]:
    md = [f"**{RUNS[name]}**", "", "| detector | heads passing | top head | score [95% CI] | null | sentences |",
          "|---|---:|---|---|---:|---:|"]
    for _, r in t.iterrows():
        md.append(f"| {r.detector} | {r.passing} of {r.heads} | {r.top_head} | {r.score:.3f} [{r.ci_low:.3f}, "
                  f"{r.ci_high:.3f}] | {r.null:.3f} | {r.n_sentences:,} |")
    return md + [""]


def fmt_layers(layers: dict[str, pd.DataFrame]) -> list[str]:
    md = []
    for name, df in layers.items():
        md += [f"\n**{RUNS[name]}** (relative depth = layer / (layers - 1))\n",
               "| layer | depth | direction | mean head accuracy | best head | heads above baseline | best offset "
               "| sink |", "|---:|---:|---|---:|---:|---:|---:|---:|"]
        top = df.layer.max()
        for _, r in df.iterrows():
            md.append(f"| {r.layer} | {r.layer / max(top, 1):.2f} | {r.direction} | {r.mean_accuracy:.3f} | "
                      f"{r.best_accuracy:.3f} | {r.share_above_baseline:.2f} | {r.baseline_accuracy:.3f} | "
                      f"{r.sink:.3f} |")
    return md


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder, for the linear-chain baseline of the distance probe "
                         "(default: $UD_EWT_DIR)")
    ap.add_argument("--cache", default="results/cache", help="the parsed-corpus cache (default results/cache)")
    args = ap.parse_args()
    md = ["# decoder_ud_ewt: tables", "", "Generated by `python experiments/decoder_ud_ewt/summarise.py "
          "results/decoder_ud_ewt`; every interval is a 95% percentile bootstrap interval over EWT test sentences "
          "(1,000 resamples).", ""]
    layers, found = {}, []
    for name in RUNS:
        run = args.results / name
        if not (run / "metrics.json").is_file():
            print(f"{run}: no finished run, left out")
            continue
        m = json.loads((run / "metrics.json").read_text())
        layers[name] = per_layer(run)
        layers[name].insert(0, "model", name)
        layers[name].to_csv(HERE / f"layers_{name}.csv", index=False, float_format="%.4f")
        b = best_heads(run)
        b.insert(0, "model", name)
        b.to_csv(HERE / f"best_heads_{name}.csv", index=False, float_format="%.4f")
        md += [f"## Best head per relation: {RUNS[name]}", "",
               f"{m['sentences']:,} test sentences; {m['n_layers']} layers x {m['n_heads']} heads; "
               f"{m['multiplicity']['method'] if isinstance(m.get('multiplicity'), dict) else ''} across "
               "relations; causal: " + ("yes, each direction over the arcs it can see" if m["conventions"].get(
                   "causal") else "no"), ""] + fmt_best(b.drop(columns="model")) + [""]
        if m.get("key_value_heads"):
            md += [f"Grouped heads: {m['key_value_heads']}.", ""]
        if (run / "detectors.csv").is_file():
            t = detectors(run)
            t.insert(0, "model", name)
            t.to_csv(HERE / f"detectors_{name}.csv", index=False, float_format="%.4f")
            found.append((name, t.drop(columns="model")))
    if found:
        md += ["## Head detectors (EWT test; induction on 100 repeated random word sequences)", "",
               "A head passes when its score beats its null (the same mass spread uniformly over the words its "
               "query can reach) by more than 0.1, one-sided bootstrap test, BH across heads.", ""]
        for name, t in found:
            md += fmt_detectors(name, t)
    if layers:
        md += ["## Per layer: alignment with dependencies and the sink", ""] + fmt_layers(layers) + [""]
    dist = args.results / "distance"
    if dist.is_dir():
        st = _structural()
        runs = st.probe_runs(dist).sort_values("layer")
        md += ["## Distance probe per layer (hidden states of SmolLM2, EWT test)", "",
               "| layer | UUAS [95% CI] | DSpr [95% CI] | train sentences | seeds |", "|---:|---|---|---:|---:|"]
        for _, r in runs.iterrows():
            md.append(f"| {int(r.layer)} | {r.uuas:.3f} [{r.uuas_lo:.3f}, {r.uuas_hi:.3f}] | {r.dspr:.3f} "
                      f"[{r.dspr_lo:.3f}, {r.dspr_hi:.3f}] | {r.max_train_sentences} | {r.seeds} |")
        runs[["layer", "random_init", "uuas", "uuas_lo", "uuas_hi", "dspr", "dspr_lo", "dspr_hi"]].to_csv(
            HERE / "distance_probe.csv", index=False, float_format="%.4f")
        if args.dir:
            chain = st.linear_baselines(Path(args.dir), args.cache)
            md += ["", f"Linear chain on EWT test (predicted distance |i - j|): UUAS {chain['uuas'][0]:.3f} "
                   f"[{chain['uuas'][1]:.3f}, {chain['uuas'][2]:.3f}], DSpr {chain['dspr'][0]:.3f} "
                   f"[{chain['dspr'][1]:.3f}, {chain['dspr'][2]:.3f}]."]
    (HERE / "results.md").write_text("\n".join(md) + "\n")
    print(f"wrote {HERE / 'results.md'}")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
