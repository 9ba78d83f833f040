"""Batch a corpus through the encoder into an :class:`~probing.store.AttentionStore` (build, resume, reuse).

Sentences are sorted by length and batched with padding masked; attention is pooled to words on the
model's device and written in shards. A file lock per store makes parallel jobs build it once.

Every measure of ``extract.measures`` (:mod:`probing.mixing`) has its own store, keyed like the attention
store plus the measure's name (the attention store's key is the same as before measures existed, so its
caches are reused); the measures still missing are computed together, in the forward pass of the weights.
So are the representations of ``extract.representations`` (word vectors, :class:`~probing.store.VectorStore`),
each in a store keyed by its name.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Protocol, Sequence, Union

import numpy as np
import torch
from filelock import FileLock

from probing.alignment import pool_attention, pool_layers
from probing.buffers import (
    MMAP_THRESHOLD_MAX_MB,
    Buffers,
    ResidentCap,
    fix_mmap_threshold,
    release_free_memory,
)
from probing.config import ExtractConfig, Measure, ModelConfig, Pooling, Representation, enum_value
from probing.corpus import Corpus
from probing.encoder import Encoder, Tokenized, length_batches, load_encoder, model_identity, model_label
from probing.errors import ModelLoadError, ProbingError, StoreError
from probing.mixing import capture, heads_of, needs
from probing.mixing.families import LayoutError, family_of, head_counts
from probing.mixing.measures import layer_maps
from probing.paths import absolute
from probing.store import (
    FORMAT_VERSION,
    ArrayLayout,
    ArrayStore,
    AttentionStore,
    StatisticsStore,
    VectorStore,
    write_manifest,
)
from probing.store.cache import touch
from probing.store.parts import BATCHING, PartStatus, block_ranges, part_dir, part_span
from probing.store.parts import merge as merge_parts
from probing.store.parts import status as part_status
from probing.store.shards import MANIFEST, ShardScan, ShardWriter, complete_shards, discard_shards

log = logging.getLogger(__name__)

# What a store holds: a measure's maps or a representation's vectors.
Stored = Union[Measure, Representation]


def stored(name: "Stored | str") -> Stored:
    """A measure or representation from its name (``attention``, ``norm``, ``hidden``, ...)."""
    return name if isinstance(name, (Measure, Representation)) else (
        Representation(name) if name in Representation._value2member_map_ else Measure(name))


@dataclass
class ExtractReport:
    """What an extraction did: where the store is (``store``: the first measure's; ``stores``: every measure's),
    whether it was reused, and how fast it ran."""

    store: Optional[ArrayStore]  # None: this run built one part of a store whose other parts are not done
    reused: bool
    extracted: int = 0
    resumed_from: int = 0
    seconds: float = 0.0
    stores: dict[Stored, ArrayStore] = field(default_factory=dict)
    parts: Optional[PartStatus] = None  # extract.partition set: the parts done and pending (of the first store)
    built: tuple[Stored, ...] = ()  # the measures and representations whose stores this run extracted

    @property
    def complete(self) -> bool:
        return self.store is not None

    @property
    def sentences_per_second(self) -> float:
        return self.extracted / self.seconds if self.seconds > 0 else float("nan")


def store_key(identity: dict, corpus: Corpus, cfg: ExtractConfig, measure: Stored) -> tuple[str, dict]:
    """Fingerprint of everything that changes the maps: model, revision, data, extraction settings, and the
    measure (left out for ``attention``, whose key is the one it had before there were measures) or the
    representation."""
    inputs = {
        "format": FORMAT_VERSION,
        "model": identity,
        "corpus": corpus.fingerprint(),
        "n_sentences": len(corpus),
        "pooling": enum_value(cfg.pooling),
        "max_length": cfg.max_length,
        "store_dtype": enum_value(cfg.store_dtype),
    }
    measure = stored(measure)
    if isinstance(measure, Representation):
        inputs["representation"] = enum_value(measure)
    elif measure is not Measure.attention:
        inputs["measure"] = enum_value(measure)
    return _key(inputs), inputs


def _key(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def store_dir(model_name: str, corpus: Corpus, cfg: ExtractConfig, key: str, measure: Stored,
              kept: Optional[str] = None) -> Path:
    """``<cache>/<model>-<corpus>-<split>[-<measure>][-<kept>]-<key>`` (``kept``: what is kept of the maps instead
    of them, ``extract.keep_maps=false``)."""
    name = f"{model_name}-{corpus.name}-{corpus.split}"
    if stored(measure) is not Measure.attention:
        name += f"-{enum_value(measure)}"
    if kept:
        name += f"-{kept}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return Path(absolute(cfg.cache_dir)) / f"{safe}-{key}"


def measures_of(cfg: ExtractConfig) -> list[Stored]:
    """``extract.measures`` then ``extract.representations``, in order, each once; nothing at all is one
    :class:`ProbingError` line."""
    out: list[Stored] = list(dict.fromkeys(Measure(m) for m in cfg.measures))
    out += dict.fromkeys(Representation(r) for r in cfg.representations)
    if not out:
        raise ProbingError("extract.measures is empty (and so is extract.representations): name at least one "
                           "(e.g. extract.measures=[attention])")
    return out


class MapStatistics(Protocol):
    """What an analysis keeps of one measure's maps instead of the maps (``extract.keep_maps=false``), made
    during extraction: a record per sentence (its ``layout``, by the sentence's words, in ``dtype``) and
    additive totals per shard. The analysis that reads it implements it (:mod:`probing.heads.statistics`)."""

    name: str  # the store's suffix
    dtype: str

    def fingerprint(self) -> dict: ...  # every setting the record and totals depend on (part of the key)

    def layout(self, num_layers: int, num_heads: int) -> ArrayLayout: ...

    def record(self, index: int, maps: np.ndarray, prefix: int, n_words: int) -> np.ndarray: ...

    def take(self) -> dict[str, np.ndarray]: ...  # the totals added since the last take, then reset

    def drop(self) -> None: ...  # forget the totals since the last take


@dataclass(frozen=True)
class _Target:
    """One measure's (or representation's) store: where it goes and what it is keyed by."""

    measure: Stored
    key: str
    inputs: dict
    directory: Path
    statistics: Optional["MapStatistics"] = None  # kept instead of the measure's maps (extract.keep_maps=false)


def word_maps(encoder: Encoder, batch: Sequence[Tokenized], pooling: Pooling, measures: Sequence[Stored],
              dtype: torch.dtype = torch.float32, buffers: Optional[Buffers] = None) -> dict[Stored, list[np.ndarray]]:
    """Word-level arrays of each measure or representation for one batch, in ``dtype`` (a store's: the batch
    is converted at once, several times faster than sentence by sentence in numpy), padding removed:
    ``(L, heads_of(measure), M, M)`` maps, ``(L+1, M, D)`` hidden states, ``(L, H, M, d)`` context vectors
    (:func:`batch_maps`, all at once)."""
    return dict(batch_maps(encoder, batch, pooling, measures, dtype, buffers))


def batch_maps(encoder: Encoder, batch: Sequence[Tokenized], pooling: Pooling, measures: Sequence[Stored],
               dtype: torch.dtype = torch.float32, buffers: Optional[Buffers] = None
               ) -> Iterator[tuple[Stored, list[np.ndarray]]]:
    """:func:`word_maps`, one measure or representation at a time, each made once the previous one's arrays
    have been taken (a caller that writes and drops them holds one measure's at a time).

    Attention alone runs without hooks; any other measure is computed from the same forward pass (rollouts
    over word pieces, then pooled like attention; ``norm`` and ``norm_layer`` rows are never renormalised),
    a per-head measure one layer at a time as it is pooled (:func:`~probing.mixing.measures.layer_maps`).
    Vectors are pooled to positions layer by layer (:func:`~probing.alignment.pool_layers`). ``buffers``: the
    batch's large temporaries go to its memory (:class:`~probing.buffers.Buffers`, kept by the caller across
    batches); the arrays handed out are always copies, never views of it."""
    wanted = [stored(m) for m in measures]
    others = [m for m in wanted if isinstance(m, Measure) and m is not Measure.attention]
    hidden = Representation.hidden in wanted
    work = Buffers() if buffers is None else buffers
    pieces: dict = {}
    if others or Representation.heads in wanted:
        with capture(encoder.model, needs(others), heads=Representation.heads in wanted) as cap:
            attn, pos, m, states = encoder.forward(batch, hidden, stacked=False)
        with torch.inference_mode():
            pieces = dict(layer_maps(others, cap.pieces(work, attn))) if others else {}
            if Representation.heads in wanted:
                pieces[Representation.heads] = cap.heads()
    else:
        attn, pos, m, states = encoder.forward(batch, hidden, stacked=False)
    pieces[Measure.attention] = attn
    if hidden:
        pieces[Representation.hidden] = states
    for what in wanted:  # no array is left bound here while the caller holds it
        if isinstance(what, Representation):
            split = encoder.num_heads if what is Representation.heads else 1
            pooled = pool_layers(pieces[what], pos, m, pooling, dtype, split, work).cpu().numpy()
            yield what, [pooled[b, ..., : x.n_positions, :].copy() for b, x in enumerate(batch)]  # never a view
        else:
            maps = pool_attention(pieces[what], pos, m, pooling, what.stochastic, work)
            pooled = work.take("maps", tuple(maps.shape), dtype).copy_(maps).numpy()  # the store's dtype, once
            yield what, [pooled[b, :, :, : x.n_positions, : x.n_positions].copy() for b, x in enumerate(batch)]


def extract(encoder: Encoder | Callable[[], Encoder], corpus: Corpus, cfg: ExtractConfig,
            identity: Optional[dict] = None, model_name: Optional[str] = None,
            reads: Optional[Stored] = None, statistics: Optional[Callable[[Measure], MapStatistics]] = None
            ) -> ExtractReport:
    """Return the stores of ``corpus`` under ``cfg`` (an :class:`~probing.config.ExtractConfig`), one per
    measure and representation, building or resuming those that are missing in one pass. Safe to call from parallel processes.
    ``reads``: the measure the caller analyses, built too if ``cfg.measures`` lacks it; the report's ``store``
    is its store (else the first measure's).

    ``encoder`` may be a loader called only when a store must be built; then pass the model's
    ``identity`` and ``model_name`` so built stores are found without loading the model. ``statistics``
    (``extract.keep_maps=false``): what the analysis keeps of each measure's maps, stored instead of them.
    """
    if isinstance(encoder, Encoder):
        identity, model_name = encoder.identity, encoder.name
    if identity is None or model_name is None:
        raise ValueError("extract() with an encoder loader needs identity and model_name")
    _check_settings(cfg)
    measures = measures_of(cfg)
    if reads is not None and stored(reads) not in measures:
        measures.append(stored(reads))
    targets = _targets(identity, model_name, corpus, cfg, measures, statistics)
    stores = _complete_stores(targets, cfg.verify)
    first = stored(reads) if reads is not None else targets[0].measure
    if len(stores) == len(targets):
        whole = PartStatus(cfg.partitions, tuple(range(cfg.partitions)), ()) if cfg.partition is not None else None
        return ExtractReport(stores[first], reused=True, stores=stores, parts=whole)
    missing = [t for t in targets if t.measure not in stores]
    if cfg.partition is not None:
        return _extract_part(encoder, corpus, cfg, targets, missing, stores, first)
    with ExitStack() as locks:
        for t in sorted(missing, key=lambda t: str(t.directory)):  # one order everywhere: no deadlock
            locks.enter_context(FileLock(str(t.directory) + ".lock"))
        todo = _still_missing(missing, cfg.verify, stores)  # another process may have built them meanwhile
        if not todo:
            return ExtractReport(stores[first], reused=True, stores=stores)
        loaded = not isinstance(encoder, Encoder)
        if loaded:
            try:
                encoder = encoder()
            except ModelLoadError:
                _remove_empty([t.directory for t in todo])  # a model that cannot load leaves no trace
                raise
        try:
            report = _build(encoder, corpus, cfg, todo)
        finally:
            encoder = None  # a model loaded here goes now, not when the caller is done with the stores
            _release_pass(loaded)
    report.built = tuple(report.stores)
    stores.update(report.stores)
    report.stores = {t.measure: stores[t.measure] for t in targets}
    report.store = stores[first]
    return report


def _targets(identity: dict, model_name: str, corpus: Corpus, cfg: ExtractConfig, measures: Sequence[Stored],
             statistics: Optional[Callable[[Measure], MapStatistics]] = None) -> list[_Target]:
    """Each measure's store, or, with ``extract.keep_maps=false``, the store of what ``statistics`` keeps of its
    maps (keyed by the maps' inputs and the statistics' settings); representations are stored as ever."""
    if not cfg.keep_maps and statistics is None:
        raise ProbingError("extract.keep_maps=false keeps what task=heads needs of the maps instead of the maps; "
                           "this task reads the maps themselves: leave extract.keep_maps=true")
    out = []
    for measure in measures:
        key, inputs = store_key(identity, corpus, cfg, measure)
        if not cfg.keep_maps and isinstance(measure, Measure):
            stats = statistics(measure)
            inputs = {**inputs, "statistics": {"name": stats.name, **stats.fingerprint()}}
            key = _key(inputs)
            out.append(_Target(measure, key, inputs, store_dir(model_name, corpus, cfg, key, measure, stats.name),
                               stats))
        else:
            out.append(_Target(measure, key, inputs, store_dir(model_name, corpus, cfg, key, measure)))
    return out


def merge_stores(model: ModelConfig, corpus: Corpus, cfg: ExtractConfig,
                 statistics: Optional[Callable[[Measure], MapStatistics]] = None) -> ExtractReport:
    """``task=merge``: every store of ``cfg`` complete, merging those whose ``extract.partitions`` parts are all
    done (each part checked against the store's fingerprint); the model is never loaded. A part not done is
    one :class:`ProbingError` line naming it."""
    _check_settings(cfg)
    n = cfg.partitions
    targets = _targets(model_identity(model), model_label(model), corpus, cfg, measures_of(cfg), statistics)
    stores = _complete_stores(targets, cfg.verify)
    merged = False
    for t in targets:
        if t.measure in stores:
            continue
        with FileLock(str(t.directory) + ".lock"):
            parts = part_status(t.directory, n)
            if not parts.complete:
                _remove_empty([t.directory])
                raise ProbingError(f"{t.directory}: parts {list(parts.pending)} of {n} are not done (done: "
                                   f"{list(parts.done)}); run them with extract.partition=K, then merge again")
            merge_parts(t.directory, n, t.key, t.inputs, len(corpus), verify=True)
            stores[t.measure] = open_store(t.directory, t.measure, t.statistics is not None)
            merged = True
    first = targets[0].measure
    return ExtractReport(stores[first], reused=not merged, stores={t.measure: stores[t.measure] for t in targets},
                         parts=PartStatus(n, tuple(range(n)), ()))


def _check_settings(cfg: ExtractConfig) -> None:
    if cfg.trim_mb is not None and cfg.trim_mb < 0:
        raise ProbingError(f"extract.trim_mb={cfg.trim_mb}: give the growth in MB (0 or more) after which freed "
                           "memory is handed back, or null to hand it back only between blocks")
    m = cfg.mmap_threshold_mb
    if m is not None and not 0 < m <= MMAP_THRESHOLD_MAX_MB:
        raise ProbingError(f"extract.mmap_threshold_mb={m}: give a size in MB above 0 and at most "
                           f"{MMAP_THRESHOLD_MAX_MB} (as high as glibc's own threshold goes), or null for glibc's own")
    if cfg.block_sentences < 1 or cfg.partitions < 1:
        raise ProbingError(f"extract.block_sentences={cfg.block_sentences} and extract.partitions={cfg.partitions} "
                           "must be at least 1")
    if cfg.partition is not None and not 0 <= cfg.partition < cfg.partitions:
        raise ProbingError(f"extract.partition={cfg.partition} is not a part of extract.partitions="
                           f"{cfg.partitions} (0..{cfg.partitions - 1})")


def _part_entry(cfg: ExtractConfig, span: tuple[int, int]) -> dict:
    """A part's manifest entry: which part, its sentences and how they were batched."""
    return {"index": cfg.partition, "of": cfg.partitions, "sentences": list(span),
            **{b: getattr(cfg, b) for b in BATCHING}}


def _extract_part(encoder: Encoder | Callable[[], Encoder], corpus: Corpus, cfg: ExtractConfig,
                  targets: Sequence[_Target], missing: Sequence[_Target], stores: dict[Stored, ArrayStore],
                  first: Stored) -> ExtractReport:
    """``extract.partition``: build this part of every missing store (under the part's own lock, so parts run
    side by side), then merge each store whose parts are all done (under the store's lock)."""
    k, n = cfg.partition, cfg.partitions
    span = part_span(len(corpus), cfg.block_sentences, k, n)
    parts = [replace(t, directory=part_dir(t.directory, k, n)) for t in missing]
    report = ExtractReport(None, reused=True)
    with ExitStack() as locks:
        for t in sorted(parts, key=lambda t: str(t.directory)):
            t.directory.mkdir(parents=True, exist_ok=True)
            locks.enter_context(FileLock(str(t.directory) + ".lock"))
        todo = [t for t in parts if not (t.directory / MANIFEST).is_file()]
        loaded = not isinstance(encoder, Encoder)
        if todo:
            if loaded:
                encoder = encoder()
            try:
                report = _build(encoder, corpus, cfg, todo, span, _part_entry(cfg, span))
            finally:
                encoder = None
            log.info("part %d of %d (sentences %d-%d): %d sentences extracted", k, n, span[0], span[1] - 1,
                     report.extracted)
    for t in missing:
        with FileLock(str(t.directory) + ".lock"):
            store = _whole_store(t, cfg.verify)  # another part's process merged it
            if store is None and cfg.auto_merge and part_status(t.directory, n).complete:
                merge_parts(t.directory, n, t.key, t.inputs, len(corpus), verify=True)
                log.info("%s: every part of %d done; merged", t.directory, n)
                store = open_store(t.directory, t.measure, t.statistics is not None)
        if store is not None:
            stores[t.measure] = store
    if todo:  # only now, so that the merge check follows this part's manifest closely (a part that finished
        _release_pass(loaded)  # in between would merge too, and both runs would find the store whole)
    report.parts = part_status(missing[0].directory, n) if first not in stores else PartStatus(n, tuple(range(n)), ())
    report.stores = {t.measure: stores[t.measure] for t in targets if t.measure in stores}
    report.store = stores.get(first)
    return report


def _complete_stores(targets: Sequence[_Target], verify: bool) -> dict[Stored, ArrayStore]:
    """The targets' stores that are complete now (a damaged one is left for the locked pass to repair), each
    recorded as used (its last use, for probing-cache)."""
    stores: dict[Stored, ArrayStore] = {}
    for t in targets:
        t.directory.mkdir(parents=True, exist_ok=True)
        try:
            store = _whole_store(t, verify)
        except StoreError:
            continue
        if store is not None:
            stores[t.measure] = store
            touch(t.directory)
    return stores


def _still_missing(missing: Sequence[_Target], verify: bool, stores: dict[Stored, ArrayStore]) -> list[_Target]:
    """Under the locks: the targets still to build (damaged shards discarded first); the rest go to ``stores``."""
    todo = []
    for t in missing:
        try:
            store = _whole_store(t, verify)
        except StoreError as e:
            log.warning("%s\nre-extracting what is damaged (the rest is kept)", e)
            discard_shards(t.directory, e.damaged)
            store = None
        if store is None:
            todo.append(t)
        else:
            stores[t.measure] = store
    return todo


def _remove_empty(directories: Sequence[Path]) -> None:
    """Remove store directories that hold nothing, and their lock files (the locks are still held: removing
    the file is safe on POSIX, and another process then locks a new one)."""
    for d in directories:
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()
            Path(str(d) + ".lock").unlink(missing_ok=True)


def open_store(directory: Path, what: Stored, statistics: bool = False) -> ArrayStore:
    """The store of a measure (:class:`AttentionStore`, or :class:`StatisticsStore` for what an analysis kept of
    its maps) or a representation (:class:`VectorStore`)."""
    if statistics:
        return StatisticsStore(directory)
    return VectorStore(directory) if isinstance(stored(what), Representation) else AttentionStore(directory)


def _whole_store(t: _Target, verify: bool) -> Optional[ArrayStore]:
    """The complete store of ``t`` (None when there is none yet); sizes are checked when it opens, and every
    checksum too when ``verify``. Raises :class:`StoreError` when it is damaged."""
    directory = t.directory
    if not (directory / MANIFEST).is_file():
        return None
    store = open_store(directory, t.measure, t.statistics is not None)
    damaged = store.verify() if verify else []
    if damaged:
        raise StoreError(f"{directory}: damaged shards {damaged} (checksum or values)", damaged=tuple(damaged))
    return store


def _build(encoder: Encoder, corpus: Corpus, cfg: ExtractConfig, targets: Sequence[_Target],
           span: Optional[tuple[int, int]] = None, part: Optional[dict] = None) -> ExtractReport:
    """Extract the sentences each target's store still lacks (of ``span``, default all); a batch computes only
    the measures some of its sentences need. ``part``: the targets are one part of their stores (its manifest
    entry)."""
    from tqdm.auto import tqdm

    fix_mmap_threshold(cfg.mmap_threshold_mb)
    pooling = Pooling(cfg.pooling)
    store_dtype = str(enum_value(cfg.store_dtype))
    scans = [_scan(t.directory) for t in targets]
    done = [scan.entries for scan in scans]
    span = span or (0, len(corpus))
    skipped_rows: list[dict] = []
    batches = _sentences_to_extract(encoder, corpus, cfg, done, span, skipped_rows)
    resumed = min(len(d) for d in done)
    for t, d in zip(targets, done):
        if d:
            log.info("resuming %s: %d sentences already extracted", t.directory, len(d))
    if cfg.skip_last_ffn and all(t.measure is not Representation.hidden for t in targets):
        encoder.skip_last_ffn()
    else:  # the last hidden state is the last feed-forward block's output
        encoder.restore_last_ffn()
    dtype = getattr(torch, store_dtype)  # the store's dtype: arrays are converted once per batch
    writers = [ShardWriter(t.directory, t.statistics.dtype if t.statistics else store_dtype, cfg.shard_mb,
                           scan.next_shard, what=f"{t.measure} arrays", totals=t.statistics)
               for t, scan in zip(targets, scans)]
    start = time.perf_counter()
    bar = tqdm(total=sum(any(i not in d for d in done) for i in range(*span)), unit="sent", desc="extract",
               disable=not cfg.progress, dynamic_ncols=True)
    try:
        written = _write_batches(encoder, corpus, targets, batches, done, writers, pooling, dtype, bar,
                                 ResidentCap(cfg.trim_mb))
    finally:
        bar.close()
        for w in writers:
            w.drain()
    seconds = time.perf_counter() - start
    stores = {t.measure: _finish_store(t, encoder, corpus, store_dtype, skipped_rows, seconds, part)
              for t in targets}
    first = stores[targets[0].measure]
    return ExtractReport(first, reused=False, extracted=written, resumed_from=resumed, seconds=seconds,
                         stores=stores)


def _release_pass(loaded: bool) -> None:
    """After a pass, before its stores are read: the heap's free pages go back to the system, the pass's
    temporaries and, with ``loaded``, those of the model this call loaded and has dropped."""
    if loaded:
        gc.collect()  # a model's modules sit in reference cycles
    release_free_memory()


def _scan(directory: Path) -> ShardScan:
    """The complete shards already in ``directory``; bad ones are discarded (re-extracted)."""
    scan = complete_shards(directory, verify=True)  # a resumed shard is read back whole before it counts
    discard_shards(directory, scan.bad)
    return scan


def _sentences_to_extract(encoder: Encoder, corpus: Corpus, cfg: ExtractConfig, done: Sequence[dict],
                          span: tuple[int, int], skipped_rows: list[dict]
                          ) -> Iterator[list[tuple[int, Tokenized]]]:
    """The batches that hold a sentence some store still lacks, block by block (a block is tokenised when its
    turn comes, so memory does not grow with the corpus); the sentences no store can hold (too long, or no word
    pieces) are appended to ``skipped_rows`` for the manifests. Sentences ``span`` only.

    Batches are planned within each block of ``extract.block_sentences`` sentences (sorted by length, then
    :func:`~probing.encoder.length_batches`), whether or not a sentence is missing, and a batch runs whole when
    one of its sentences is: so a sentence's arrays are the same bits whichever part, run or resume made them."""
    start, end = span
    for a, b in block_ranges(end - start, cfg.block_sentences):
        first = start + a
        release_free_memory()  # the last block's freed temporaries, before this block's
        tokenized = encoder.tokenize([corpus[i].words for i in range(first, start + b)])
        if cfg.max_length is not None:
            tokenized = [t if isinstance(t, str) or len(t.input_ids) <= cfg.max_length
                         else f"too long: {len(t.input_ids)} word pieces > extract.max_length={cfg.max_length}"
                         for t in tokenized]
        skipped_rows += [{"index": first + k, "id": corpus[first + k].id, "reason": t,
                          "kind": "too long" if t.startswith("too long") else "no word pieces"}
                         for k, t in enumerate(tokenized) if isinstance(t, str)]
        items = sorted(((first + k, t) for k, t in enumerate(tokenized) if not isinstance(t, str)),
                       key=lambda it: len(it[1].input_ids))
        for group in length_batches([len(t.input_ids) for _, t in items], cfg.batch_size, cfg.max_batch_tokens,
                                    cfg.max_batch_cells):
            batch = [items[k] for k in group]
            if any(i not in d for i, _ in batch for d in done):
                yield batch


def _write_batches(encoder: Encoder, corpus: Corpus, targets: Sequence[_Target],
                   batches: Iterable[Sequence[tuple[int, Tokenized]]], done: Sequence[dict],
                   writers: Sequence[ShardWriter], pooling: Pooling, dtype: torch.dtype, bar: Any,
                   cap: ResidentCap) -> int:
    """Run ``batches`` through the encoder and hand each store the sentences it lacks; then write every store's
    last shard. Returns the number of sentences written to some store."""
    written = 0
    for batch in batches:
        cap.check()
        need = {targets[k].measure: k for k, d in enumerate(done) if any(i not in d for i, _ in batch)}
        new = sum(any(i not in d for d in done) for i, _ in batch)
        written += new
        for what, arrays in batch_maps(encoder, [t for _, t in batch], pooling, list(need), dtype, encoder.buffers):
            k, stats = need[what], targets[need[what]].statistics
            for (i, t), a in zip(batch, arrays):
                if i in done[k]:
                    continue
                if stats is None:
                    writers[k].add(i, a, len(corpus[i]), t.prefix, m=t.n_positions)
                else:  # what the analysis keeps of the maps, by the sentence's words
                    writers[k].add(i, stats.record(i, a, t.prefix, len(corpus[i])), len(corpus[i]), t.prefix,
                                   m=len(corpus[i]))
            del arrays  # written: let go before the next measure's are made
        bar.update(new)
    for w in writers:
        w.flush(wait=False)  # every store's last shard written at once
    for w in writers:
        w.flush()
    return written


def causal(model: torch.nn.Module) -> bool:
    """Whether the model's attention is causal (a word sees itself and its left), from its family entry; a
    model without one is taken as an encoder."""
    try:
        return family_of(model)[0].causal
    except LayoutError:
        return False


def kv_heads(model: torch.nn.Module) -> Optional[int]:
    """The key/value heads the query heads share (grouped-query attention), from the family entry; None for a
    model without one."""
    try:
        fam, _ = family_of(model)
    except LayoutError:
        return None
    return head_counts(model, fam)[1]


def _finish_store(t: _Target, encoder: Encoder, corpus: Corpus, store_dtype: str, skipped_rows: list[dict],
                  seconds: float, part: Optional[dict] = None) -> ArrayStore:
    """Write the manifest of a target's store, or of one part of it (which makes it complete), and open it."""
    layout = array_layout(t.measure, encoder)
    kind = {"representation": enum_value(t.measure)} if isinstance(t.measure, Representation) else {
        "measure": enum_value(t.measure)}
    if t.statistics is not None:  # the maps' layers and heads; the records' own layout
        kind["statistics"] = t.inputs["statistics"]
        stats_layout = t.statistics.layout(*layout.lead)
        store_dtype = t.statistics.dtype
    write_manifest(t.directory, {
        "key": t.key,
        "inputs": t.inputs,
        **kind,
        "model_name": encoder.name,
        "corpus_name": corpus.name,
        "split": corpus.split,
        "n_sentences": len(corpus),
        "num_layers": layout.lead[0],
        "num_heads": layout.lead[1] if len(layout.lead) > 1 else 1,
        "array": (stats_layout if t.statistics is not None else layout).to_json(),
        "store_dtype": store_dtype,
        "special_tokens": encoder.special_tokens,
        "causal": causal(encoder.model),
        "kv_heads": kv_heads(encoder.model),
        "skipped": skipped_rows,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "extract_seconds": seconds,
        **({"part": part} if part is not None else {}),
    })
    return open_store(t.directory, t.measure, t.statistics is not None)


def array_layout(what: Stored, encoder: Encoder) -> ArrayLayout:
    """The per-sentence shape of a store of ``what`` for this encoder (``hidden``: the embedding layer too)."""
    what = stored(what)
    if what is Representation.hidden:
        return ArrayLayout((encoder.num_layers + 1,), 1, (encoder.hidden_size,))
    if what is Representation.heads:
        d = encoder.hidden_size // encoder.num_heads
        return ArrayLayout((encoder.num_layers, encoder.num_heads), 1, (d,))
    return ArrayLayout((encoder.num_layers, heads_of(what, encoder.num_heads)), 2)


def extract_in_memory(encoder: Encoder, sentences: Sequence[Sequence[str]], pooling: Pooling,
                      measures: Sequence[Measure] = (Measure.attention,)
                      ) -> list[tuple[dict[Measure, np.ndarray], int] | str]:
    """Word-level maps of every measure for a few sentences without a store (the inspector), each sentence
    in one forward pass: ``({measure: (L, heads_of(measure), M, M)}, prefix)``, or a reason string for a
    sentence that cannot be used."""
    wanted = list(dict.fromkeys(Measure(m) for m in measures))
    tokenized = encoder.tokenize(sentences)
    out: list[tuple[dict[Measure, np.ndarray], int] | str] = []
    for t in tokenized:
        if isinstance(t, str):
            out.append(t)
        else:
            maps = word_maps(encoder, [t], pooling, wanted)
            out.append(({m: maps[m][0] for m in wanted}, t.prefix))
    return out


def ensure_store(model: ModelConfig, corpus: Corpus, cfg: ExtractConfig, reads: Optional[Stored] = None,
                 partial: bool = False, statistics: Optional[Callable[[Measure], MapStatistics]] = None
                 ) -> ExtractReport:
    """The stores of ``corpus`` for this model and extraction config (``reads``: see :func:`extract`); the
    model is loaded only when a store has to be built. With ``extract.partition`` set, a task that reads the
    whole store (``partial`` false) is refused in one line while other parts are not done."""
    report = extract(lambda: load_encoder(model), corpus, cfg, identity=model_identity(model),
                     model_name=model_label(model), reads=reads, statistics=statistics)
    if report.store is None and not partial:
        raise ProbingError(f"extract.partition={cfg.partition}: this part is extracted, parts "
                           f"{list(report.parts.pending)} of {cfg.partitions} are not; this task reads the whole "
                           "store: run it without extract.partition once every part is done")
    return report
