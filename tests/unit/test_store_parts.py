"""A store built in parts equals one built at once, sentence for sentence and byte for byte; a part that failed
or was killed is re-run alone; the merge refuses parts of another model, corpus or batching by name."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
from cache_dirs import store_dir
from test_store_extract import TEXTS, cfg, corpus, crash_at

from probing.errors import ProbingError, StoreError
from probing.extract import extract
from probing.store.parts import block_ranges, part_span

MANY = [t for _ in range(3) for t in TEXTS] + ["a b c d e f g h i j k l m n o p q r s t u v w x y z"]  # 37


def big() -> object:
    return corpus(MANY, name="many")


def parts_cfg(tmp_path, **kw):
    return cfg(tmp_path, block_sentences=5, max_length=20, shard_mb=0, **kw)


def same_bytes(a, b) -> None:
    assert list(a.indices) == list(b.indices)
    assert a.skipped == b.skipped
    for i in a.indices:
        x, y = a.maps(i), b.maps(i)
        assert x.shape == y.shape and x.tobytes() == y.tobytes(), f"sentence {i} differs"


def test_part_spans_are_whole_blocks_that_tile_the_corpus():
    assert block_ranges(12, 5) == [(0, 5), (5, 10), (10, 12)]
    spans = [part_span(37, 5, k, 4) for k in range(4)]  # 8 blocks: 2 each
    assert spans == [(0, 10), (10, 20), (20, 30), (30, 37)]
    assert [part_span(12, 5, k, 4) for k in range(4)] == [(0, 0), (0, 5), (5, 10), (10, 12)]  # 3 blocks
    covered = sorted(i for k in range(4) for i in range(*part_span(12, 5, k, 4)))
    assert covered == list(range(12))


def test_four_parts_equal_one_process_byte_for_byte(tiny_encoder, tmp_path):
    c = big()
    whole = extract(tiny_encoder, c, parts_cfg(tmp_path / "one")).store
    assert whole.skipped, "the long sentence is skipped in both"
    pcfg = parts_cfg(tmp_path / "parts", partitions=4)
    reports = [extract(tiny_encoder, c, replace(pcfg, partition=k)) for k in (2, 0, 3)]
    assert all(r.store is None for r in reports)
    assert reports[-1].parts.done == (0, 2, 3) and reports[-1].parts.pending == (1,)
    last = extract(tiny_encoder, c, replace(pcfg, partition=1))
    assert last.store is not None and last.parts.complete
    same_bytes(last.store, whole)
    assert not (last.store.dir / "parts").exists()
    assert last.store.manifest["parts"]["of"] == 4
    # the merged store is found by a run without partitions
    again = extract(tiny_encoder, c, parts_cfg(tmp_path / "parts"))
    assert again.reused and again.store.dir == last.store.dir


def test_a_failed_part_is_rerun_alone(tiny_encoder, tmp_path, monkeypatch):
    c = big()
    whole = extract(tiny_encoder, c, parts_cfg(tmp_path / "one")).store
    pcfg = parts_cfg(tmp_path / "parts", partitions=3)
    extract(tiny_encoder, c, replace(pcfg, partition=0))
    undo = crash_at(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        extract(tiny_encoder, c, replace(pcfg, partition=1))
    undo()
    extract(tiny_encoder, c, replace(pcfg, partition=2))
    resumed = extract(tiny_encoder, c, replace(pcfg, partition=1))  # only part 1 runs again, from its shards
    assert resumed.resumed_from > 0 and resumed.store is not None
    same_bytes(resumed.store, whole)


def _three_done_parts(tiny_encoder, c, pcfg):
    for k in range(3):
        extract(tiny_encoder, c, replace(pcfg, partition=k))


def test_merge_refuses_a_part_of_another_model_or_corpus_by_name(tiny_encoder, tmp_path):
    c = big()
    pcfg = parts_cfg(tmp_path / "a", partitions=4)
    _three_done_parts(tiny_encoder, c, pcfg)
    directory = store_dir(tmp_path / "a" / "cache")
    # part 3 from another corpus (other sentences, same name and size) planted in this store
    other = corpus(MANY[::-1], name="many")
    ocfg = parts_cfg(tmp_path / "b", partitions=4, partition=3)
    extract(tiny_encoder, other, ocfg)
    foreign = store_dir(tmp_path / "b" / "cache") / "parts" / "3-of-4"
    shutil.copytree(foreign, directory / "parts" / "3-of-4")
    with pytest.raises(StoreError, match=r"part 3 of 4 belongs to another store \(corpus many x with other "
                                         r"sentences \(fingerprint"):
        extract(tiny_encoder, c, replace(pcfg, partition=0))
    # and one from another model
    shutil.rmtree(directory / "parts" / "3-of-4")
    manifest = directory / "parts" / "2-of-4" / "manifest.json"
    m = json.loads(manifest.read_text())
    m["key"], m["inputs"]["model"]["name_or_path"] = "0" * 16, "bert-base-uncased"
    manifest.write_text(json.dumps(m))
    with pytest.raises(StoreError, match=r"part 2 of 4 belongs to another store \(model 'bert-base-uncased', not"):
        extract(tiny_encoder, c, replace(pcfg, partition=3))  # the last part to finish merges, and refuses


def test_merge_refuses_parts_batched_otherwise(tiny_encoder, tmp_path):
    c = big()
    pcfg = parts_cfg(tmp_path, partitions=2)
    extract(tiny_encoder, c, replace(pcfg, partition=0))
    with pytest.raises(StoreError, match=r"part 1 was batched otherwise than part 0 \(extract.batch_size=2 "
                                         r"\(part 0: 4\)\)"):
        extract(tiny_encoder, c, replace(pcfg, partition=1, batch_size=2))


def test_a_partition_outside_the_parts_is_one_line(tiny_encoder, tmp_path):
    with pytest.raises(ProbingError, match=r"extract.partition=4 is not a part of extract.partitions=4 \(0..3\)"):
        extract(tiny_encoder, big(), parts_cfg(tmp_path, partitions=4, partition=4))


def test_blocks_fix_the_batches_so_resume_gives_the_same_bytes(tiny_encoder, tmp_path, monkeypatch):
    c = big()
    whole = extract(tiny_encoder, c, parts_cfg(tmp_path / "one")).store
    undo = crash_at(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        extract(tiny_encoder, c, parts_cfg(tmp_path / "two"))
    undo()
    r = extract(tiny_encoder, c, parts_cfg(tmp_path / "two"))
    assert r.resumed_from > 0
    same_bytes(r.store, whole)
    assert np.isfinite(np.asarray(r.store.maps(int(r.store.indices[0])), dtype=np.float32)).all()


def test_task_merge_joins_parts_built_apart_and_names_the_missing_ones(tiny_encoder, tiny_model_dir, tmp_path):
    from probing.config import ModelConfig
    from probing.extract import merge_stores

    c = big()
    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    whole = extract(tiny_encoder, c, parts_cfg(tmp_path / "one")).store
    here, there = parts_cfg(tmp_path / "here", partitions=3), parts_cfg(tmp_path / "there", partitions=3)
    for k in (0, 1):
        extract(tiny_encoder, c, replace(here, partition=k))
    with pytest.raises(ProbingError, match=r"parts \[2\] of 3 are not done \(done: \[0, 1\]\); run them with "
                                           r"extract.partition=K"):
        merge_stores(model, c, here)
    extract(tiny_encoder, c, replace(there, partition=2))  # another machine's cache
    directory = store_dir(tmp_path / "here" / "cache")
    built = store_dir(tmp_path / "there" / "cache")
    assert directory.name == built.name
    shutil.copytree(built / "parts" / "2-of-3", directory / "parts" / "2-of-3")
    report = merge_stores(model, c, here)
    assert not report.reused and report.store.dir == directory
    same_bytes(report.store, whole)
    assert merge_stores(model, c, here).reused  # whole already: nothing to merge


def test_without_auto_merge_the_parts_wait_for_task_merge(tiny_encoder, tiny_model_dir, tmp_path):
    from probing.config import ModelConfig
    from probing.extract import merge_stores

    c = big()
    pcfg = parts_cfg(tmp_path, partitions=2, auto_merge=False)
    reports = [extract(tiny_encoder, c, replace(pcfg, partition=k)) for k in range(2)]
    assert reports[-1].store is None and reports[-1].parts.complete  # every part done, none merged
    report = merge_stores(ModelConfig(name="tiny", name_or_path=str(tiny_model_dir)), c, pcfg)
    same_bytes(report.store, extract(tiny_encoder, c, parts_cfg(tmp_path / "one")).store)


def test_task_extract_of_a_part_says_what_is_left_and_then_that_the_store_is_whole(tiny_model_dir, tmp_path):
    from probing.config import DataConfig, DataKind, ModelConfig
    from probing.tasks import extract as extract_task

    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    data = DataConfig(kind=DataKind.grammar, n_sentences=30)
    pcfg = parts_cfg(tmp_path, partitions=2)
    first = extract_task.run(model, data, replace(pcfg, partition=0))
    assert first.metrics["parts_pending"] == [1] and "parts [1] are not done yet" in first.console
    second = extract_task.run(model, data, replace(pcfg, partition=1))
    assert second.metrics["complete"] and second.metrics["sentences"] == 30
    again = extract_task.run(model, data, replace(pcfg, partition=0))  # whole already: reused
    assert again.metrics["reused"] and again.metrics["parts_done"] == [0, 1]
