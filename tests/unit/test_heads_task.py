"""The heads task end to end on the synthetic store: files, metrics, conventions, console table, tracker."""

import json
import logging

import pytest
from heads_store import build_store, synthetic_corpus
from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from probing.config import HeadsConfig, RunConfig
from probing.errors import ProbingError
from probing.results import read_table
from probing.tasks.base import RunOutput
from probing.tasks.heads import analyse

JSON_TYPES = (str, int, float, bool, type(None))


def assert_json_types(x, path="metrics"):
    """Only JSON's own types, exactly (``type(x) is float``: a numpy float64 or a str enum fails)."""
    if type(x) is dict:
        for k, v in x.items():
            assert type(k) is str, f"{path}: key {k!r} is a {type(k).__name__}"
            assert_json_types(v, f"{path}.{k}")
    elif type(x) is list:
        for i, v in enumerate(x):
            assert_json_types(v, f"{path}[{i}]")
    else:
        assert type(x) in JSON_TYPES, f"{path} = {x!r} is a {type(x).__name__}"


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
    c = OmegaConf.structured(RunConfig(heads=HeadsConfig()))
    c.heads.min_count = 1
    c.heads.bootstrap = 50
    for k, v in heads.items():
        c.heads[k] = v
    return c


def test_heads_task_writes_tables_figures_and_best_heads(tmp_path, caplog):
    corpus = synthetic_corpus(25, seed=5)
    store = build_store(tmp_path / "store", corpus, dtype="float16")
    tracker = Recorder()
    with caplog.at_level(logging.INFO, logger="probing.tasks.heads"):
        result = analyse(corpus, store, cfg().heads, 0, RunOutput(tmp_path / "run", tracker))
    m = result.metrics
    run = tmp_path / "run"
    heads = read_table(run, "heads")
    need = {"model", "corpus", "split", "label_set", "relation", "direction", "layer", "head", "n", "correct",
            "accuracy", "ci_low", "ci_high", "baseline_offset", "baseline_accuracy", "gain_ci_low", "gain_ci_high"}
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
    # metrics.json is plain JSON: no numpy scalar, enum or tuple leaks in (json.dumps has no default hook;
    # repr also tells np.float64(0.5) from 0.5, a str enum from its value, and lets NaN equal NaN)
    assert_json_types(m)
    assert repr(json.loads(json.dumps(m))) == repr(m)
    assert "heads" in tracker.tables and "figures/mds" in tracker.images
    # what the result says it wrote is what is in the run dir
    assert result.tables == ["heads", "baselines", "best_heads", "patterns", "patterns_layers", "head_distances",
                             "head_mds", "trees", "detectors"]
    assert all((run / f"{t}.csv").is_file() for t in result.tables)
    assert {p.name for p in result.figures} == {p.name for p in (run / "figures").glob("*.png")}
    # the console summary travels beside the metrics, never inside them
    assert result.console.startswith("best head per relation") and "det" in result.console
    assert "baseline" in result.console and not any(k.startswith("_") for k in m)
    # the columns are explained below the table
    assert "\nheld-out head: the head chosen on each half of the sentences and scored on the other (two folds), " \
           "as layer-head direction (the baseline offset chosen with it), one per fold" in result.console
    assert "beats: the held-out gain's p-value, adjusted across relations (bh), below 0.05" in result.console


def test_bad_conventions_fail_with_a_clear_message(tmp_path):
    corpus = synthetic_corpus(3, seed=0)
    store = build_store(tmp_path / "store", corpus)
    out = RunOutput(tmp_path / "run", Recorder())
    with pytest.raises(ValidationError, match="Direction"):  # a closed set: refused by the config itself
        cfg(directions=["up"])
    with pytest.raises(ProbingError, match="heads.directions is empty"):
        analyse(corpus, store, cfg(directions=[]).heads, 0, out)
    with pytest.raises(ProbingError, match="0 is not an offset"):
        analyse(corpus, store, cfg(offsets=[0, 1]).heads, 0, out)
