"""``extract.keep_maps=false``: the heads analysis from what extraction kept instead of the maps equals the one
from the maps, table for table and byte for byte, for an encoder and a causal model, on two measures; resumed,
and from parts, the kept statistics (records and totals) are the same numbers."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import TINY_VOCAB
from families import build
from test_heads_task import Recorder
from test_store_extract import crash_at

from probing.config import DataConfig, DataKind, ExtractConfig, HeadsConfig, Measure, ModelConfig
from probing.errors import ProbingError
from probing.extract import ensure_store
from probing.tasks import heads as heads_task
from probing.tasks.base import RunOutput

TABLES = ["heads", "baselines", "best_heads", "patterns", "head_distances", "trees"]


@pytest.fixture(scope="module", params=["bert", "llama"])
def checkpoint(request, tmp_path_factory):
    from transformers import BertTokenizerFast

    d = tmp_path_factory.mktemp(f"tiny_{request.param}")
    (d / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    BertTokenizerFast.from_pretrained(str(d), do_lower_case=True).save_pretrained(str(d))
    build(request.param, vocab=len(TINY_VOCAB)).save_pretrained(str(d))
    return ModelConfig(name=f"tiny-{request.param}", name_or_path=str(d), device="cpu")


def _run(model, data, ext, h, run_dir):
    return heads_task.run(model, data, ext, h, 0, RunOutput(run_dir, Recorder()))


@pytest.mark.parametrize("measure", [Measure.attention, Measure.norm])
def test_kept_statistics_give_the_tables_of_the_maps(checkpoint, measure, tmp_path):
    data = DataConfig(kind=DataKind.grammar, n_sentences=40)
    ext = ExtractConfig(cache_dir=str(tmp_path / "maps"), progress=False, block_sentences=8, batch_size=4,
                        measures=[measure])
    h = HeadsConfig(measure=measure, min_count=2, bootstrap=40, figures=False, distance_sentences=15,
                    tree_sentences=25)
    _run(checkpoint, data, ext, h, tmp_path / "a")
    kept = replace(ext, cache_dir=str(tmp_path / "kept"), keep_maps=False)
    got = _run(checkpoint, data, kept, h, tmp_path / "b")
    for table in TABLES:
        a, b = tmp_path / "a" / f"{table}.csv", tmp_path / "b" / f"{table}.csv"
        assert a.is_file() == b.is_file(), table
        if a.is_file():
            assert a.read_bytes() == b.read_bytes(), f"{table}.csv differs"
    assert got.stores[0]["store_dir"].split("/")[-1].count("heads_stats") == 1


def test_kept_statistics_resume_and_parts_are_the_same_numbers(checkpoint, tmp_path, monkeypatch):
    from probing.corpus.cache import load_corpus_cached
    from probing.heads.statistics import statistics

    data = DataConfig(kind=DataKind.grammar, n_sentences=40)
    h = HeadsConfig(distance_sentences=15, tree_sentences=25)
    base = ExtractConfig(progress=False, block_sentences=8, batch_size=4, keep_maps=False, shard_mb=0)
    corpus = load_corpus_cached(data, None, str(tmp_path / "c"))
    one = ensure_store(checkpoint, corpus, replace(base, cache_dir=str(tmp_path / "one")),
                       statistics=statistics(corpus, h)).store
    undo = crash_at(monkeypatch, 5)
    parts = replace(base, cache_dir=str(tmp_path / "parts"), partitions=3)
    ensure_store(checkpoint, corpus, replace(parts, partition=2), partial=True, statistics=statistics(corpus, h))
    with pytest.raises(KeyboardInterrupt):
        ensure_store(checkpoint, corpus, replace(parts, partition=0), partial=True, statistics=statistics(corpus, h))
    undo()
    ensure_store(checkpoint, corpus, replace(parts, partition=0), partial=True, statistics=statistics(corpus, h))
    merged = ensure_store(checkpoint, corpus, replace(parts, partition=1), partial=True,
                          statistics=statistics(corpus, h)).store
    assert list(merged.indices) == list(one.indices)
    for i in one.indices:
        assert merged.pointers(i).tobytes() == one.pointers(i).tobytes()
    a, b = one.totals(), merged.totals()
    assert sorted(a) == sorted(b) and all(np.array_equal(a[k], b[k]) for k in a)
    assert a["tree_arcs"][1] == 25 and a["distance_rows"][0] == sum(len(corpus[i]) for i in range(15))


def test_keep_maps_false_is_refused_where_the_maps_are_read(checkpoint, tmp_path):
    from probing.corpus.cache import load_corpus_cached

    data = DataConfig(kind=DataKind.grammar, n_sentences=4)
    ext = ExtractConfig(cache_dir=str(tmp_path), progress=False, keep_maps=False)
    with pytest.raises(ProbingError, match="extract.keep_maps=false keeps what task=heads needs of the maps"):
        ensure_store(checkpoint, load_corpus_cached(data, None, str(tmp_path)), ext)
