"""The dashboard's first screen and what it leaves out: the overview of best heads comes before every section,
relations left out of the overview or of the runs' figures are named, a sweep along one axis draws lines and no
empty sections."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from test_dashboard import heads_table, put_json

from probing.report import plotly_json as P
from probing.report.dashboard import MAX_RELATION_FIGURES, write_dashboard
from probing.report.dashboard_overview import MAX_RELATIONS
from probing.results import write_table

CHOSEN = dict(label_set="as_is", relation="nsubj", direction="dep_to_head", layer=1, head=1, n=50,
              held_out_heads="0-1 dep_to_head (+1), 0-1 dep_to_head (+1)", held_out_accuracy=0.31,
              held_out_ci_low=0.25, held_out_ci_high=0.37, held_out_gain=0.06, held_out_gain_ci_low=0.01,
              held_out_gain_ci_high=0.11, p_adjusted=0.02, beats_baseline=True)


def heads_run(path, tables: dict, metrics: dict | None = None):
    """A finished heads run dir holding ``tables``."""
    for name, df in tables.items():
        write_table(df, path, name, parquet=False)
    put_json(path / "metrics.json", {"task": "heads", **(metrics or {})})
    return path


def traces(html: str) -> list[dict]:
    """Every trace the page's figures draw (the data argument of each ``Plotly.newPlot``)."""
    out = []
    for m in re.finditer(r'Plotly\.newPlot\(\s*"[^"]+",\s*', html):
        out += json.JSONDecoder().raw_decode(html, m.end())[0]
    return out


def overview_cells(html: str) -> dict[str, list[str]]:
    """The overview grid as relation -> the text of its source cells."""
    table = re.search(r"<table class='overview'>(.*?)</table>", html, re.S).group(1)
    rows = {}
    for tr in re.findall(r"<tr><td class='l'><a href='#[^']*'>([^<]*)</a></td>(.*?)</tr>", table, re.S):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", tr[1], re.S)[1:]  # after the arcs
        rows[tr[0]] = [re.sub(r"<[^>]+>", "", c).strip() for c in cells]
    return rows


def test_the_overview_comes_first_and_names_the_best_head_per_relation(tmp_path):
    """Before any section: per relation, the held-out choice where the run made one (its head, accuracy and
    decision), else the in-sample best, labelled; a column per source, a link to each relation's heatmaps."""
    held = heads_run(tmp_path / "held", {"heads": heads_table("a"), "best_heads": pd.DataFrame([CHOSEN])})
    plain = heads_run(tmp_path / "plain", {"heads": heads_table("b")})
    html = write_dashboard([held, plain], tmp_path / "d.html").read_text()
    overview = html.index("id='overview'")
    first_section = min(html.index(f"<h2 id='{a}'>") for a in ("runs", "heads", "best"))
    assert overview < first_section and html.index("<details") > overview
    cells = overview_cells(html)
    assert list(cells) == ["nsubj", "nmod:poss"]  # most arcs first
    assert cells["nsubj"][0] == "0-1 (dep→head) 0.310 ✓"  # the held-out choice, not the in-sample 1-1
    assert cells["nmod:poss"][0] == "1-1 (dep→head) 0.380 in-sample"  # no held-out figure: labelled
    assert cells["nsubj"][1] == "1-1 (dep→head) 0.400"  # a run without held-out figures: its column says so
    assert "<span class='note'>in-sample best</span>" in html
    assert "href='#h-nsubj--as-is-'" in html and "<h3 id='h-nsubj--as-is-'>" in html


def test_relations_past_the_overview_are_named(tmp_path):
    rels = {f"r{k:02d}": 1000 - k for k in range(MAX_RELATIONS + 3)}
    df = pd.concat([heads_table("m").query("relation == 'nsubj' and label_set == 'as_is'")
                    .assign(relation=r, n=n) for r, n in rels.items()], ignore_index=True)
    html = write_dashboard([heads_run(tmp_path / "run", {"heads": df})], tmp_path / "d.html").read_text()
    assert len(overview_cells(html)) == MAX_RELATIONS
    flat = " ".join(html.split())
    assert f"{MAX_RELATIONS} of {MAX_RELATIONS + 3} relations shown" in flat
    assert "r20, r21, r22." in flat  # the three with fewest arcs, by name


