"""Tables of the agreement-heads write-up, from the ``task=patching`` run dirs under one results dir.

    python experiments/agreement_heads/summarise.py results/agreement_heads

reads ``smollm2_q4`` and ``minilm`` (a missing one leaves its rows out; the commands are in the README) and writes
``results.md`` (every number the README quotes), the CSV tables and the atlas figures beside it in this folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from probing.results import read_table

HERE = Path(__file__).resolve().parent
RUNS = {"smollm2_q4": "SmolLM2-135M-Instruct (Q4_1), its own logits", "minilm": "all-MiniLM-L6-v2, probe readout"}


def _fmt(v: float, ci: tuple[float, float]) -> str:
    return f"{v:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"


def run_summary(name: str, run: Path) -> list[str]:
    m = json.loads((run / "metrics.json").read_text())
    lines = [f"## {RUNS[name]}", "",
             f"- pairs: {m['n_pairs']} ({m['pairs']}; {m['n_pairs_skipped']} left out: {m['skipped_reasons'] or '-'})",
             f"- readout: {m['readout']}" + (f", {m['readout_seeds']} probes of {m['probe_train_pairs']} held-out "
                                             f"pairs (training accuracy {m['probe_train_accuracy']:.3f})"
                                             if m["readout"] == "probe" else ""),
             f"- clean run on the clean side: {m['clean_accuracy']:.3f}; corrupt run on its own side: "
             f"{m['corrupt_accuracy']:.3f}; mean metric clean {m['clean_logit_difference']:+.2f}, corrupt "
             f"{m['corrupt_logit_difference']:+.2f}",
             f"- attribution against activation patching over heads: Spearman {m['attribution_spearman']:.3f} "
             f"[{m['attribution_spearman_ci_low']:.3f}, {m['attribution_spearman_ci_high']:.3f}]",
             f"- seconds by stage: {m['stage_seconds']}", ""]
    top = read_table(run, "patching_top")
    lines += ["Top heads, chosen on one half of the pairs, scored on the other (effect 0 = clean, 1 = corrupt):", "",
              "| rank | head | chosen on | effect (scored half) | p adjusted | direct | indirect |",
              "|---:|---|---:|---|---:|---:|---:|"]
    for r in top.itertuples():
        lines.append(f"| {r.rank} | {r.layer}-{r.head} | {r.chosen_effect:+.3f} | "
                     f"{_fmt(r.effect, (r.effect_ci_low, r.effect_ci_high))} | {r.p_adjusted:.3g} | "
                     f"{r.direct_effect:+.3f} | {r.indirect_effect:+.3f} |")
    heads = read_table(run, "patching")
    lines += ["", "Heads whose effect at every piece passes (p adjusted < 0.05 across heads), by sign:", ""]
    for pos, t in heads.groupby("position", sort=False):
        sig = t[t.p_adjusted < 0.05]
        lines.append(f"- {pos} (n = {int(t.n_pairs.iloc[0])}): {int((sig.effect > 0).sum())} positive, "
                     f"{int((sig.effect < 0).sum())} negative of {len(t)}; largest "
                     + ", ".join(f"{r.layer}-{r.head} {r.effect:+.3f}" for r in
                                 t.sort_values("effect", ascending=False).head(3).itertuples()))
    resid = read_table(run, "patching_residual")
    if resid is not None:
        lines += ["", "Residual stream, each layer's input patched (effect by layer):", "",
                  "| layer | " + " | ".join(resid.position.unique()) + " |",
                  "|---:|" + "---:|" * resid.position.nunique()]
        wide = resid.pivot(index="layer", columns="position", values="effect")[list(resid.position.unique())]
        for layer, row in wide.iterrows():
            lines.append(f"| {layer} | " + " | ".join(f"{v:+.3f}" for v in row) + " |")
    atlas = read_table(run, "patching_atlas")
    if atlas is not None:
        lines += ["", "Atlas (scored half): attention accuracy target -> cue against effect:", ""]
        for rel, per in (m.get("atlas") or {}).items():
            lines.append(f"- {rel} (n = {per['n_pairs']}): Spearman {per['spearman']:.2f} [{per['spearman_ci_low']:.2f}, "
                         f"{per['spearman_ci_high']:.2f}]; offset baseline {per['offset_baseline']:.3f} (offset "
                         f"{per['offset']}); " + ", ".join(f"{k} {v}" for k, v in per["quadrants"].items()))
        best = atlas.sort_values("attention_accuracy", ascending=False).head(3)
        lines.append("- most accurate heads: " + ", ".join(
            f"{r.layer}-{r.head} {r.attention_accuracy:.3f} (effect {r.effect:+.3f})" for r in best.itertuples()))
        atlas.to_csv(HERE / f"atlas_{name}.csv", index=False)
        for png in (run / "figures").glob("patching_atlas_*.png"):
            shutil.copy(png, HERE / f"{png.stem}_{name}.png")
        shutil.copy(run / "figures" / "patching_residual.png", HERE / f"residual_{name}.png")
    top.to_csv(HERE / f"top_{name}.csv", index=False)
    heads.to_csv(HERE / f"patching_{name}.csv", index=False)
    return lines + [""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", type=Path)
    args = ap.parse_args()
    lines = ["# Agreement heads: the tables", "", "Written by `summarise.py` from the runs named in the README.", ""]
    for name in RUNS:
        if (args.results / name / "metrics.json").is_file():
            lines += run_summary(name, args.results / name)
    (HERE / "results.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
