"""probing-collect and the dashboard on hand-made sweeps of probes on representations: structural
and MDL numbers collected, per-layer curves against the random-init and embedding-layer baselines, per-head
UUAS grids beside the same heads' attention accuracy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.stats import spearmanr
from test_dashboard import heads_table, put_json

from probing.report import dashboard_figures as F
from probing.report import dashboard_probes as PR
from probing.report.dashboard import write_dashboard
from probing.report.sources import load_sources
from probing.results import write_table
from probing.sweep import collect

# per probe kind: its metrics.json numbers at layer k (what the probe task writes, plus fit descriptors)
NUMBERS = {
    "distance": lambda k: {"uuas": 0.3 + 0.1 * k, "dspr": 0.5 + 0.1 * k, "n_train": 900, "rank": 32, "epochs": 40},
    "depth": lambda k: {"root_accuracy": 0.4 + 0.2 * k, "nspr": 0.6 + 0.05 * k, "best_epoch": 7},
    "relation": lambda k: {"accuracy": 0.5, "codelength_bits": 1000.0 - 100 * k, "compression": 2.0 + k,
                           "control_codelength_bits": 1500.0},
}


def job(root: Path, num: int, kind: str, layer: int, head=None, random_init: bool = False, numbers=None) -> Path:
    """A finished job dir as a Hydra multirun writes it, with the probe task's metrics.json."""
    d = root / str(num)
    (d / ".hydra").mkdir(parents=True)
    features = "hidden" if head is None else "heads"
    overrides = [f"probe={kind}", f"probe.features={features}", f"probe.layer={layer}"]
    overrides += [f"probe.head={head}"] if head is not None else []
    overrides += ["model.random_init=true"] if random_init else []
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (d / ".hydra" / "config.yaml").write_text(yaml.safe_dump({
        "task": {"name": "probe"}, "model": {"name": "minilm", "random_init": random_init, "seed": 0},
        "data": {"name": "ud_ewt", "split": "dev"},
        "probe": {"kind": kind, "layer": layer, "head": head, "features": features, "eval_split": "test"}}))
    model = "minilm-random0" if random_init else "minilm"
    (d / "metrics.json").write_text(json.dumps({
        "task": "probe", "model": model, "corpus": "ud_ewt", "measure": features, "probe": kind, "layer": layer,
        "head": head, "features": features, **(numbers or NUMBERS[kind](layer)), "seconds": 3.0}))
    return d


def layer_sweep(root: Path, random_init: bool = False) -> Path:
    k = 0
    for kind in NUMBERS:
        for layer in range(3):
            numbers = {"uuas": 0.25, "dspr": 0.2} if random_init and kind == "distance" else None
            job(root, k, kind, layer, random_init=random_init, numbers=numbers)
            k += 1
    return root


def test_collect_gathers_structural_and_mdl_numbers_with_the_model_and_what_it_read(tmp_path):
    table, failed, _ = collect(layer_sweep(tmp_path / "trained"))
    assert failed.empty and table["measure"].unique().tolist() == ["hidden"]
    got = table.set_index(["probe", "layer", "metric"])["value"]
    for metric, want in (("uuas", 0.5), ("dspr", 0.7)):
        assert got[("distance", 2, metric)] == pytest.approx(want)
    assert got[("depth", 1, "root_accuracy")] == pytest.approx(0.6) and got[("depth", 1, "nspr")] == 0.65
    assert got[("relation", 2, "codelength_bits")] == 800.0 and got[("relation", 0, "compression")] == 2.0
    assert got[("relation", 0, "control_codelength_bits")] == 1500.0
    assert not {"rank", "epochs", "best_epoch"} & set(table["metric"])  # how the probe was fitted, not scores
    random, _, _ = collect(layer_sweep(tmp_path / "random", random_init=True))
    assert random["model"].unique().tolist() == ["minilm-random0"]  # the job's own label, not model.name


