"""Parsed treebanks are cached: a hit equals a fresh parse, an edited file is parsed again, junk is rebuilt."""

from __future__ import annotations

import os

from probing.config import DataConfig, DataKind
from probing.corpus import load_corpus
from probing.corpus.cache import cache_path, load_corpus_cached

ONE = "# sent_id = a\n1\tHi\thi\tINTJ\t_\t_\t0\troot\t_\t_\n\n"
TWO = ONE + "# sent_id = b\n1\tGo\tgo\tVERB\t_\t_\t0\troot\t_\t_\n2\t!\t!\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n"


def test_cache_hit_edit_and_junk(tmp_path):
    f = tmp_path / "t.conllu"
    f.write_text(ONE)
    cfg = DataConfig(kind=DataKind.conllu, path=str(f))
    cache = str(tmp_path / "cache")
    first = load_corpus_cached(cfg, None, cache)
    path = cache_path(cfg, None, cache)
    assert path is not None and path.is_file()
    assert load_corpus_cached(cfg, None, cache) == first == load_corpus(cfg)

    f.write_text(TWO)
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    edited = load_corpus_cached(cfg, None, cache)
    assert [s.id for s in edited] == ["a", "b"]
    assert cache_path(cfg, None, cache) != path

    new_path = cache_path(cfg, None, cache)
    new_path.write_bytes(b"not a pickle")
    assert load_corpus_cached(cfg, None, cache) == edited


def test_generated_corpora_are_not_cached(tmp_path):
    cfg = DataConfig(kind=DataKind.grammar, n_sentences=5)
    assert cache_path(cfg, None, str(tmp_path)) is None
    assert len(load_corpus_cached(cfg, None, str(tmp_path))) == 5
