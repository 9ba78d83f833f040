"""run_heads end to end on the synthetic store: files, metrics, conventions, console table, tracker."""

import json
import logging

import pytest
from analysis_store import build_store, synthetic_corpus
from omegaconf import OmegaConf

from probing.analysis.task import run_heads
from probing.config import RunConfig
from probing.results import read_table


class Recorder:
    def __init__(self):
        self.tables, self.images = [], []

    def log_metrics(self, m):
        pass

    def log_table(self, name, df):
        self.tables.append(name)

    def log_image(self, name, path):
        self.images.append(name)

    def finish(self, ok=True):
        pass


def cfg(**heads):
    c = OmegaConf.structured(RunConfig)
    c.heads.min_count = 1
    c.heads.bootstrap = 50
    for k, v in heads.items():
        c.heads[k] = v
    return c


def test_run_heads_writes_tables_figures_and_best_heads(tmp_path, caplog):
    corpus = synthetic_corpus(25, seed=5)
    store = build_store(tmp_path / "store", corpus, dtype="float16")
    tracker = Recorder()
    with caplog.at_level(logging.INFO, logger="probing.analysis.task"):
        m = run_heads(cfg(), corpus, store, tmp_path / "run", tracker)
    run = tmp_path / "run"
    heads = read_table(run, "heads")
    need = {"model", "corpus", "split", "label_set", "relation", "direction", "layer", "head", "n", "correct",
            "accuracy", "ci_low", "ci_high", "baseline_offset", "baseline_accuracy", "diff_ci_low", "diff_ci_high"}
    assert need <= set(heads.columns)
    assert set(heads["label_set"]) == {"as_is", "base"} and (heads["model"] == "planted").all()
    for name in ("baselines", "best_heads", "patterns", "patterns_layers", "head_distances", "head_mds", "trees"):
        assert (run / f"{name}.csv").is_file() and (run / f"{name}.parquet").is_file(), name
    assert (run / "figures" / "heads_det.png").is_file() and (run / "figures" / "heads_nmod_poss.png").is_file()
    assert (run / "figures" / "patterns.png").is_file() and (run / "figures" / "mds.png").is_file()
    det = m["best_heads"]["det"]
    assert (det["layer"], det["head"], det["direction"], det["accuracy"]) == (0, 0, "dep_to_head", 1.0)
    assert det["beats_baseline"] is True
    assert "nmod:poss" in m["best_heads"] and "nmod:poss" not in m["best_heads_base"]
    conv = m["conventions"]
    assert conv["offsets"] == [-3, -2, -1, 1, 2, 3] and conv["min_count"] == 1 and conv["pooling"] == "mean_sum"
    assert conv["bootstrap"]["resamples"] == 50
    json.dumps(m, default=str)
    assert "heads" in tracker.tables and "figures/mds" in tracker.images
    last = m["_console"]  # the pipeline prints it last, after the paths
    assert last.startswith("best head per relation") and "det" in last and "baseline" in last


def test_bad_conventions_fail_with_a_clear_message(tmp_path):
    from probing.pipeline import ProbingError

    corpus = synthetic_corpus(3, seed=0)
    store = build_store(tmp_path / "store", corpus)
    with pytest.raises(ProbingError, match="heads.directions"):
        run_heads(cfg(directions=["up"]), corpus, store, tmp_path / "run", Recorder())
    with pytest.raises(ProbingError, match="0 is not an offset"):
        run_heads(cfg(offsets=[0, 1]), corpus, store, tmp_path / "run", Recorder())
