"""Features of word pairs, gathered straight from the store's memory maps: attention between the two words
(an :class:`AttentionStore`) or their vectors (a :class:`VectorStore`, :func:`word_vectors`).

A pair (sentence s, query word i, key word j) in head k has the features ``A_k[i, j]`` (forward: i looks
at j) and ``A_k[j, i]`` (backward), optionally also at neighbouring keys ``A_k[i, j+o]`` / ``A_k[j, i+o]``.
Every value is read with one fancy index per shard over precomputed flat offsets, so a job that selects one
head touches only that head's entries: no loop over sentences, heads or words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from probing.config import FeatureSet
from probing.store import AttentionStore, VectorStore

FEATURE_SETS = {FeatureSet.both: ("fwd", "bwd"), FeatureSet.forward: ("fwd",), FeatureSet.backward: ("bwd",)}


@dataclass(frozen=True)
class HeadSelection:
    """The heads a probe reads: parallel ``(K,)`` arrays of layer and head indices."""

    layers: np.ndarray
    heads: np.ndarray

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def labels(self) -> list[str]:
        return [f"L{int(a)}H{int(b)}" for a, b in zip(self.layers, self.heads)]


def select_heads(num_layers: int, num_heads: int, layer: Optional[int], head: Optional[int]) -> HeadSelection:
    """One head (layer and head set), one layer's heads (head None), head h of every layer (layer None),
    or every head (both None)."""
    if layer is not None and not 0 <= layer < num_layers:
        raise ValueError(f"probe.layer={layer} is out of range: the model has layers 0..{num_layers - 1}")
    if head is not None and not 0 <= head < num_heads:
        raise ValueError(f"probe.head={head} is out of range: the model has heads 0..{num_heads - 1}")
    layers = np.arange(num_layers) if layer is None else np.array([layer])
    heads = np.arange(num_heads) if head is None else np.array([head])
    ll, hh = np.meshgrid(layers, heads, indexing="ij")
    return HeadSelection(ll.ravel().astype(np.int64), hh.ravel().astype(np.int64))


def feature_directions(feature_set: FeatureSet) -> tuple[str, ...]:
    """``fwd`` (``A[i,j]``) and/or ``bwd`` (``A[j,i]``)."""
    return FEATURE_SETS[FeatureSet(feature_set)]


def gather(store: AttentionStore, sent: np.ndarray, qpos: np.ndarray, kpos: np.ndarray, sel: HeadSelection,
           chunk_elements: int = 1 << 23, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``out[r, k] = maps(sent[r])[layer_k, head_k, qpos[r], kpos[r]]`` as float32, ``(N, K)``.

    Positions count the special tokens (word i sits at ``prefix + i``); a position outside ``0..M-1``
    gives 0. ``out`` may be a preallocated ``(N, K)`` float32 array (or a column slice of a bigger one).
    """
    sent = np.asarray(sent, dtype=np.int64)
    qpos, kpos = np.asarray(qpos, dtype=np.int64), np.asarray(kpos, dtype=np.int64)
    n_rows, k = len(sent), len(sel)
    if out is None:
        out = np.zeros((n_rows, k), dtype=np.float32)
    elif out.shape != (n_rows, k):
        raise ValueError(f"out has shape {out.shape}, expected {(n_rows, k)}")
    if n_rows == 0:
        return out
    if (store.shard[sent] < 0).any():
        missing = sent[store.shard[sent] < 0][0]
        raise KeyError(f"sentence {missing} has no maps in {store.dir}")
    m = store.m[sent].astype(np.int64)
    valid = (qpos >= 0) & (qpos < m) & (kpos >= 0) & (kpos < m)
    plane = (sel.layers * store.num_heads + sel.heads)[None, :]  # (1, K): which (layer, head) block
    shard = store.shard[sent]
    rows_per_chunk = max(1, chunk_elements // k)
    for sh in np.unique(shard):
        mm = store._shard(int(sh))
        rows = np.flatnonzero(shard == sh)
        for c in range(0, len(rows), rows_per_chunk):
            r = rows[c:c + rows_per_chunk]
            mr = m[r][:, None]
            q = np.where(valid[r], qpos[r], 0)[:, None]
            key = np.where(valid[r], kpos[r], 0)[:, None]
            flat = store.offset[sent[r]][:, None] + (plane * mr + q) * mr + key
            out[r] = mm[flat]
        del mm
        store.close()  # unmap the shard: its pages leave the resident set before the next shard's come in
    out[~valid] = 0.0
    return out


def feature_offsets(neighbour_offsets: Sequence[int]) -> tuple[int, ...]:
    """The offsets of the features: 0 (the pair itself) first, then the neighbour offsets other than 0."""
    return (0, *[int(x) for x in neighbour_offsets if int(x) != 0])


def pair_feature_names(sel: HeadSelection, feature_set: FeatureSet, neighbour_offsets: Sequence[int]
                       ) -> list[str]:
    """Column names of :func:`pair_features`: ``L3H5:fwd``, ``L3H5:bwd-1``, ... (offset, direction, head)."""
    return [f"{lab}:{d}{'' if o == 0 else f'{o:+d}'}" for o in feature_offsets(neighbour_offsets)
            for d in feature_directions(feature_set) for lab in sel.labels]


def root_feature_names(sel: HeadSelection, feature_set: FeatureSet) -> list[str]:
    """Column names of :func:`root_features`: ``L3H5:fwd:root``, ... (direction, head)."""
    return [f"{lab}:{d}:root" for d in feature_directions(feature_set) for lab in sel.labels]


def pair_features(store: AttentionStore, sent: np.ndarray, query: np.ndarray, key: np.ndarray,
                  sel: HeadSelection, feature_set: FeatureSet, neighbour_offsets: Sequence[int]
                  ) -> tuple[np.ndarray, list[str]]:
    """Features of word pairs (query i, key j): ``(N, F)`` float32 and the column names. A
    :class:`VectorStore` gives :func:`vector_pair_features` (``feature_set`` unused).

    Columns, for each offset o in ``(0, *neighbour_offsets)`` and each direction of ``feature_set``:
    ``fwd`` = ``A_k[i, j+o]``, ``bwd`` = ``A_k[j, i+o]``, one per selected head k. An offset that leaves
    the sentence's words gives 0.
    """
    if isinstance(store, VectorStore):
        if list(neighbour_offsets):
            raise ValueError("probe.neighbour_offsets reads attention maps; vector features take none")
        return vector_pair_features(store, sent, query, key, sel)
    dirs = feature_directions(feature_set)
    sent = np.asarray(sent, dtype=np.int64)
    query, key = np.asarray(query, dtype=np.int64), np.asarray(key, dtype=np.int64)
    p, n = store.prefix[sent].astype(np.int64), store.n_words[sent].astype(np.int64)
    offs = feature_offsets(neighbour_offsets)
    k = len(sel)
    # one preallocated matrix, filled block by block: no concatenation copy of a multi-GB feature matrix
    X = np.empty((len(sent), len(offs) * len(dirs) * k), dtype=np.float32)
    col = 0
    for o in offs:
        for d in dirs:
            src, dst = (query, key + o) if d == "fwd" else (key, query + o)
            inside = (dst >= 0) & (dst < n)
            dst_pos = np.where(inside, p + dst, -1)  # -1: outside the words -> feature 0
            gather(store, sent, p + src, dst_pos, sel, out=X[:, col:col + k])
            col += k
    return X, pair_feature_names(sel, feature_set, neighbour_offsets)


def special_positions(store: AttentionStore, sent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(N, S)`` positions of each sentence's special tokens (prefix, then suffix), -1 padding, and
    the count per sentence."""
    p = store.prefix[sent].astype(np.int64)
    n = store.n_words[sent].astype(np.int64)
    s = store.m[sent].astype(np.int64) - p - n
    width = int(p.max(initial=0) + s.max(initial=0))
    cols = np.arange(width)[None, :]
    # prefix positions 0..p-1 come first, then suffix positions p+n .. m-1
    pos = np.where(cols < p[:, None], cols, p[:, None] + n[:, None] + (cols - p[:, None]))
    pos = np.where(cols < (p + s)[:, None], pos, -1)
    return pos, p + s


def root_features(store: AttentionStore, sent: np.ndarray, query: np.ndarray, sel: HeadSelection,
                  feature_set: FeatureSet) -> tuple[np.ndarray, list[str]]:
    """Features of the pair (word i, ROOT), from attention to and from the special tokens: ``fwd`` =
    total attention of i to the special positions, ``bwd`` = mean attention of the special positions
    to i. ``(N, F)`` float32 with one column per direction and selected head."""
    dirs = feature_directions(feature_set)
    sent = np.asarray(sent, dtype=np.int64)
    qpos = store.prefix[sent].astype(np.int64) + np.asarray(query, dtype=np.int64)
    spos, count = special_positions(store, sent)
    blocks = []
    for d in dirs:
        acc = np.zeros((len(sent), len(sel)), dtype=np.float32)
        for c in range(spos.shape[1]):
            if d == "fwd":
                acc += gather(store, sent, qpos, spos[:, c], sel)
            else:
                acc += gather(store, sent, spos[:, c], qpos, sel)
        if d == "bwd":
            acc /= np.maximum(count, 1)[:, None].astype(np.float32)
        blocks.append(acc)
    return np.concatenate(blocks, axis=1), root_feature_names(sel, feature_set)


def vector_selection(store: VectorStore, layer: Optional[int], head: Optional[int]) -> HeadSelection:
    """What a vector feature reads: one layer (``hidden``: 0 the embeddings, 1..L the layers' outputs), of
    ``heads`` one head or (head None) all heads of the layer, concatenated."""
    if layer is None:
        raise ValueError(f"features={store.representation} read one layer: set probe.layer (0.."
                         f"{store.num_layers - 1})")
    if not store.per_head and head not in (None, 0):
        raise ValueError(f"features=hidden has no heads: leave probe.head unset, not {head}")
    return select_heads(store.num_layers, store.num_heads, layer, head if store.per_head else 0)


def word_vectors(store: VectorStore, sent: np.ndarray, pos: np.ndarray, sel: HeadSelection,
                 chunk_elements: int = 1 << 24) -> np.ndarray:
    """``out[r] = concat_k vectors(sent[r])[layer_k, (head_k,) prefix + pos[r]]`` as float32, ``(N, K*dim)``:
    each word's vector in the selected layer (heads: the selected heads' context vectors side by side). One
    fancy index per shard chunk over flat offsets, so only the selected vectors are read from disk."""
    sent, pos = np.asarray(sent, dtype=np.int64), np.asarray(pos, dtype=np.int64)
    if len(sent) and (store.shard[sent] < 0).any():
        raise KeyError(f"sentence {sent[store.shard[sent] < 0][0]} has no vectors in {store.dir}")
    if ((pos < 0) | (pos >= store.n_words[sent])).any():
        raise ValueError("word index outside its sentence")
    d, k = store.dim, len(sel)
    out = np.empty((len(sent), k * d), dtype=np.float32)
    m = store.m[sent].astype(np.int64)[:, None]
    plane = (sel.layers * store.num_heads + sel.heads)[None, :] if store.per_head else sel.layers[None, :]
    # element offset of each (row, selected block)'s vector: blocks are (M, dim) planes in C order
    base = store.offset[sent][:, None] + (plane * m + store.prefix[sent][:, None] + pos[:, None]) * d
    shard = store.shard[sent]
    rows_per_chunk = max(1, chunk_elements // (k * d))
    lanes = np.arange(d)[None, None, :]
    for sh in np.unique(shard):
        mm = store._shard(int(sh))
        rows = np.flatnonzero(shard == sh)
        for c in range(0, len(rows), rows_per_chunk):
            r = rows[c:c + rows_per_chunk]
            out[r] = mm[base[r][:, :, None] + lanes].reshape(len(r), k * d)
        del mm
        store.close()
    return out


def vector_pair_features(store: VectorStore, sent: np.ndarray, query: np.ndarray, key: np.ndarray,
                         sel: HeadSelection) -> tuple[np.ndarray, list[str]]:
    """``[x_i; x_j; x_i ⊙ x_j]`` of word pairs (query i, key j) from the selected layer's (heads') vectors:
    ``(N, 3F)`` float32 and column names ``L3H5:i[7]``, ``L3H5:j[7]``, ``L3H5:ij[7]`` (``L3:...`` for hidden)."""
    x_i = word_vectors(store, sent, query, sel)
    x_j = word_vectors(store, sent, key, sel)
    f = x_i.shape[1]
    X = np.empty((len(x_i), 3 * f), dtype=np.float32)
    X[:, :f], X[:, f:2 * f] = x_i, x_j
    np.multiply(x_i, x_j, out=X[:, 2 * f:])
    labels = sel.labels if store.per_head else [f"L{int(a)}" for a in sel.layers]
    return X, [f"{lab}:{part}[{c}]" for part in ("i", "j", "ij") for lab in labels for c in range(store.dim)]