def test_the_runs_figures_keep_the_relations_with_most_arcs_and_name_the_rest(tmp_path):
    """A run with more relation PNGs than the page embeds: the most frequent relations' figures, and a
    sentence naming those left out (not the alphabetical first ones, silently)."""
    rels = ["acl", "advcl", "amod", "aux", "case", "cc", "det", "nmod:poss", "nsubj", "obj"]
    n = {r: 100 + 10 * k for k, r in enumerate(reversed(rels))}  # acl most arcs, obj fewest
    df = pd.concat([heads_table("m").query("relation == 'nsubj'").assign(relation=r, n=v) for r, v in n.items()])
    run = heads_run(tmp_path / "run", {"heads": df})
    (run / "figures").mkdir()
    for r in rels:
        (run / "figures" / f"heads_{r.replace(':', '_')}.png").write_bytes(b"\x89PNG fake " + r.encode())
    (run / "figures" / "patterns.png").write_bytes(b"\x89PNG fake")
    html = write_dashboard([run], tmp_path / "d.html").read_text()
    captions = re.findall(r"<figcaption class='note'>figures/([^<]*)</figcaption>", html)
    ranked = sorted(rels, key=lambda r: -n[r])
    assert captions == [f"heads_{r.replace(':', '_')}.png" for r in ranked[:MAX_RELATION_FIGURES]] + ["patterns.png"]
    left = ranked[MAX_RELATION_FIGURES:]
    assert (f"{MAX_RELATION_FIGURES} of {len(rels)} relations shown (the {len(left)} with fewest arcs left out: "
            f"{', '.join(left)})") in html


def layer_sweep(path, head) -> None:
    """A collected probe sweep over layers 0-3 only (``head``: one head for every job, or None)."""
    rows = [dict(model="m", probe="relation", layer=layer, head=head, metric=m, value=v)
            for layer in range(4) for m, v in (("accuracy", 0.5 + layer / 10), ("control_accuracy", 0.4),
                                                 ("selectivity", 0.1 + layer / 10))]
    write_table(pd.DataFrame(rows).astype({"head": "Int64"}), path, "sweep", parquet=False)


@pytest.mark.parametrize("head", [None, 0])
def test_a_sweep_over_layers_draws_lines_and_no_empty_sections(tmp_path, head):
    layer_sweep(tmp_path / "sweep", head)
    html = write_dashboard([tmp_path / "sweep"], tmp_path / "d.html").read_text()
    assert not re.search(r"No [^<.]* (here|in these runs)", html)
    assert re.search(r"<p class='note'>Not in these runs: [^<]*heads per relation[^<]*\.</p>", html)
    assert html.count("<h2 id=") == 2  # runs and probes
    drawn = traces(html)
    assert {t["type"] for t in drawn} == {"scatter"} and "data-expected='0'" in html
    lines = [t for t in drawn if t.get("name", "").startswith("accuracy")]
    assert lines and all(t["y"] == pytest.approx([0.5, 0.6, 0.7, 0.8]) for t in lines)
    assert re.search(r"<td class='l'>layer 3(, head 0)?</td><td[^>]*>4 jobs</td>", html)  # the best job, first


def test_a_per_layer_measure_draws_a_line_per_relation_instead_of_one_column_heatmaps(tmp_path):
    df = heads_table("m", n_layers=3, n_heads=1)  # one value per layer, as ALTI gives
    html = write_dashboard([heads_run(tmp_path / "alti", {"heads": df})], tmp_path / "d.html").read_text()
    drawn = traces(html)
    assert "data-expected='0'" in html and {t["type"] for t in drawn} == {"scatter"}
    assert [t["y"] for t in drawn[:1]] == [pytest.approx([0.1, 0.2, 0.3])]  # nsubj accuracy per layer
    assert overview_cells(html)["nsubj"] == ["2-0 (dep→head) 0.300"]  # the overview reads the same table


