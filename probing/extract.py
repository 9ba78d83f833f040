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
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np
from filelock import FileLock

from probing.alignment import pool_attention
from probing.config import enum_value
from probing.corpus import Corpus
from probing.encoder import Encoder, Tokenized
from probing.store import FORMAT_VERSION, AttentionStore, ShardWriter, atomic_write_json, complete_shards

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


def store_key(identity: dict, corpus: Corpus, cfg: Any) -> tuple[str, dict]:
    """Fingerprint of everything that changes the maps: model, revision, data, extraction settings."""
    inputs = {
        "format": FORMAT_VERSION,
        "model": identity,
        "corpus": corpus.fingerprint(),
        "n_sentences": len(corpus),
        "pooling": enum_value(cfg.pooling),
        "max_length": cfg.max_length,
        "store_dtype": cfg.store_dtype,
    }
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return key, inputs


def store_dir(model_name: str, corpus: Corpus, cfg: Any, key: str) -> Path:
    from probing.paths import absolute

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


def word_maps(encoder: Encoder, batch: Sequence[Tokenized], pooling: str) -> list[np.ndarray]:
    """Word-level ``(L, H, M, M)`` float32 maps for one batch, padding removed."""
    attn, pos, m = encoder.attention(batch)
    pooled = pool_attention(attn, pos, m, pooling).cpu()
    return [pooled[b, :, :, : x.n_positions, : x.n_positions].numpy() for b, x in enumerate(batch)]


def extract(encoder: Encoder | Callable[[], Encoder], corpus: Corpus, cfg: Any,
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
    if (directory / "manifest.json").is_file():
        return ExtractReport(AttentionStore(directory), reused=True)
    with lock:
        if (directory / "manifest.json").is_file():  # another process finished it while we waited
            return ExtractReport(AttentionStore(directory), reused=True)
        if not isinstance(encoder, Encoder):
            encoder = encoder()
        return _build(encoder, corpus, cfg, key, inputs, directory)


def _build(encoder: Encoder, corpus: Corpus, cfg: Any, key: str, inputs: dict, directory: Path) -> ExtractReport:
    from tqdm.auto import tqdm

    pooling = enum_value(cfg.pooling)
    done, next_shard = complete_shards(directory, cfg.store_dtype)
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
    writer = ShardWriter(directory, cfg.store_dtype, cfg.shard_mb, next_shard)
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
    manifest = {
        "format": FORMAT_VERSION,
        "key": key,
        "inputs": inputs,
        "model_name": encoder.name,
        "corpus_name": corpus.name,
        "split": corpus.split,
        "n_sentences": len(corpus),
        "num_layers": encoder.num_layers,
        "num_heads": encoder.num_heads,
        "store_dtype": cfg.store_dtype,
        "special_tokens": encoder.special_tokens,
        "skipped": skipped_rows,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "extract_seconds": seconds,
    }
    atomic_write_json(directory / "manifest.json", manifest)
    return ExtractReport(AttentionStore(directory), reused=False, extracted=len(todo), resumed_from=len(done),
                         seconds=seconds)


def extract_in_memory(encoder: Encoder, sentences: Sequence[Sequence[str]], pooling: str = "mean_sum"
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