def test_layer_curves_against_random_init_and_embedding_layer(tmp_path):
    trained, random = layer_sweep(tmp_path / "trained"), layer_sweep(tmp_path / "random", random_init=True)
    for sweep in (trained, random):
        table, _, _ = collect(sweep)
        write_table(table, sweep, "sweep")  # as probing-collect leaves it
    sources = load_sources([trained, random])
    (title, fig, n), = PR.layer_figures(sources)
    assert n == 0 and "random-init and embedding-layer baselines" in title
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert titles[:6] == ["uuas (probe=distance)", "dspr (probe=distance)", "root_accuracy (probe=depth)",
                          "nspr (probe=depth)", "codelength_bits (probe=relation)", "compression (probe=relation)"]
    uuas = {t["name"]: t for t in fig["data"] if t["xaxis"] == "x"}
    trained_name = "minilm · ud_ewt test (sweep trained)"
    random_name = "random init: minilm-random0 · ud_ewt test (sweep random)"
    assert set(uuas) == {trained_name, random_name, f"{trained_name} · embedding layer (layer 0)"}
    assert uuas[trained_name]["y"] == pytest.approx([0.3, 0.4, 0.5]) and uuas[trained_name]["x"] == [0, 1, 2]
    assert uuas[random_name]["y"] == pytest.approx([0.25] * 3) and uuas[random_name]["line"]["dash"] == "dash"
    level = uuas[f"{trained_name} · embedding layer (layer 0)"]
    assert (level["x"], level["y"]) == ([0.0, 2.0], pytest.approx([0.3, 0.3]))
    bits = {t["name"]: t for t in fig["data"] if t["xaxis"] == "x5"}
    assert bits[trained_name]["y"] == [1000.0, 900.0, 800.0]
    assert bits[f"{trained_name} · control task"]["y"] == [1500.0] * 3
    assert bits[f"{trained_name} · control task"]["line"]["dash"] == "dot"
    # the generic probe figure keeps accuracy and selectivity lines, not bits on a 0-1 axis
    generic = F.probe_figures(sources)
    assert [t for t, _, _ in generic] == ["probe=relation: accuracy, control and selectivity per layer"]
    assert {t["name"] for t in generic[0][1]["data"]} == {"accuracy (layer)"}


def head_sweep(root: Path) -> Path:
    """A head sweep of distance probes as the probe task writes it (probe_scores per job, not collected)."""
    k = 0
    for layer in range(2):
        for head in range(2):
            d = job(root, k, "distance", layer, head, numbers={"uuas": 0.2 + 0.1 * (2 * layer + head)})
            ident = dict(model="minilm", corpus="ud_ewt", train_split="train", eval_split="test", measure="heads",
                         probe="distance", layer=layer, head=head, heads=f"L{layer}H{head}")
            write_table(pd.DataFrame([{**ident, "metric": "uuas", "value": 0.2 + 0.1 * (2 * layer + head)}]), d,
                        "probe_scores")
            k += 1
    return root


def test_head_grid_beside_the_same_heads_attention_accuracy(tmp_path):
    heads = heads_table("minilm", n_layers=2, n_heads=3)
    heads = pd.concat([heads, heads[heads.relation == "nsubj"].assign(relation="all")], ignore_index=True)
    heads.loc[(heads.relation == "all") & (heads.layer == 0) & (heads["head"] == 0), "accuracy"] = 0.9
    write_table(heads, tmp_path / "heads", "heads")
    # trees decoded from each head's attention: the undirected one is scored by UUAS, as the distance probe
    trees = pd.DataFrame([dict(method=m, direction=d, layer=k, head=h, uas=np.nan if m == "mst_undirected" else 0.5,
                               uuas=0.1 * (3 * k + h) + (0.5 if m == "mst_directed" else 0))
                          for m, d in (("mst_undirected", "undirected"), ("mst_directed", "dep_to_head"))
                          for k in range(2) for h in range(3)])
    write_table(trees, tmp_path / "heads", "trees")
    put_json(tmp_path / "heads" / "metrics.json", {"task": "heads"})
    sources = load_sources([head_sweep(tmp_path / "sweep"), tmp_path / "heads"])
    (title, fig, n), = PR.head_figures(sources)
    assert n == 4 and title == "probe=distance on each head's output: uuas per head"
    probe, d2h, h2d, tree = fig["data"]
    assert np.array(tree["z"], dtype=float) == pytest.approx(np.array([[0.0, 0.1, 0.2], [0.3, 0.4, 0.5]]))
    assert "UUAS of its attention's spanning tree<br>ρ with uuas 1.00 (4 heads)" in (
        fig["layout"]["annotations"][3]["text"])
    z = np.array(probe["z"], dtype=float)  # the heads run's 2 x 3 shape: head 2 was not probed
    assert z[:, :2] == pytest.approx(np.array([[0.2, 0.3], [0.4, 0.5]])) and np.isnan(z[:, 2]).all()
    acc = np.array(d2h["z"], dtype=float)
    assert acc == pytest.approx(np.array([[0.9, 0.2, 0.3], [0.4, 0.5, 0.6]]))
    rho = spearmanr([0.2, 0.3, 0.4, 0.5], [0.9, 0.2, 0.4, 0.5])[0]
    assert f"dep_to_head)<br>ρ with uuas {rho:.2f} (4 heads)" in fig["layout"]["annotations"][1]["text"]
    assert not F.probe_figures(sources)  # distance probes are drawn here only
    alone = PR.head_figures(load_sources([tmp_path / "sweep"]))
    assert alone[0][2] == 1 and "attention accuracy not shown" in alone[0][0]
    html = write_dashboard([tmp_path / "sweep", tmp_path / "heads"], tmp_path / "d.html").read_text()
    # heads figures: (nsubj, nmod:poss, nmod base, all) x (accuracy, gain) x 2 directions, the 4 grids here,
    # and the trees section's two (one per method)
    assert re.search(r"data-expected='(\d+)'", html).group(1) == str(4 * 4 + 4 + 2)
