"""Parsed treebanks cached beside the attention stores, so each job of a sweep does not re-parse CoNLL-U.

Parsing EWT train takes ~3 s; unpickling it ~0.2 s, which matters when 72 jobs each need train and dev.
The cache key covers the data config, the split and the source file's path, size and modification time, so
an edited file is parsed again. Only file-backed readers (``ud_ewt``, ``ud``, ``conllu``) are cached; a cache
file that cannot be read is ignored and rewritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from pathlib import Path
from typing import Any, Optional

from probing.config import enum_value, to_plain
from probing.corpus import Corpus, load_corpus, ud_ewt_path
from probing.corpus.ud import treebank_file
from probing.io import atomic_write_bytes
from probing.paths import absolute

log = logging.getLogger(__name__)

CORPORA_DIR = "corpora"  # the folder of the cache that holds the parsed corpora (no store)


def _source(data_cfg: Any, split: Optional[str]) -> Optional[Path]:
    kind = enum_value(data_cfg.kind)
    if kind == "ud":  # downloads and verifies; its one-line errors are the ones load_corpus would give
        return treebank_file(data_cfg, split or data_cfg.split)
    try:
        if kind == "ud_ewt" and data_cfg.dir:
            return ud_ewt_path(absolute(data_cfg.dir), split or data_cfg.split)
        if kind == "conllu" and data_cfg.path:
            return Path(absolute(data_cfg.path))
    except Exception:  # noqa: BLE001 - a missing file is reported by load_corpus itself
        return None
    return None


def cache_path(data_cfg: Any, split: Optional[str], cache_dir: str) -> Optional[Path]:
    """Where the parsed corpus is cached, or None when this reader is not cached."""
    src = _source(data_cfg, split)
    if src is None or not src.is_file():
        return None
    st = src.stat()
    cfg = {k: v for k, v in to_plain(data_cfg).items() if k != "index"}
    ident = {"cfg": cfg, "split": split, "file": str(src), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
             "python_pickle": pickle.HIGHEST_PROTOCOL}
    key = hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return Path(absolute(cache_dir)) / CORPORA_DIR / f"{src.stem}-{key}.pkl"


def load_corpus_cached(data_cfg: Any, split: Optional[str], cache_dir: str) -> Corpus:
    """``load_corpus(data_cfg, split)``, through the pickle cache when the reader is file-backed."""
    path = cache_path(data_cfg, split, cache_dir)
    if path is not None and path.is_file():
        try:
            with open(path, "rb") as f:
                corpus = pickle.load(f)
            if isinstance(corpus, Corpus):
                return corpus
        except Exception as e:  # noqa: BLE001 - a damaged cache file is rebuilt
            log.warning("ignoring unreadable corpus cache %s (%s)", path, e)
    corpus = load_corpus(data_cfg, split=split)
    if corpus.skipped:
        log.warning("data.strict=false: skipped %d malformed sentences %s", len(corpus.skipped),
                    corpus.skip_summary())
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, pickle.dumps(corpus, protocol=pickle.HIGHEST_PROTOCOL))
    return corpus
