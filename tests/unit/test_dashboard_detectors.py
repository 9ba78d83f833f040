"""The dashboard's head types: a head's type is the detector it passes with the largest gain over its null, a
head passing none is blank, and the page has the section with its map and table."""

from __future__ import annotations

import pandas as pd

from probing.report.dashboard import write_dashboard
from probing.report.dashboard_detectors import head_types, type_figures
from probing.report.sources import load_sources
from probing.results import write_table


def _detectors() -> pd.DataFrame:
    # head 0-0 passes previous (gain 0.5) and self (gain 0.6): self; 0-1 passes nothing; 1-0 passes first only
    rows = [("previous", 0, 0, 0.7, 0.2, True), ("self", 0, 0, 0.8, 0.2, True), ("previous", 0, 1, 0.3, 0.2, False),
            ("self", 0, 1, 0.9, 0.2, None), ("first", 1, 0, 0.4, 0.1, True), ("previous", 1, 0, 0.9, 0.1, False),
            ("first", 1, 1, 0.1, 0.1, False), ("first", 0, 0, 0.2, 0.1, False), ("first", 0, 1, 0.2, 0.1, False),
            ("previous", 1, 1, 0.2, 0.1, False)]
    df = pd.DataFrame(rows, columns=["detector", "layer", "head", "score", "null", "passes"])
    return df.assign(ci_low=df.score - 0.05, ci_high=df.score + 0.05, p=0.01, p_adjusted=0.02,
                     n_sentences=10, n_queries=50, model="m", corpus="c", split="dev", measure="attention")


def test_a_head_is_the_kind_it_passes_with_the_largest_gain():
    t = head_types(_detectors())
    assert t[["layer", "head", "type"]].values.tolist() == [[0, 0, "self"], [1, 0, "first"]]
    assert t.gain.round(6).tolist() == [0.6, 0.3]  # 1-0's larger previous gain does not pass, so it is no type


def test_the_dashboard_shows_head_types(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_table(_detectors(), run, "detectors")
    write_table(pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "x": [0.0, 1, 2, 3],
                              "y": [0.0, 1, 0, 1]}), run, "head_mds")
    (run / "metrics.json").write_text('{"task": "heads"}')
    (run / "run_meta.json").write_text('{"task": "heads", "config": {}}')
    sources = load_sources([run])
    (title, fig, n), = type_figures(sources)
    assert fig["data"][0]["text"] == [["self", ""], ["first", ""]] and n == 1
    page = write_dashboard([run], run / "dashboard.html").read_text()
    assert "Head types" in page and "id='types'" in page.replace('"', "'")
