"""``probing task=heads`` with its figures on a causal model's store finishes: on the built-in grammar and on a
treebank (EWT dev), a tiny random GPT-2 scores relations that ``min_count`` keeps in one direction only, and
the run still writes every table, a heatmap per relation, ``metrics.json`` and ``run_meta.json``, with the
conventions a causal run follows."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from families import build
from test_extract_cli import probing
from tokenizers_synth import byte_level_bpe, grammar_sentences, save

from probing.figures.heads import safe_name


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny_gpt2")
    build("gpt2", vocab=save(byte_level_bpe(grammar_sentences(100)), d, "PreTrainedTokenizerFast")
          ).save_pretrained(str(d))
    return d


def _check_finished(run):
    for name in ("metrics.json", "run_meta.json", "heads.csv", "best_heads.csv", "baselines.csv"):
        assert (run / name).is_file(), name
    heads = pd.read_csv(run / "heads.csv")
    shown = heads[heads.label_set == "as_is"]
    directions = shown.groupby("relation")["direction"].nunique()
    # the case that used to stop the run: a relation kept in one direction only
    assert (directions == 1).any(), directions
    pngs = {p.name for p in (run / "figures").glob("heads_*.png")}
    assert pngs == {f"heads_{safe_name(r)}.png" for r in directions.index}
    # each direction counts the arcs it can see
    every = shown[shown.relation == "all"].groupby("direction")["n"].first()
    assert every["dep_to_head"] != every["head_to_dep"]
    conv = json.loads((run / "metrics.json").read_text())["conventions"]
    assert conv["causal"] and conv["root"].startswith("not scored") and conv["baseline"].startswith("per direction")
    base = pd.read_csv(run / "baselines.csv")
    assert set(base.direction) == {"dep_to_head", "head_to_dep"}


@pytest.mark.slow
def test_heads_with_figures_on_a_causal_model_over_the_grammar(tmp_path, tiny_gpt2):
    r = probing("task=heads", "model=local", f"model.name_or_path={tiny_gpt2}", "data.n_sentences=200", "heads.min_count=20",
                "heads.bootstrap=0", "heads.induction_sequences=0", f"hydra.run.dir={tmp_path / 'run'}",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _check_finished(tmp_path / "run")


@pytest.mark.slow
def test_heads_with_figures_on_a_causal_model_over_a_treebank(tmp_path, tiny_gpt2, ewt_dir):
    r = probing("task=heads", "model=local", f"model.name_or_path={tiny_gpt2}", "data=ud", f"data.dir={ewt_dir}",
                "data.limit=80", "heads.min_count=20", "heads.bootstrap=20", "heads.induction_sequences=0",
                f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _check_finished(tmp_path / "run")
