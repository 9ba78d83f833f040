"""`probing task=importance` with MiniLM on a slice of EWT dev (the relation probe fitted on a slice of EWT
train), end to end through the CLI with the offline wandb logger: every table as the schema names it, the
headline in metrics.json, and the link recomputed from the written tables with scipy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import false_discovery_control, spearmanr

from probing import schema

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_importance_minilm_ewt(ewt_dir, tmp_path):
    cache = os.environ.get("PROBING_CACHE_DIR", str(tmp_path / "cache"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": cache, "WANDB_MODE": "offline"}
    run_dir = tmp_path / "run"
    args = ["task=importance", "data=ud_ewt", f"data.dir={ewt_dir}", "data.limit=12", "logger=wandb",
            "logger.mode=offline", "importance.max_train_sentences=100", "importance.max_iter=100", "importance.bootstrap=40",
            "importance.pruning_step=0.5", "importance.pruning_seeds=1", "importance.min_count=10",
            "extract.progress=false", f"hydra.run.dir={run_dir}"]
    r = subprocess.run([sys.executable, "-m", "probing.cli", *args], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert ("importance: relation readout, mean ablation; 12 dev sentences scored (data.limit), the readout trained "
            "on 100 train sentences (importance.max_train_sentences)") in r.stdout + r.stderr

    imp = pd.read_csv(run_dir / "importance.csv")
    assert list(imp.columns) == list(schema.IMPORTANCE.keys) + list(schema.IMPORTANCE.metrics)
    assert (imp[["readout", "ablation"]] == ["relation", "mean"]).all().all()
    one = imp[(imp.method == "ablation") & (imp.metric == "accuracy_drop")]
    assert len(one[one.relation == "all"]) == 72
    assert len(imp[(imp.method == "layer_in") & (imp.metric == "accuracy_drop") & (imp.relation == "all")]) == 6
    grad = imp[imp.method == "gradient"]
    assert len(grad) == 72
    norms = grad.groupby("layer")["score"].apply(lambda s: float(np.sqrt((s ** 2).sum())))
    np.testing.assert_allclose(norms.to_numpy(), 1, rtol=1e-6)  # normalised within each layer
    assert (one.ci_low <= one.ci_high).all()

    metrics = json.loads((run_dir / "metrics.json").read_text())
    # the costliest head is chosen on half the sentences and its drop reported on the other half
    held = pd.read_csv(run_dir / "importance_heldout.csv").set_index("relation")
    assert metrics["most_important_all"] == f"L{int(held.loc['all', 'layer'])}H{int(held.loc['all', 'head'])}"
    assert metrics["most_important_all_drop"] == pytest.approx(held.loc["all", "score"])
    assert held.loc["all", "n"] < one[one.relation == "all"].n.iloc[0]  # the scoring half's arcs only
    # heads that pass: BH across the 72 heads of the relation, as scipy computes it
    rel = one[one.relation == "all"]
    np.testing.assert_allclose(rel.p_adjusted, false_discovery_control(rel.p, method="bh"))
    assert held.loc["all", "heads_passing"] == int((rel.p_adjusted < 0.05).sum())
    assert 0 < metrics["clean_accuracy"] <= 1
    (name, base), = metrics["readout_baselines"].items()  # the relation readout's majority label
    assert name.startswith("majority (") and 0 < base < 1
    assert metrics["readout_margin"] == pytest.approx(metrics["clean_accuracy"] - base)
    assert metrics["readout_beats_baselines"] == (metrics["readout_margin"] >= 0.05)

    prune = pd.read_csv(run_dir / "pruning.csv")
    p_all = prune[prune.relation == "all"]
    assert set(p_all.order) == {"gradient", "attention", "random", "random_mean"}
    assert sorted(p_all.fraction_removed.unique()) == [0.0, 0.5, 1.0]
    start = p_all[p_all.fraction_removed == 0].score
    np.testing.assert_allclose(start, metrics["clean_accuracy"])
    assert p_all[p_all.fraction_removed == 1].score.nunique() == 1  # every order ends with no head left
    np.testing.assert_allclose(p_all.floor, p_all[p_all.fraction_removed == 1].score.iloc[0])
    assert metrics["pruning_floor"] == pytest.approx(p_all.floor.iloc[0])
    assert (p_all.ci_low <= p_all.ci_high).all()

    # the link, recomputed from the heads accuracy the run computed and the importance it wrote
    link = pd.read_csv(run_dir / "importance_link.csv")
    row = link[(link.relation == "all") & (link.direction == "dep_to_head")].iloc[0]
    assert row.ci_low <= row.rho <= row.ci_high
    assert set(link.ci_resampled) == {"importance+attention"}  # attention accuracy computed on these sentences
    # the primary test (all arcs, dep_to_head) two-sided and alone; the others adjusted together (BH by default)
    primary = (link.relation == "all") & (link.direction == "dep_to_head")
    assert list(link.role[primary]) == ["primary"] and (link.role[~primary] == "exploratory").all()
    assert row.p_adjusted == row.p_two_sided and metrics["primary"]["p_two_sided"] == row.p_two_sided
    explore = link[~primary]
    np.testing.assert_allclose(explore.p_adjusted, false_discovery_control(explore.p, method="bh"))
    assert (link.positive == ((link.p_adjusted < 0.05) & (link.rho > 0))).all()
    assert metrics["multiplicity"]["tests"] == len(link) - 1
    # 40 resamples cannot pass the adjusted threshold of that many tests, and the run says so; the primary test's
    # smallest two-sided p-value, 2 / 41, can pass 0.05
    assert metrics["power"] == {"resamples": 40, "smallest_p": 1 / 41, "exploratory_tests": len(link) - 1,
                                "resamples_needed": int(np.ceil((len(link) - 1) / 0.05 - 1)), "enough": False,
                                "primary_enough": True}
    assert (run_dir / "figures" / "importance_all.png").is_file()
    assert (run_dir / "figures" / "pruning_all.png").is_file()
    assert list((run_dir / "wandb").glob("offline-run-*"))
    page = (run_dir / "dashboard.html").read_text()  # the run's own dashboard, as task=heads writes one
    assert "<h2 id='importance'>" in page and "data-expected='0'" not in page
    # independent check of rho: the heads table of a task=heads run over the same sentences
    heads_dir = tmp_path / "heads"
    r = subprocess.run([sys.executable, "-m", "probing.cli", "task=heads", "data=ud_ewt", f"data.dir={ewt_dir}",
                        "data.split=dev", "data.limit=12", "heads.bootstrap=0", "heads.min_count=1",
                        "heads.patterns=false", "heads.distances=false", "heads.trees=false", "heads.figures=false",
                        "report.enabled=false", "extract.progress=false", f"hydra.run.dir={heads_dir}"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    heads = pd.read_csv(heads_dir / "heads.csv")
    acc = heads[(heads.label_set == "as_is") & (heads.relation == "all") & (heads.direction == "dep_to_head")]
    both = acc.merge(one[one.relation == "all"], on=["layer", "head"])
    assert len(both) == 72
    assert row.rho == pytest.approx(spearmanr(both.accuracy, both.score)
                                    .statistic, abs=1e-9)
    # the attention accuracy the importance run computed is in its run dir, as a heads table (the dashboard's
    # scatter reads it), with the same numbers as the heads run's
    own = pd.read_csv(run_dir / "heads.csv")
    assert list(own.columns) == list(schema.HEADS.keys) + list(schema.HEADS.metrics)
    mine = own[(own.relation == "all") & (own.direction == "dep_to_head")].merge(acc, on=["layer", "head"])
    assert len(mine) == 72
    np.testing.assert_allclose(mine.accuracy_x, mine.accuracy_y)
