"""Every family end to end on a tiny random checkpoint saved like a hub model (the test WordPiece vocabulary
attached, or for Qwen2, which transformers loads with its byte-level BPE tokenizer class whatever tokenizer a
checkpoint declares, a byte-level BPE trained on the grammar): the heads analysis on ``norm`` maps, a structural
probe on one head's stored context vectors, and head importance, each from the same calls the command line
makes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY_VOCAB
from families import build, configs
from omegaconf import OmegaConf
from test_heads_task import Recorder
from tokenizers_synth import byte_level_bpe, grammar_sentences, save

from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    HeadsConfig,
    ImportanceConfig,
    Measure,
    ModelConfig,
    ProbeConfig,
    ProbeKind,
    Regimen,
)
from probing.results import read_table
from probing.tasks import heads as heads_task
from probing.tasks import importance as importance_task
from probing.tasks import probe as probe_task
from probing.tasks.base import RunOutput

BYTE_LEVEL = {"qwen2"}  # families whose checkpoints load a byte-level BPE tokenizer class


@pytest.fixture(scope="module", params=sorted(configs()))
def checkpoint(request, tmp_path_factory):
    from transformers import BertTokenizerFast

    name = request.param
    d = tmp_path_factory.mktemp(f"tiny_{name}")
    if name in BYTE_LEVEL:
        vocab = save(byte_level_bpe(grammar_sentences(100)), d)
    else:
        (d / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
        BertTokenizerFast.from_pretrained(str(d), do_lower_case=True).save_pretrained(str(d))
        vocab = len(TINY_VOCAB)
    build(name, vocab=vocab).save_pretrained(str(d))
    return name, ModelConfig(name=f"tiny-{name}", name_or_path=str(d), device="cpu")


def test_heads_probe_and_importance_on_every_family(checkpoint, tmp_path):
    name, model = checkpoint
    data = DataConfig(kind=DataKind.grammar, n_sentences=24)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False,
                                             measures=[Measure.attention, Measure.norm, Measure.norm_layer,
                                                       Measure.alti, Measure.value_zeroing],
                                             representations=["hidden", "heads"]))
    for measure in (Measure.norm, Measure.alti, Measure.value_zeroing):  # one store per measure, one extraction
        h = HeadsConfig(measure=measure, min_count=1, bootstrap=0, figures=False, distances=False, trees=False)
        run_dir = tmp_path / f"heads_{measure}"
        got = heads_task.run(model, data, ext, h, 0, RunOutput(run_dir, Recorder())).metrics
        per_head = measure is Measure.norm  # ALTI and value zeroing: one map per layer, read as head 0
        assert (got["n_layers"], got["n_heads"], got["measure"]) == (2, 4 if per_head else 1, measure.value)
        heads = read_table(run_dir, "heads")
        assert len(heads) and np.isfinite(heads["accuracy"]).all() and set(heads["layer"]) == {0, 1}
        assert set(heads["head"]) == ({0, 1, 2, 3} if per_head else {0})

    probe = ProbeConfig(kind=ProbeKind.distance, features="heads", layer=1, head=2, eval_fraction=0.25,
                        regimen=Regimen(max_epochs=2))
    m = probe_task.run(model, data, ext, probe, 0, RunOutput(tmp_path / "probe", Recorder())).metrics
    assert m["features"] == "heads" and m["n_features"] == 8 and 0 <= m["uuas"] <= 1

    imp = ImportanceConfig(readout="embedding", method="ablation", bootstrap=0, pruning=False, layer_in=False,
                           min_count=1, figures=False)
    r = importance_task.run(model, data, ext, imp, HeadsConfig(), 0, RunOutput(tmp_path / "imp", Recorder()))
    table = read_table(tmp_path / "imp", "importance")
    ablated = table[table.method == "ablation"]
    assert r.metrics["model"] == f"tiny-{name}" and len(ablated[["layer", "head"]].drop_duplicates()) == 2 * 4
    assert np.isfinite(table["score"]).all() and (table["score"] >= -1e-6).all()
