"""The dashboard with heads tables of different measures: each relation's heatmaps per measure side by side,
columns labelled by measure, and a measure column in the best-heads table."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from test_dashboard import heads_table, put_json

from probing.report import dashboard_figures as F
from probing.report.dashboard import write_dashboard
from probing.report.sources import load_sources
from probing.results import write_table


def measured(measure: str, scale: float) -> pd.DataFrame:
    """The hand-made heads table of ``test_dashboard`` under ``measure``, accuracies scaled by ``scale``."""
    df = heads_table("m")
    df["accuracy"] = df["accuracy"] * scale
    df.insert(3, "measure", measure)
    return df


def run_dir(path, df: pd.DataFrame):
    write_table(df, path, "heads", parquet=False)
    put_json(path / "metrics.json", {"task": "heads"})
    return path


def test_runs_of_two_measures_sit_side_by_side_per_relation(tmp_path):
    a = run_dir(tmp_path / "att", measured("attention", 1.0))
    b = run_dir(tmp_path / "norm", measured("norm", 0.5))
    sources = load_sources([a, b])
    assert [s.measure for s in sources] == ["attention", "norm"]
    assert [s.label for s in sources] == ["attention · m · c dev", "norm · m · c dev"]  # no path suffixes
    figs = F.heads_figures(sources)
    title, fig, count = figs[0]
    assert title == "nsubj (as_is)" and count == 2 * 2 * 2  # (accuracy, gain) x directions x measures
    heatmaps = [t for t in fig["data"] if t["type"] == "heatmap"]
    assert len(heatmaps) == count
    titles = [a["text"] for a in fig["layout"]["annotations"]][:4]  # the accuracy row, left to right
    assert titles == ["attention · m · c dev<br>dep_to_head · accuracy", "norm · m · c dev<br>dep_to_head · accuracy",
                      "attention · m · c dev<br>head_to_dep · accuracy", "norm · m · c dev<br>head_to_dep · accuracy"]
    att, norm = (np.array(t["z"], dtype=float) for t in heatmaps[:2])  # dep_to_head, one per measure
    assert att == pytest.approx(np.array([[0.1, 0.2], [0.3, 0.4]]))
    assert norm == pytest.approx(att / 2)

    best = F.best_heads(sources)
    assert list(best.columns[:2]) == ["source", "measure"] and set(best["measure"]) == {"attention", "norm"}
    pick = best[(best.relation == "nsubj") & (best.direction == "dep_to_head")].set_index("measure")
    assert pick.loc["norm", "accuracy"] == pytest.approx(pick.loc["attention", "accuracy"] / 2)

    html = write_dashboard([a, b], tmp_path / "d.html").read_text()
    assert re.search(r"data-expected='(\d+)'", html).group(1) == str(sum(n for _, _, n in figs))
    assert "<th class='l'>measure</th>" in html and "norm · m · c dev" in html


def test_a_sweep_over_heads_measure_and_a_run_holding_two_measures(tmp_path):
    sweep = tmp_path / "multirun"
    for job, (m, scale) in enumerate((("attention", 1.0), ("alti", 0.8))):
        df = measured(m, scale)
        if m == "alti":  # a per-layer measure: one "head" per layer
            df = df[df["head"] == 0]
        run_dir(sweep / str(job), df)
        put_json(sweep / str(job) / "metrics.json", {"task": "heads"})
    sources = load_sources([sweep])
    assert [s.measure for s in sources] == ["attention", "alti"]
    title, fig, count = F.heads_figures(sources)[0]
    assert count == 8 and [np.array(t["z"]).shape for t in fig["data"][:2]] == [(2, 2), (2, 1)]

    both = run_dir(tmp_path / "both", pd.concat([measured("attention", 1.0), measured("norm", 0.5)]))
    split = load_sources([both])
    assert [(s.measure, len(s.heads)) for s in split] == [("attention", 32), ("norm", 32)]
    assert F.heads_figures(split)[0][2] == 8


def test_one_measure_keeps_the_labels_and_old_tables_have_no_measure_column(tmp_path):
    one = load_sources([run_dir(tmp_path / "a", measured("norm", 1.0))])
    assert one[0].label == "m · c dev" and one[0].measure == "norm"
    assert set(F.best_heads(one)["measure"]) == {"norm"}
    old = load_sources([run_dir(tmp_path / "old", heads_table("m"))])
    assert old[0].measure is None and "measure" not in F.best_heads(old).columns


def test_a_probe_sweep_over_probe_measure_gives_one_source_per_measure(tmp_path):
    sweep = tmp_path / "multirun"
    for job, (m, acc) in enumerate((("attention", 0.7), ("norm", 0.6))):
        rows = [dict(model="m", corpus="c", measure=m, probe="relation", layer=1, head=None, metric=k, value=v)
                for k, v in (("accuracy", acc), ("control_accuracy", 0.4), ("selectivity", acc - 0.4))]
        write_table(pd.DataFrame(rows), sweep / str(job), "probe_scores", parquet=False)
        put_json(sweep / str(job) / "metrics.json", {"task": "probe", "probe": "relation"})
    sources = load_sources([sweep])
    assert [s.measure for s in sources] == ["attention", "norm"]
    assert all(s.label.startswith(f"{s.measure} · ") for s in sources)
    [(_, fig, _)] = F.probe_figures(sources)
    assert [a["text"] for a in fig["layout"]["annotations"][:2]] == [s.label for s in sources]
