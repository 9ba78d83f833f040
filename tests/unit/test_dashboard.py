"""The dashboard on hand-made run dirs: best heads, heatmap counts and values, missing tables, the CLI."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from probing.cli import report_main as main
from probing.report import dashboard_figures as F
from probing.report.dashboard import write_dashboard
from probing.report.sources import load_run, load_sources, patterns_long
from probing.results import write_table


def heads_table(model: str = "m", n_layers: int = 2, n_heads: int = 2) -> pd.DataFrame:
    """accuracy = (layer * n_heads + head + 1) / 10 for nsubj dep_to_head; other groups offset by -0.05."""
    rows = []
    for label_set, rel, n in (("as_is", "nsubj", 50), ("as_is", "nmod:poss", 20), ("base", "nsubj", 50),
                              ("base", "nmod", 20)):
        for direction, shift in (("dep_to_head", 0.0), ("head_to_dep", -0.05)):
            for layer in range(n_layers):
                for head in range(n_heads):
                    acc = (layer * n_heads + head + 1) / 10 + shift - (0.02 if rel.startswith("nmod") else 0)
                    rows.append(dict(model=model, corpus="c", split="dev", label_set=label_set, relation=rel,
                                     direction=direction, layer=layer, head=head, n=n, correct=round(acc * n),
                                     accuracy=acc, ci_low=acc - 0.1, ci_high=acc + 0.1, baseline_offset=-1,
                                     baseline_accuracy=0.25))
    return pd.DataFrame(rows)


def test_best_heads_picks_the_argmax_per_relation_and_direction(tmp_path):
    src = load_sources_from({"heads": heads_table()}, tmp_path)[0]
    best = F.best_heads([src])
    # (as_is: nsubj, nmod:poss; base: nmod) x 2 directions; base nsubj repeats as_is nsubj and is left out
    assert len(best) == 6 and set(best[best.label_set == "base"].relation) == {"nmod"}
    row = best[(best.label_set == "as_is") & (best.relation == "nsubj") & (best.direction == "dep_to_head")].iloc[0]
    assert (row.layer, row["head"]) == (1, 1) and row.accuracy == pytest.approx(0.4)
    assert row.gain == pytest.approx(0.4 - 0.25)
    assert best["n"].iloc[0] == 50  # most frequent relations first
    assert "held_out_accuracy" not in best.columns  # no held-out figures in this run: no blank columns


def test_best_heads_shows_the_held_out_figures_of_the_chosen_head_first(tmp_path):
    """A run's best_heads table (a head chosen on other sentences, scored on these) puts its held-out figures
    and that head's name on the row of its relation and direction, before the in-sample maximum (here another
    head); other rows stay blank."""
    chosen = pd.DataFrame([dict(label_set="as_is", relation="nsubj", direction="dep_to_head", layer=1, head=1,
                                held_out_heads="0-1 dep_to_head (+1)", held_out_accuracy=0.31, held_out_gain=0.06, held_out_gain_ci_low=0.01,
                                held_out_gain_ci_high=0.11, p_adjusted=0.02, beats_baseline=True)])
    src = load_sources_from({"heads": heads_table(), "best_heads": chosen}, tmp_path)[0]
    best = F.best_heads([src])
    cols = list(best.columns)
    assert cols.index("held_out_accuracy") < cols.index("accuracy") and "beats_baseline" in cols
    row = best[(best.relation == "nsubj") & (best.direction == "dep_to_head") & (best.label_set == "as_is")].iloc[0]
    assert (row.held_out_head, row.held_out_accuracy, row.p_adjusted, bool(row.beats_baseline)) == \
        ("0-1 dep_to_head (+1)", 0.31, 0.02, True)
    assert (row.layer, row["head"]) == (1, 1)  # the in-sample maximum, shown after
    assert best["held_out_accuracy"].notna().sum() == 1


def test_heads_figures_count_values_and_skip_duplicate_base_labels(tmp_path):
    a = load_sources_from({"heads": heads_table("a")}, tmp_path / "a")[0]
    figs = F.heads_figures([a])
    # as_is nsubj, as_is nmod:poss, base nmod (base nsubj has the same numbers as as_is nsubj: not repeated)
    assert [t for t, _, _ in figs] == ["nsubj (as_is)", "nmod:poss (as_is)", "nmod (base)"]
    assert [n for _, _, n in figs] == [4, 4, 4]  # (accuracy, gain) x 2 directions x 1 source
    fig = figs[0][1]
    acc, gain = fig["data"][0], fig["data"][2]  # dep_to_head accuracy, dep_to_head gain
    assert np.array(acc["z"], dtype=float) == pytest.approx(np.array([[0.1, 0.2], [0.3, 0.4]]))
    assert np.array(gain["z"], dtype=float) == pytest.approx(np.array([[0.1, 0.2], [0.3, 0.4]]) - 0.25)
    assert acc["customdata"][1][0][:3] == pytest.approx([0.2, 0.4, 50])  # ci_low, ci_high, n of L1 H0
    assert (acc["xaxis"], gain["yaxis"]) == ("x", "y3") and fig["layout"]["coloraxis"]["colorbar"]["title"] == {
        "text": "acc"}  # plotly's own subplot grid; titles as objects (plotly.js 3 draws no string titles)
    b = load_sources_from({"heads": heads_table("b", n_layers=3, n_heads=2)}, tmp_path / "b")[0]
    two = F.heads_figures([a, b])
    assert [n for _, _, n in two] == [8, 8, 8]  # two runs side by side
    assert np.array(two[0][1]["data"][1]["z"]).shape == (3, 2)


def test_missing_tables_degrade_and_the_page_counts_its_heatmaps(tmp_path):
    run = tmp_path / "run"
    write_table(heads_table(), run, "heads")
    # wide: melted; "rows" counts and the constant uniform entropy are no heatmaps
    write_table(pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "cls": [0.5, 0.1, 0.2, 0.3],
                              "entropy": [1.0, 2.0, 3.0, 4.0], "uniform_entropy": 2.5, "rows": 100}), run, "patterns")
    put_json(run / "metrics.json", {"task": "heads", "seconds": 1.5})
    probe = tmp_path / "probe"
    put_json(probe / "metrics.json", {"task": "probe", "probe": "relation", "layer": 1, "head": None,
                                        "accuracy": 0.8, "control_accuracy": 0.5, "selectivity": 0.3})
    out = write_dashboard([run, probe], tmp_path / "d.html")
    html = out.read_text()
    expected = 3 * 4 + 2  # heads figures + one patterns figure per metric (cls, entropy)
    assert re.search(r"data-expected='(\d+)'", html).group(1) == str(expected)
    absent = re.search(r"Not in these runs: ([^.<]*)\.", html).group(1).split(", ")
    assert absent == ["probes on representations", "importance", "patching", "head types", "trees from single heads",
                      "heads in two dimensions", "figures of the runs"]  # one line, no empty section each
    assert "<script src=" not in html, "everything inline: the page opens with no network"
    assert "table class='sortable'" in html and "nmod:poss" in html
    assert html.count("Plotly.newPlot") == 3 + 2 + 1  # heads, patterns, the probe's per-layer figure


def test_sweep_dirs_become_sources(tmp_path):
    sweep = tmp_path / "multirun"
    for job, layer in enumerate([0, 1]):
        put_json(sweep / str(job) / "metrics.json",
                   {"task": "probe", "probe": "relation", "layer": layer, "head": None, "accuracy": 0.5 + layer / 10,
                    "control_accuracy": 0.4, "selectivity": 0.1 + layer / 10})
    write_table(heads_table("x"), sweep / "2", "heads")
    put_json(sweep / "2" / "metrics.json", {"task": "heads"})
    sources = load_sources([sweep])
    assert [s.heads is not None for s in sources] == [True, False]
    probes = sources[1].probes
    assert sorted(probes[probes.metric == "accuracy"]["value"]) == pytest.approx([0.5, 0.6])
    figs = F.probe_figures(sources)
    assert len(figs) == 1 and [list(t["y"]) for t in figs[0][1]["data"]][0] == pytest.approx([0.5, 0.6])


def test_tables_are_read_by_their_schema_names_and_columns(tmp_path):
    wide = pd.DataFrame({"model": ["m"], "layer": [0], "head": [1], "cls": [0.5], "sep": [0.25], "rows": [7],
                         "extra": [9.0]})
    long = patterns_long(wide)  # the schema's pattern metrics only: not the row count, not unknown columns
    assert sorted(long["metric"]) == ["cls", "sep"] and list(long.columns) == ["model", "layer", "head", "metric",
                                                                               "value"]
    assert patterns_long(pd.DataFrame({"layer": [0], "head": [0], "a": [1]})) is None
    run = tmp_path / "run"
    write_table(wide, run, "patterns")
    write_table(pd.DataFrame({"layer": [0], "head": [0], "x": [1.0], "y": [2.0]}), run, "head_mds")
    write_table(pd.DataFrame({"layer": [0], "head": [0], "x": [5.0], "y": [6.0]}), run, "mds")  # not a schema name
    src = load_run(run)
    assert (src.mds.x.iloc[0], src.mds.y.iloc[0]) == (1.0, 2.0)
    assert dict(zip(src.patterns["metric"], src.patterns["value"])) == {"cls": 0.5, "sep": 0.25}
    (run / "head_mds.csv").unlink()
    (run / "head_mds.parquet").unlink()
    assert load_run(run).mds is None  # no guessing from other table names


def test_cli_errors_and_default_output(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main([str(tmp_path / "nope")])
    assert e.value.code == 2 and "not a run or sweep dir" in capsys.readouterr().err
    run = tmp_path / "run"
    write_table(heads_table(), run, "heads")
    with pytest.raises(SystemExit) as e:  # tables without metrics.json: a run that failed part-way
        main([str(run)])
    assert e.value.code == 2 and "unfinished or failed runs left out: " + str(run) in capsys.readouterr().err
    put_json(run / "metrics.json", {"task": "heads"})
    main([str(run)])
    assert capsys.readouterr().out.strip() == str((run / "dashboard.html").resolve())
    main([str(run), "--relations", "nsubj", "--out", str(tmp_path / "one.html")])
    html = (tmp_path / "one.html").read_text()
    assert re.search(r"data-expected='(\d+)'", html).group(1) == "4" and "nmod:poss" not in html


def put_json(path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def load_sources_from(tables: dict, d):
    for name, df in tables.items():
        write_table(df, d, name, parquet=False)
    put_json(d / "metrics.json", {"task": "heads"})
    return load_sources([d])


def test_tree_figures_score_undirected_trees_by_uuas(tmp_path):
    rows = []
    for method, direction, uas in (("mst_directed", "dep_to_head", 0.4), ("mst_undirected", "undirected", None)):
        for layer in range(2):
            for head in range(2):
                rows.append(dict(method=method, direction=direction, layer=layer, head=head, uas=uas,
                                 uuas=0.5 + layer / 10 + head / 100, left_branching_uas=0.3, right_branching_uas=0.1,
                                 left_branching_uuas=0.45, right_branching_uuas=0.45))
    run = tmp_path / "run"
    write_table(pd.DataFrame(rows), run, "trees")
    write_table(heads_table(), run, "heads")
    put_json(run / "metrics.json", {"task": "heads"})
    figs = F.tree_figures(load_sources([run]))
    assert [(t, n) for t, _, n in figs] == [("trees: mst_directed, dep_to_head (UAS)", 1),
                                            ("trees: mst_undirected, undirected (UUAS)", 1)]
    assert np.array(figs[1][1]["data"][0]["z"], dtype=float) == pytest.approx(np.array([[0.5, 0.51], [0.6, 0.61]]))
    assert figs[1][1]["data"][0]["customdata"][0][0] == pytest.approx([0.45, 0.45])


def test_per_head_sweeps_plot_the_numbers_of_each_layers_best_head(tmp_path):
    rows = []
    for layer, head, acc, ctl in ((0, 0, 0.6, 0.5), (0, 1, 0.5, 0.1), (1, 0, 0.7, 0.2), (1, 1, 0.9, 0.6)):
        rows += [dict(probe="relation", layer=layer, head=head, metric=m, value=v)
                 for m, v in (("accuracy", acc), ("control_accuracy", ctl), ("selectivity", acc - ctl))]
    write_table(pd.DataFrame(rows), tmp_path / "sweep", "sweep")
    figs = F.probe_figures(load_sources([tmp_path / "sweep"]))
    lines = {t["name"]: list(t["y"]) for t in figs[0][1]["data"]}
    # layer 0: head 0 (accuracy 0.6) wins, so control 0.5 and selectivity 0.1 are head 0's, not the maxima
    assert lines["accuracy (best head)"] == pytest.approx([0.6, 0.9])
    assert lines["control_accuracy (best head)"] == pytest.approx([0.5, 0.6])
    assert lines["selectivity (best head)"] == pytest.approx([0.1, 0.3])
    assert figs[1][2] == 2  # the accuracy and selectivity grids


def test_arc_probe_sweeps_rank_heads_by_uas(tmp_path):
    rows = []
    for head, uas, ctl in ((0, 0.3, 0.9), (1, 0.8, 0.2)):  # head 0 has the higher control score, head 1 the UAS
        rows += [dict(probe="arc", layer=0, head=head, metric=m, value=v)
                 for m, v in (("uas", uas), ("control_accuracy", ctl), ("selectivity", uas - ctl))]
    write_table(pd.DataFrame(rows), tmp_path / "sweep", "sweep")
    figs = F.probe_figures(load_sources([tmp_path / "sweep"]))
    lines = {t["name"]: list(t["y"]) for t in figs[0][1]["data"]}
    assert sorted(lines) == ["control_accuracy (best head)", "selectivity (best head)", "uas (best head)"]
    assert lines["uas (best head)"] == pytest.approx([0.8])
    assert lines["control_accuracy (best head)"] == pytest.approx([0.2])
    assert lines["selectivity (best head)"] == pytest.approx([0.6])
