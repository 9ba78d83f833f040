"""Batch a corpus through the encoder into an :class:`~probing.store.AttentionStore` (build, resume, reuse).

Sentences are sorted by length and batched with padding masked; attention is pooled to words on the
model's device and written in shards. A file lock per store makes parallel jobs build it once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
from filelock import FileLock

from probing.alignment import pool_attention
from probing.config import ExtractConfig, ModelConfig, Pooling, enum_value
from probing.corpus import Corpus
from probing.encoder import Encoder, Tokenized, load_encoder, model_identity
from probing.errors import StoreError
from probing.paths import absolute
from probing.store import (
    FORMAT_VERSION,
    MANIFEST,
    AttentionStore,
    ShardWriter,
    complete_shards,
    discard_shards,
    write_manifest,
)

log = logging.getLogger(__name__)


@dataclass
class ExtractReport:
    """What an extraction did: where the store is, whether it was reused, and how fast it ran."""

    store: AttentionStore
    reused: bool
    extracted: int = 0
    resumed_from: int = 0
    seconds: float = 0.0

    @property
    def sentences_per_second(self) -> float:
        return self.extracted / self.seconds if self.seconds > 0 else float("nan")


def store_key(identity: dict, corpus: Corpus, cfg: ExtractConfig) -> tuple[str, dict]:
    """Fingerprint of everything that changes the maps: model, revision, data, extraction settings."""
    inputs = {
        "format": FORMAT_VERSION,
        "model": identity,
        "corpus": corpus.fingerprint(),
        "n_sentences": len(corpus),
        "pooling": enum_value(cfg.pooling),
        "max_length": cfg.max_length,
        "store_dtype": enum_value(cfg.store_dtype),
    }
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return key, inputs


def store_dir(model_name: str, corpus: Corpus, cfg: ExtractConfig, key: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{model_name}-{corpus.name}-{corpus.split}")
    return Path(absolute(cfg.cache_dir)) / f"{safe}-{key}"


def _batches(items: Sequence[tuple[int, Tokenized]], batch_size: int, max_tokens: int
             ) -> Iterator[list[tuple[int, Tokenized]]]:
    """Length-sorted batches, capped by sentence count and by padded tokens (sentences x longest)."""
    batch: list[tuple[int, Tokenized]] = []
    longest = 0
    for item in items:
        n = len(item[1].input_ids)
        if batch and (len(batch) >= batch_size or max(longest, n) * (len(batch) + 1) > max_tokens):
            yield batch
            batch, longest = [], 0
        batch.append(item)
        longest = max(longest, n)
    if batch:
        yield batch


def word_maps(encoder: Encoder, batch: Sequence[Tokenized], pooling: Pooling) -> list[np.ndarray]:
    """Word-level ``(L, H, M, M)`` float32 maps for one batch, padding removed."""
    attn, pos, m = encoder.attention(batch)
    pooled = pool_attention(attn, pos, m, pooling).cpu()
    return [pooled[b, :, :, : x.n_positions, : x.n_positions].numpy() for b, x in enumerate(batch)]


def extract(encoder: Encoder | Callable[[], Encoder], corpus: Corpus, cfg: ExtractConfig,
            identity: Optional[dict] = None, model_name: Optional[str] = None) -> ExtractReport:
    """Return the store for ``corpus`` under ``cfg`` (an :class:`~probing.config.ExtractConfig`),
    building or resuming it when needed. Safe to call from parallel processes.

    ``encoder`` may be a loader called only when the store must be built; then pass the model's
    ``identity`` and ``model_name`` so a built store is found without loading the model.
    """
    if isinstance(encoder, Encoder):
        identity, model_name = encoder.identity, encoder.name
    if identity is None or model_name is None:
        raise ValueError("extract() with an encoder loader needs identity and model_name")
    key, inputs = store_key(identity, corpus, cfg)
    directory = store_dir(model_name, corpus, cfg, key)
    directory.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(directory) + ".lock")
    try:
        store = _whole_store(directory, cfg.verify)
        if store is not None:
            return ExtractReport(store, reused=True)
    except StoreError:
        pass  # damaged: repaired under the lock below
    with lock:
        try:  # another process may have finished (or repaired) it while we waited
            store = _whole_store(directory, cfg.verify)
            if store is not None:
                return ExtractReport(store, reused=True)
        except StoreError as e:
            log.warning("%s\nre-extracting what is damaged (the rest is kept)", e)
            discard_shards(directory, e.damaged)
        if not isinstance(encoder, Encoder):
            encoder = encoder()
        return _build(encoder, corpus, cfg, key, inputs, directory)


def _whole_store(directory: Path, verify: bool) -> Optional[AttentionStore]:
    """The complete store in ``directory`` (None when there is none yet); sizes are checked when it opens,
    and every checksum too when ``verify``. Raises :class:`StoreError` when it is damaged."""
    if not (directory / MANIFEST).is_file():
        return None
    store = AttentionStore(directory)
    damaged = store.verify() if verify else []
    if damaged:
        raise StoreError(f"{directory}: damaged shards {damaged} (checksum or values)", damaged=tuple(damaged))
    return store


def _build(encoder: Encoder, corpus: Corpus, cfg: ExtractConfig, key: str, inputs: dict, directory: Path
           ) -> ExtractReport:
    from tqdm.auto import tqdm

    pooling = Pooling(cfg.pooling)
    store_dtype = str(enum_value(cfg.store_dtype))
    scan = complete_shards(directory, verify=True)  # a resumed shard is read back whole before it counts
    discard_shards(directory, scan.bad)
    done = scan.entries
    tokenized = encoder.tokenize([s.words for s in corpus])
    if cfg.max_length is not None:
        tokenized = [t if isinstance(t, str) or len(t.input_ids) <= cfg.max_length
                     else f"too long: {len(t.input_ids)} word pieces > extract.max_length={cfg.max_length}"
                     for t in tokenized]
    skipped_rows = [{"index": i, "id": corpus[i].id, "reason": t,
                     "kind": "too long" if t.startswith("too long") else "no word pieces"}
                    for i, t in enumerate(tokenized) if isinstance(t, str)]
    todo = [(i, t) for i, t in enumerate(tokenized) if not isinstance(t, str) and i not in done]
    todo.sort(key=lambda it: len(it[1].input_ids))
    if done:
        log.info("resuming %s: %d sentences already extracted", directory, len(done))
    if cfg.skip_last_ffn:
        encoder.skip_last_ffn()
    writer = ShardWriter(directory, store_dtype, cfg.shard_mb, scan.next_shard)
    start = time.perf_counter()
    bar = tqdm(total=len(todo), unit="sent", desc="extract", disable=not cfg.progress, dynamic_ncols=True)
    try:
        for batch in _batches(todo, cfg.batch_size, cfg.max_batch_tokens):
            maps = word_maps(encoder, [t for _, t in batch], pooling)
            for (i, t), a in zip(batch, maps):
                writer.add(i, a, len(corpus[i]), t.prefix)
            bar.update(len(batch))
        writer.flush()
    finally:
        bar.close()
    seconds = time.perf_counter() - start
    write_manifest(directory, {
        "key": key,
        "inputs": inputs,
        "model_name": encoder.name,
        "corpus_name": corpus.name,
        "split": corpus.split,
        "n_sentences": len(corpus),
        "num_layers": encoder.num_layers,
        "num_heads": encoder.num_heads,
        "store_dtype": store_dtype,
        "special_tokens": encoder.special_tokens,
        "skipped": skipped_rows,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "extract_seconds": seconds,
    })
    return ExtractReport(AttentionStore(directory), reused=False, extracted=len(todo), resumed_from=len(done),
                         seconds=seconds)


def extract_in_memory(encoder: Encoder, sentences: Sequence[Sequence[str]], pooling: Pooling
                      ) -> list[tuple[np.ndarray, int] | str]:
    """Word-level maps for a few sentences without a store (the inspector): ``(maps, prefix)`` or a
    reason string for a sentence that cannot be used."""
    tokenized = encoder.tokenize(sentences)
    out: list[tuple[np.ndarray, int] | str] = []
    for t in tokenized:
        if isinstance(t, str):
            out.append(t)
        else:
            out.append((word_maps(encoder, [t], pooling)[0], t.prefix))
    return out



def ensure_store(model: ModelConfig, corpus: Corpus, cfg: ExtractConfig) -> ExtractReport:
    """The attention store of ``corpus`` for this model and extraction config; the model is loaded only
    when the store has to be built."""
    return extract(lambda: load_encoder(model), corpus, cfg, identity=model_identity(model), model_name=model.name)


def store_use(report: ExtractReport, corpus: Corpus) -> dict:
    """What ``run_meta.json`` records of a store a run read: key, dir, corpus fingerprint, sizes."""
    store = report.store
    # the fingerprint the store was keyed by (hashing the corpus again would repeat that work)
    return {"corpus": corpus.name, "split": corpus.split, "corpus_fingerprint": store.manifest["inputs"]["corpus"],
            "store_key": store.key, "store_dir": str(store.dir), "reused": report.reused,
            "sentences": len(store), "skipped": len(store.skipped)}


def describe_store(report: ExtractReport, corpus: Corpus) -> str:
    """A few lines saying where the store is and what it holds."""
    store = report.store
    lines = [
        f"attention store: {store.dir}",
        f"  {'reused (already built)' if report.reused else 'built'}: {len(store)} of {store.n_sentences} sentences"
        f" from {corpus.name} {corpus.split}, {store.num_layers} layers x {store.num_heads} heads,"
        f" {store.manifest['store_dtype']}, {store.size_bytes() / 2**20:.1f} MiB on disk",
    ]
    if not report.reused:
        lines.append(f"  extracted {report.extracted} sentences in {report.seconds:.1f} s"
                     f" ({report.sentences_per_second:.1f} sentences/s)"
                     + (f"; resumed after {report.resumed_from} already done" if report.resumed_from else ""))
    skipped = store.skipped
    if skipped:
        kinds: dict[str, int] = {}
        for s in skipped:
            kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
        lines.append(f"  skipped {len(skipped)}: " + ", ".join(f"{v} {k}" for k, v in kinds.items()))
        for s in skipped[:5]:
            lines.append(f"    sentence {s['id']}: {s['reason']}")
    if corpus.skipped:
        lines.append(f"  malformed sentences skipped while reading (data.strict=false): {len(corpus.skipped)} "
                     + str(corpus.skip_summary()))
        for s in corpus.skipped[:5]:
            lines.append(f"    {s}")
    return "\n".join(lines)
