"""A damaged attention store never yields numbers: each fault is re-extracted (loading the model only then)
or refused with one line naming the shard; a rebuilt store holds the same maps as a clean build."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from probing.config import ExtractConfig
from probing.corpus import Corpus, Sentence
from probing.errors import StoreError
from probing.extract import extract
from probing.store import AttentionStore, write_manifest
from probing.store.shards import ShardWriter, checksum

TEXTS = ["the cat sat on the mat .", "i am going to deposit my money at the bank .", "the dog saw a big red house",
         "unbelievably happy", "the cat", "a dog saw the cat on the mat , running happily", "my money", "the bank"]


def corpus() -> Corpus:
    return Corpus("tiny", "x", tuple(Sentence(f"s{i}", tuple(t.split())) for i, t in enumerate(TEXTS)))


class Loader:
    """The encoder loader extraction gets: counts how often the model is loaded."""

    def __init__(self, encoder):
        self.encoder, self.calls = encoder, 0

    def __call__(self):
        self.calls += 1
        return self.encoder


def build(encoder, root: Path, **kw):
    """Extract the corpus into ``root`` (shard_mb=0: one shard per sentence)."""
    cfg = ExtractConfig(cache_dir=str(root), progress=False, store_dtype="float32", batch_size=2, shard_mb=0)
    cfg = replace(cfg, **kw)
    loader = Loader(encoder)
    report = extract(loader, corpus(), cfg, identity=encoder.identity, model_name=encoder.name)
    return report, loader.calls


def all_maps(store: AttentionStore) -> dict[int, np.ndarray]:
    return {int(i): np.array(store.maps(int(i))) for i in store.indices}


def same_maps(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.allclose(a[i], b[i], atol=1e-6) for i in a)


@pytest.fixture
def clean(tiny_encoder, tmp_path):
    report, loads = build(tiny_encoder, tmp_path / "clean")
    assert loads == 1 and len(report.store.manifest["shards"]) == len(TEXTS)
    return all_maps(report.store)


@pytest.fixture
def built(tiny_encoder, tmp_path):
    report, _ = build(tiny_encoder, tmp_path / "cache")
    return report.store.dir


def flip_bytes(path: Path, at: int = 40) -> None:
    """Overwrite 4 bytes with other plausible float32 values (the file keeps its size)."""
    data = bytearray(path.read_bytes())
    data[at:at + 4] = np.float32(0.123).tobytes()
    path.write_bytes(bytes(data))


def test_manifest_and_indexes_record_size_and_checksum(built):
    manifest = json.loads((built / "manifest.json").read_text())
    for rec in manifest["shards"]:
        path = built / f"shard-{rec['shard']:05d}.bin"
        index = json.loads(path.with_suffix(".json").read_text())
        assert rec["bytes"] == index["bytes"] == path.stat().st_size
        assert rec["xxh3_64"] == index["xxh3_64"] == checksum(path)
        assert rec["sentences"] == len(index["sentences"])


@pytest.mark.parametrize("fault", ["truncate bin", "truncate json", "delete shard", "garbage manifest"])
def test_each_fault_is_rebuilt_and_equals_a_clean_build(tiny_encoder, tmp_path, clean, built, fault):
    target = built / "shard-00001.bin"
    if fault == "truncate bin":
        os.truncate(target, 100)
    elif fault == "truncate json":
        os.truncate(target.with_suffix(".json"), 30)
    elif fault == "delete shard":
        target.unlink()
        target.with_suffix(".json").unlink()
    else:
        (built / "manifest.json").write_text("{ not json")
    with pytest.raises(StoreError) as e:  # opened as it is, it is refused by name
        AttentionStore(built)
    assert ("manifest.json" if fault == "garbage manifest" else "shard-00001") in str(e.value)
    report, loads = build(tiny_encoder, tmp_path / "cache")
    assert not report.reused and loads == 1
    # only the damaged shard's sentences are extracted again (all of them when the manifest was garbage
    # and every shard was whole: nothing to extract, the manifest is rewritten)
    assert report.extracted == (0 if fault == "garbage manifest" else 1)
    assert same_maps(all_maps(report.store), clean)
    again, loads = build(tiny_encoder, tmp_path / "cache")
    assert again.reused and loads == 0


def test_flipped_bytes_are_refused_on_first_read_and_rebuilt_with_verify(tiny_encoder, tmp_path, clean, built):
    flip_bytes(built / "shard-00002.bin")
    report, loads = build(tiny_encoder, tmp_path / "cache")  # sizes match: reused, model not loaded
    assert report.reused and loads == 0
    store = report.store
    first = [int(i) for i in store.indices if store.shard[i] == 2][0]
    with pytest.raises(StoreError, match=r"shard-00002\.bin does not match its checksum.*extract\.verify=true"):
        store.maps(first)
    other = [int(i) for i in store.indices if store.shard[i] != 2][0]
    np.testing.assert_allclose(store.maps(other), clean[other], atol=1e-6)  # whole shards still read
    report, loads = build(tiny_encoder, tmp_path / "cache", verify=True)
    assert not report.reused and loads == 1 and report.extracted == 1
    assert same_maps(all_maps(report.store), clean)
    assert report.store.verify() == []


def test_values_that_are_not_finite_are_refused(tmp_path):
    w = ShardWriter(tmp_path, "float32", shard_mb=0)
    bad = np.full((1, 1, 3, 3), np.nan, dtype=np.float32)
    with pytest.raises(StoreError, match="sentence 7: its attention maps are not finite"):
        w.add(7, bad, n_words=1, prefix=1)
    (tmp_path / "f16").mkdir()
    half = ShardWriter(tmp_path / "f16", "float16", shard_mb=0)  # float16 is tested by its exponent bits
    for value in (np.inf, -np.inf, np.nan):
        with pytest.raises(StoreError, match="sentence 3: its attention maps are not finite in float16"):
            half.add(3, np.array([[[[0.5, value], [65504.0, -65504.0]]]], dtype=np.float32), n_words=1, prefix=1)
    half.add(4, np.array([[[[0.5, 1e-7], [65504.0, -65504.0]]]], dtype=np.float32), n_words=1, prefix=1)  # finite
    # a shard whose bytes are NaN with a matching checksum (written by something else): refused on read
    w.add(0, np.ones((1, 1, 3, 3), dtype=np.float32) / 3, n_words=1, prefix=1)
    w.flush()
    path = tmp_path / "shard-00000.bin"
    path.write_bytes(np.full(9, np.nan, dtype=np.float32).tobytes())
    index = json.loads(path.with_suffix(".json").read_text())
    index["xxh3_64"] = checksum(path)
    path.with_suffix(".json").write_text(json.dumps(index))
    write_manifest(tmp_path, {"key": "k", "num_layers": 1, "num_heads": 1, "n_sentences": 1,
                              "store_dtype": "float32"})
    store = AttentionStore(tmp_path)
    with pytest.raises(StoreError, match="shard-00000.bin holds values that are not finite"):
        store.maps(0)
    assert store.verify() == [0]


def test_a_store_of_another_format_is_refused_by_name(built):
    manifest = json.loads((built / "manifest.json").read_text())
    (built / "manifest.json").write_text(json.dumps({**manifest, "format": 1}))
    with pytest.raises(StoreError, match="store format 1 != 2"):
        AttentionStore(built)


def test_a_failed_write_is_raised_not_lost(tmp_path):
    """A shard's file opens with its first sentence (an unwritable directory fails there); it is made
    durable and renamed in a background thread, whose error surfaces in the caller's flush."""
    w = ShardWriter(tmp_path / "missing" / "dir", "float32", shard_mb=0)
    with pytest.raises(FileNotFoundError):
        w.add(0, np.ones((1, 1, 2, 2), dtype=np.float32) / 2, n_words=1, prefix=1)
    (tmp_path / "gone").mkdir()
    w = ShardWriter(tmp_path / "gone", "float32", shard_mb=1)
    w.add(0, np.ones((1, 1, 2, 2), dtype=np.float32) / 2, n_words=1, prefix=1)  # written to .shard-00000.bin.PID.tmp
    for f in (tmp_path / "gone").iterdir():
        f.unlink()  # the temporary file vanishes before the shard is renamed into place
    with pytest.raises(FileNotFoundError):
        w.flush()
    assert not list((tmp_path / "gone").iterdir())  # no shard, no index


def test_a_shard_being_filled_is_discarded_by_drain(tmp_path):
    """An extraction that fails mid-shard leaves the shards it finished and no trace of the one it was
    filling (its sentences are re-extracted on resume)."""
    w = ShardWriter(tmp_path, "float32", shard_mb=0)
    w.add(0, np.ones((1, 1, 2, 2), dtype=np.float32) / 2, n_words=1, prefix=1)  # a full shard: handed off
    w.limit = 2**20
    w.add(1, np.ones((1, 1, 2, 2), dtype=np.float32) / 2, n_words=1, prefix=1)  # still filling
    assert len(list(tmp_path.glob(".shard-00001.bin.*.tmp"))) == 1
    w.drain()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard-00000.bin", "shard-00000.json"]
    assert json.loads((tmp_path / "shard-00000.json").read_text())["sentences"][0]["index"] == 0
