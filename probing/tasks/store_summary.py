"""What the tasks say of the stores a run read: ``run_meta.json``'s record and the console lines."""

from __future__ import annotations

from probing.config import ExtractConfig
from probing.corpus import Corpus
from probing.extract import ExtractReport
from probing.store import VectorStore
from probing.store.parts import part_span


def store_use(report: ExtractReport, corpus: Corpus) -> dict:
    """What ``run_meta.json`` records of a store a run read: key, dir, corpus fingerprint, sizes."""
    store = report.store
    # the fingerprint the store was keyed by (hashing the corpus again would repeat that work)
    return {"corpus": corpus.name, "split": corpus.split, "corpus_fingerprint": store.manifest["inputs"]["corpus"],
            "measure": store.measure, "store_key": store.key, "store_dir": str(store.dir), "reused": report.reused,
            "sentences": len(store), "skipped": len(store.skipped)}


def describe_store(report: ExtractReport, corpus: Corpus) -> str:
    """A few lines saying where the store is and what it holds."""
    store = report.store

    def fresh(s) -> bool:  # extracted by this run (a merge of parts names none: it made every store)
        return not report.reused and (not report.built or any(report.stores.get(m) is s for m in report.built))

    lines = [
        f"{store.measure} store: {store.dir}",
        f"  {'built' if fresh(store) else 'reused (already built)'}: {len(store)} of {store.n_sentences} sentences"
        f" from {corpus.name} {corpus.split}, {store.num_layers} layers x {store.num_heads} heads"
        + (f" x {store.dim}-dim vectors a word," if isinstance(store, VectorStore) else ",") +
        f" {store.manifest['store_dtype']}, {store.size_bytes() / 2**20:.1f} MiB on disk",
    ]
    if not report.reused:
        lines.append(f"  extracted {report.extracted} sentences in {report.seconds:.1f} s"
                     f" ({report.sentences_per_second:.1f} sentences/s)"
                     + (f"; resumed after {report.resumed_from} already done" if report.resumed_from else ""))
    for measure, other in report.stores.items():
        if other is not store:
            held = (f"{' x '.join(map(str, other.layout.lead))} vectors of {other.dim} a word"
                    if isinstance(other, VectorStore) else f"{other.num_heads} map(s) per layer")
            lines.append(f"  {measure} store: {other.dir} ({held}, {other.size_bytes() / 2**20:.1f} MiB, "
                         f"{'built' if fresh(other) else 'reused'})")
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


def part_metrics(report: ExtractReport, corpus: Corpus, cfg: ExtractConfig) -> dict:
    """What a run that built one part of its stores reports (``metrics.json``): which part, its sentences,
    and the parts done and pending."""
    start, end = part_span(len(corpus), cfg.block_sentences, cfg.partition, cfg.partitions)
    return {"partition": cfg.partition, "partitions": cfg.partitions, "part_sentences": [start, end],
            "extracted": report.extracted, "parts_done": list(report.parts.done),
            "parts_pending": list(report.parts.pending), "complete": report.complete}


def describe_part(metrics: dict) -> str:
    """The console line of such a run."""
    start, end = metrics["part_sentences"]
    head = (f"part {metrics['partition']} of {metrics['partitions']} (sentences {start}-{end - 1}): "
            f"{metrics['extracted']} sentences extracted")
    if metrics["complete"]:
        return head + "; every part is done and the stores are merged"
    if not metrics["parts_pending"]:
        return head + "; every part is done: merge them with probing task=merge and the same settings"
    return (head + f"; parts {metrics['parts_pending']} are not done yet (the last part to finish merges the "
            "stores, or run probing task=merge with the same settings)")