def test_flat_heatmaps_become_lines_and_others_stay():
    fig = P.grid_figure(1, 3, ["a", "b", "c"])
    column = np.array([[0.1], [0.2], [0.3]])
    row = np.array([[np.nan, np.nan], [0.5, 0.7]])
    custom = np.stack([column, column + 1], axis=-1)
    fig["data"] = [P.on(P.heatmap(column, "coloraxis", "L%{y} H%{x}<br>accuracy %{z:.3f}", custom), 1, 1, 3),
                   P.on(P.heatmap(row, "coloraxis", "L%{y} H%{x}<br>uuas %{z:.3f}"), 1, 2, 3),
                   P.on(P.heatmap(np.eye(2), "coloraxis", "L%{y} H%{x}<br>v %{z:.3f}"), 1, 3, 3)]
    P.layer_head_axes(fig, 1, 3, 3, 2)
    assert P.lines_for_flat_heatmaps(fig) == 2
    over_layers, over_heads, kept = fig["data"]
    assert (over_layers["type"], over_layers["x"], over_layers["y"]) == ("scatter", [0, 1, 2], [0.1, 0.2, 0.3])
    assert over_layers["hovertemplate"] == "L%{x} H0<br>accuracy %{y:.3f}<extra></extra>"
    assert over_layers["customdata"] == [[0.1, 1.1], [0.2, 1.2], [0.3, 1.3]]
    assert (over_heads["x"], over_heads["y"], over_heads["hovertemplate"]) == (
        [0, 1], [0.5, 0.7], "L1 H%{x}<br>uuas %{y:.3f}<extra></extra>")
    layout = fig["layout"]
    assert layout["xaxis"]["title"] == {"text": "layer"} and layout["yaxis"]["title"] == {"text": "accuracy"}
    assert layout["yaxis"]["autorange"] is True and layout["xaxis2"]["title"] == {"text": "head"}
    assert kept["type"] == "heatmap" and layout["yaxis3"]["autorange"] == "reversed"


def test_root_is_left_out_and_every_place_counts_relations_alike(tmp_path):
    """root (accuracy 0 at every head: ROOT is never predicted) gets no overview row, and the note names it;
    the overview, the runs table and the navigation line count the same relations (as-is labels, ``all``
    apart), the heads section naming its base-label figures on their own."""
    heads = heads_table("m")  # as_is nsubj, nmod:poss; base nsubj (same as as_is), nmod
    nsubj = heads[(heads.relation == "nsubj") & (heads.label_set == "as_is")]
    root = nsubj.assign(relation="root", n=30, correct=0, accuracy=0.0, ci_low=0.0, ci_high=0.0)
    all_arcs = nsubj.assign(relation="all", n=200)
    run = heads_run(tmp_path / "run", {"heads": pd.concat([heads, root, all_arcs], ignore_index=True)})
    html = write_dashboard([run], tmp_path / "d.html").read_text()
    assert list(overview_cells(html)) == ["all", "nsubj", "nmod:poss"]  # no root row
    flat = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    # as_is: nsubj, nmod:poss and root besides all
    assert "2 of 3 relations shown (and all arcs); left out: root (no head ever points at the gold head" in flat
    assert "heads per relation (3 relations and all arcs, 1 more figure of base labels)" in flat
    runs = re.search(r"<h2 id='runs'>.*?</table>", html, re.S).group(0)
    header = re.findall(r"<th[^>]*>([^<]*)</th>", runs)
    values = re.findall(r"<td[^>]*>([^<]*)</td>", runs)
    assert values[header.index("relations")] == "3"
