"""The dashboard on hand-made task=importance run dirs: importance heatmaps beside attention accuracy, the
scatter of the two per relation, gradient / leave-one-layer-in figures, pruning bands, the link table."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import yaml
from test_dashboard import heads_table, put_json

from probing.report import dashboard_importance as I
from probing.report.dashboard import write_dashboard
from probing.report.sources import load_sources
from probing.results import write_table

IDENT = dict(model="m", corpus="c", split="dev", readout="relation", ablation="mean")


def drop_of(layer: int, head: int, rel: str) -> float:
    """Hand-made ablation drops of a 2 x 2 model: nsubj grows with the head index, all with the layer."""
    return (head + 1) / 100 if rel == "nsubj" else (layer + 1) / 100


def importance_run(path, heads_run=None, gradient: bool = True):
    rows = []
    for rel, n in (("all", 200), ("nsubj", 50)):
        for layer in range(2):
            for head in range(2):
                d = drop_of(layer, head, rel)
                rows.append(dict(method="ablation", metric="accuracy_drop", relation=rel, layer=layer, head=head, n=n,
                                 score=d, ci_low=d - 0.01, ci_high=d + 0.01))
                rows.append(dict(method="ablation", metric="loss_change", relation=rel, layer=layer, head=head, n=n,
                                 score=-d, ci_low=-d - 0.1, ci_high=-d + 0.1))
                if gradient and rel == "all":
                    rows.append(dict(method="gradient", metric="gradient", relation=rel, layer=layer, head=head, n=9,
                                     score=0.1 * (2 * layer + head), ci_low=0.0, ci_high=1.0))
            rows.append(dict(method="layer_in", metric="accuracy_drop", relation=rel, layer=layer, head=None, n=n,
                             score=0.3 - 0.1 * layer, ci_low=0.2, ci_high=0.4))
    imp = pd.DataFrame(rows).assign(**IDENT)
    imp["head"] = pd.array(imp["head"], dtype="Int64")
    write_table(imp, path, "importance")
    prune = [dict(order=o, seed=s, fraction_removed=f, relation=r, heads_removed=int(4 * f), score=v)
             for r in ("all", "nsubj")
             for o, s, vals in (("gradient", None, (0.9, 0.8, 0.5)), ("random", 0, (0.9, 0.7, 0.2)),
                                ("random", 1, (0.9, 0.5, 0.4)))
             for f, v in zip((0.0, 0.5, 1.0), vals)]
    write_table(pd.DataFrame(prune).assign(**IDENT), path, "pruning")
    link = pd.DataFrame([dict(relation=r, direction=d, n_heads=4, rho=rho, ci_low=rho - 0.4, ci_high=rho + 0.2)
                         for r, rho in (("all", 0.25), ("nsubj", 0.5)) for d in ("dep_to_head", "head_to_dep")])
    write_table(link.assign(**IDENT), path, "importance_link")
    put_json(path / "metrics.json", {"task": "importance", **IDENT})
    (path / ".hydra").mkdir(parents=True, exist_ok=True)
    (path / ".hydra" / "config.yaml").write_text(yaml.safe_dump({
        "task": {"name": "importance"}, "model": {"name": "m"},
        "importance": {"heads_run": None if heads_run is None else str(heads_run)}}))
    return path


def heads_run(path):
    heads = heads_table("m")  # accuracy (layer * 2 + head + 1) / 10 for dep_to_head, -0.05 for head_to_dep
    all_rows = heads[heads.relation == "nsubj"].assign(relation="all")
    write_table(pd.concat([heads, all_rows], ignore_index=True), path, "heads")
    put_json(path / "metrics.json", {"task": "heads"})
    return path


def test_relation_figures_put_importance_beside_attention_accuracy(tmp_path):
    heads = heads_run(tmp_path / "heads")
    src = load_sources([importance_run(tmp_path / "imp", heads_run=heads)])
    assert src[0].linked_heads is not None and len(src) == 1  # the heads run is read through the config
    figs = I.relation_figures(src)
    assert [t for t, _, _ in figs] == ["m · c dev · all: importance beside attention accuracy",
                                       "m · c dev · nsubj: importance beside attention accuracy"]
    assert [n for _, _, n in figs] == [4, 4]  # drop, accuracy x 2 directions, loss change
    fig = figs[1][1]
    drop, d2h, h2d, loss, s_d2h, s_h2d = fig["data"]
    assert np.array(drop["z"], dtype=float) == pytest.approx(np.array([[0.01, 0.02], [0.01, 0.02]]))
    assert drop["customdata"][1][0] == pytest.approx([0.0, 0.02, 50])  # ci_low, ci_high, n of L1 H0
    assert np.array(d2h["z"], dtype=float) == pytest.approx(np.array([[0.1, 0.2], [0.3, 0.4]]))
    assert np.array(h2d["z"], dtype=float) == pytest.approx(np.array([[0.05, 0.15], [0.25, 0.35]]))
    assert np.array(loss["z"], dtype=float) == pytest.approx(-np.array(drop["z"], dtype=float))
    # a point per head: x its attention accuracy, y its drop, coloured by its layer
    points = sorted(zip(s_d2h["x"], s_d2h["y"], s_d2h["marker"]["color"]))
    np.testing.assert_allclose(np.array(points, dtype=float),
                               [(0.1, 0.01, 0), (0.2, 0.02, 0), (0.3, 0.01, 1), (0.4, 0.02, 1)])
    assert s_d2h["marker"]["showscale"] and not s_h2d["marker"]["showscale"]
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert "dep_to_head: Spearman ρ 0.50 [0.10, 0.70]" in titles
    assert (s_d2h["xaxis"], loss["yaxis"]) == ("x4", "y6")


def test_attention_accuracy_from_a_heads_run_in_the_page_or_none(tmp_path):
    alone = load_sources([importance_run(tmp_path / "imp")])
    figs = I.relation_figures(alone)
    assert [n for _, _, n in figs] == [2, 2]  # no attention accuracy anywhere: drop and loss change only
    assert len(figs[0][1]["data"]) == 2
    with_heads = load_sources([tmp_path / "imp", heads_run(tmp_path / "heads")])
    figs = I.relation_figures(with_heads)
    assert [n for _, _, n in figs] == [4, 4]
    # where the accuracy came from: the heads run (same label as the importance run: told apart by its dir)
    assert figs[0][1]["layout"]["annotations"][1]["text"].endswith(f"(m · c dev [{tmp_path.name}/heads])")
    other = heads_table("other")  # another model's heads run is not this run's attention accuracy
    write_table(other, tmp_path / "other", "heads")
    put_json(tmp_path / "other" / "metrics.json", {"task": "heads"})
    assert [n for _, _, n in I.relation_figures(load_sources([tmp_path / "imp", tmp_path / "other"]))] == [2, 2]


def test_attention_accuracy_the_run_computed_itself(tmp_path):
    """A run without importance.heads_run writes the accuracy it computed as its own heads table: the
    scatter reads it from there, and says so."""
    run = importance_run(tmp_path / "imp")
    heads_run(run)  # its heads table, in the importance run's own dir
    put_json(run / "metrics.json", {"task": "importance", **IDENT})
    src = load_sources([run])
    assert src[0].linked_heads is not None
    figs = I.relation_figures(src)
    assert [n for _, _, n in figs] == [4, 4]
    fig = figs[1][1]
    assert np.array(fig["data"][1]["z"], dtype=float) == pytest.approx(np.array([[0.1, 0.2], [0.3, 0.4]]))
    assert fig["layout"]["annotations"][1]["text"].endswith("(the run's own heads table)")


def test_method_and_pruning_figures(tmp_path):
    src = load_sources([importance_run(tmp_path / "imp")])
    (title, fig, n), = I.method_figures(src)
    assert n == 1 and title == "m · c dev: gradient and leave-one-layer-in importance (all arcs)"
    grad, bars = fig["data"]
    assert np.array(grad["z"], dtype=float) == pytest.approx(np.array([[0.0, 0.1], [0.2, 0.3]]))
    assert (bars["x"], bars["y"]) == ([0, 1], pytest.approx([0.3, 0.2]))
    assert bars["error_y"]["array"] == pytest.approx([0.1, 0.2])
    (title, fig, n), = I.pruning_figures(src)
    assert n == 0 and [a["text"] for a in fig["layout"]["annotations"]] == ["all", "nsubj"]
    all_panel = [t for t in fig["data"] if t["xaxis"] == "x"]
    by_name = {t["name"]: t["y"] for t in all_panel}
    assert by_name["gradient"] == pytest.approx([0.9, 0.8, 0.5])
    # two random orders: the band is their min and max, the line their mean
    assert by_name["random (min)"] == pytest.approx([0.9, 0.5, 0.2])
    assert by_name["random (min–max)"] == pytest.approx([0.9, 0.7, 0.4])
    assert by_name["random (mean)"] == pytest.approx([0.9, 0.6, 0.3])
    assert sum(t["showlegend"] for t in fig["data"]) == 3  # one legend entry per curve, not per panel
    assert not I.method_figures(load_sources([importance_run(tmp_path / "imp2", gradient=False)]))[0][2]


def test_link_table_and_the_page(tmp_path):
    heads = heads_run(tmp_path / "heads")
    imp = importance_run(tmp_path / "imp", heads_run=heads)
    table = I.link_table(load_sources([imp]))
    row = table[(table.relation == "nsubj") & (table.direction == "head_to_dep")].iloc[0]
    # nsubj's largest drop is head 1 (first in table order: L0H1); its head_to_dep accuracy 0.2 - 0.05
    assert (row["most important"], row["accuracy_drop"], row["rho"]) == ("L0H1", pytest.approx(0.02), 0.5)
    assert row["its attention accuracy"] == pytest.approx(0.15)
    assert list(table.relation) == ["all", "all", "nsubj", "nsubj"]  # most arcs first
    html = write_dashboard([imp], tmp_path / "d.html").read_text()
    # importance: 2 relations x 4, gradient 1; no heads figures (the heads run is not a source of the page)
    assert re.search(r"data-expected='(\d+)'", html).group(1) == str(2 * 4 + 1)
    assert "Attention accuracy against importance" in html and "No importance runs here" not in html
    assert "importance_link" in html and "L0H1" in html


def test_a_sweep_of_importance_jobs_is_one_source_per_job(tmp_path):
    importance_run(tmp_path / "sweep" / "0")
    importance_run(tmp_path / "sweep" / "1", gradient=False)
    sources = load_sources([tmp_path / "sweep"])
    assert [s.path.name for s in sources] == ["0", "1"]
    assert [n for _, _, n in I.method_figures(sources)] == [1, 0]  # job 1 has no gradient rows


def test_the_overview_of_an_importance_page_names_the_costliest_head_per_relation(tmp_path):
    """An importance-only page leads with the importance run: per relation the head whose ablation drops the
    score most (hand-made drops: all grows with the layer, nsubj with the head; ties go to the first head in
    table order), its interval, the unablated score and the all-heads-ablated floor (the pruning curves' ends),
    how many relations were ablated against the attention table's; the importance section is open."""
    run = importance_run(tmp_path / "imp")
    heads_run(run)  # the attention accuracy the run computed itself: nsubj, nmod:poss (as_is)
    prune = pd.read_csv(run / "pruning.csv")
    prune.loc[prune["fraction_removed"] == 1.0, "score"] = 0.1  # every head gone: one score, whatever the order
    write_table(prune, run, "pruning")
    (run / ".hydra" / "config.yaml").write_text(yaml.safe_dump({
        "task": {"name": "importance"}, "model": {"name": "m"}, "importance": {"heads_run": None, "min_count": 50}}))
    html = write_dashboard([run], tmp_path / "d.html").read_text()
    table = re.search(r"<table class='overview importance-overview'>(.*?)</table>", html, re.S)
    assert table and table.start() < html.index("<table class='overview'>") < html.index("<details")
    cells = {r[0]: r for r in (re.sub(r"<[^>]+>", " ", tr).split() for tr in
                               re.findall(r"<tr><td class='l'>.*?</tr>", table.group(1), re.S))}
    assert cells["all"] == ["all", "200", "1-0", "+0.020", "[+0.010,", "+0.030]", "0.900", "0.100"]
    assert cells["nsubj"] == ["nsubj", "50", "0-1", "+0.020", "[+0.010,", "+0.030]", "0.900", "0.100"]
    assert list(cells) == ["all", "nsubj"]
    flat = " ".join(html.split())
    assert ("1 relation with at least importance.min_count=50 arcs, and all arcs; the attention-accuracy table "
            "below has 1 more relation under that bound, not ablated.") in flat  # nmod:poss
    href = re.search(r"<a href='#([^']+)'>nsubj</a></td><td>50</td>\s*<td class='l'>0-1", html).group(1)
    assert f"<h3 id='{href}'>m · c dev · nsubj: importance beside attention accuracy</h3>" in html
    assert "<details class='section' open><summary><h2 id='importance'>" in html
    assert "importance</a> (1 relation and all arcs ablated; " in flat


def test_without_pruning_curves_the_overview_says_there_is_no_floor(tmp_path):
    run = importance_run(tmp_path / "imp")
    (run / "pruning.csv").unlink()
    (run / "pruning.parquet").unlink(missing_ok=True)
    html = write_dashboard([run], tmp_path / "d.html").read_text()
    table = re.search(r"<table class='overview importance-overview'>(.*?)</table>", html, re.S).group(1)
    assert "all heads ablated" not in table
    assert "the run drew no pruning curves" in " ".join(html.split())
    # the costliest head per relation stays: nsubj's drop grows with the head index
    assert re.search(r">nsubj</a></td><td>50</td>\s*<td class='l'>0-1</td><td>\+0\.020 \[\+0\.010, \+0\.030\]", table)


def test_the_overview_reads_the_held_out_choice_where_the_run_has_one(tmp_path):
    """With an importance_heldout table the overview names the head chosen on one half of the sentences and the
    drop measured on the other (here 0-0 and +0.004, where the in-sample maximum would be 0-1, +0.020); the random
    orders' own mean row is not drawn a second time."""
    run = importance_run(tmp_path / "imp")
    held = pd.DataFrame([dict(relation=r, layer=0, head=0, chosen_drop=0.03, n=25, score=0.004, ci_low=-0.002,
                              ci_high=0.010, heads_tested=4, heads_passing=0) for r in ("all", "nsubj")])
    write_table(held.assign(**IDENT), run, "importance_heldout")
    prune = pd.read_csv(run / "pruning.csv")
    mean = prune[prune["order"] == "random"].groupby(["fraction_removed", "relation"], as_index=False)["score"].mean()
    write_table(pd.concat([prune, mean.assign(order="random_mean", **IDENT)], ignore_index=True), run, "pruning")
    html = write_dashboard([run], tmp_path / "d.html").read_text()
    table = re.search(r"<table class='overview importance-overview'>(.*?)</table>", html, re.S).group(1)
    assert re.search(r">nsubj</a></td><td>25</td>\s*<td class='l'>0-0</td><td>\+0\.004 \[-0\.002, \+0\.010\]", table)
    assert "its drop and interval from the other half" in " ".join(html.split())
    assert "random_mean" not in html
