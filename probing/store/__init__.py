"""The word-level store of an extraction: sharded arrays on disk, checksummed, memory-mapped on read.

``stores`` holds the stores that read a directory (maps: :class:`AttentionStore`; word vectors:
:class:`VectorStore`), ``shards`` the shard files (writing, scanning, checking, discarding), ``chunks`` the
order and grouping in which analyses read a store's sentences.
"""

from probing.store.stores import (
    FORMAT_VERSION,
    ArrayLayout,
    ArrayStore,
    AttentionStore,
    StatisticsStore,
    VectorStore,
    write_manifest,
)

__all__ = ["FORMAT_VERSION", "ArrayLayout", "ArrayStore", "AttentionStore", "StatisticsStore", "VectorStore", "write_manifest"]
