"""Work beyond one process: the heads analysis without stored maps, extraction in parts, and store sizes.

(m) memory: MiniLM on 1/8, 1/2 and all of EWT train and on EWT train repeated 4 times (written to a temporary
    CoNLL-U file), each run in a fresh subprocess with a cold cache: the whole ``task=heads
    extract.keep_maps=false`` run (peak RSS, seconds), and side by side the extraction it does (the maps'
    statistics made and kept, the maps not) against a cold extraction of the maps alone (the store ``task=extract``
    builds): seconds, peak RSS, resident memory once the corpus and the model are loaded, bytes written; and the
    whole ``task=heads`` run that keeps the maps, which does the same tree and distance work after the extraction.
(p) parts: ``task=extract`` of EWT train with MiniLM as one process, and as two parts run side by side on the two
    cores (two subprocesses, one torch thread each), wall clock and CPU seconds.
(s) store size: a BERT-large-shaped random encoder (24 x 16 heads, MiniLM's tokenizer) on the first sentences of
    EWT dev, the attention store against the statistics kept with ``keep_maps=false``, per 1,000 sentences.

Every run gets its own cache in a temporary directory, removed at the end.
Usage:
    HF_HUB_OFFLINE=1 python experiments/bench/parts.py [--sizes 0.125,0.5,1,4] [--sections m,p,s] [--trim-mb 64] [--mmap-threshold-mb null]

Figures and findings: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(Path(__file__).resolve().parent), str(REPO)]  # this checkout's probing, whatever is installed
EWT = Path(os.environ.get("UD_EWT_DIR") or ".")  # the UD English EWT folder (main() requires the variable)


def rss_mb() -> float:
    """Peak resident memory of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def resident_mb() -> float:
    """Resident memory now (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def corpus_file(tmp: Path, size: float) -> tuple[Path, int | None]:
    """EWT train, or (size > 1) EWT train repeated ``size`` times in one file; the sentence limit for a fraction."""
    train = EWT / "en_ewt-ud-train.conllu"
    if size <= 1:
        n = sum(1 for line in train.open() if line.startswith("# sent_id"))
        return train, (None if size == 1 else int(round(n * size)))
    out = tmp / f"train_x{int(size)}.conllu"
    with out.open("w") as f:
        text = train.read_text()
        for _ in range(int(size)):
            f.write(text)
    return out, None


def child(mode: str, path: str, limit: int | None, cache: str, memory: dict) -> None:
    """One run in this fresh process; prints a JSON line. ``heads``: the whole task, corpus and model loaded by
    it; the others are timed from after the corpus and the model are loaded."""
    import torch

    from probing.config import DataConfig, DataKind, ExtractConfig, HeadsConfig, ModelConfig
    from probing.corpus.cache import load_corpus_cached
    from probing.encoder import load_encoder
    from probing.extract import extract
    from probing.heads.statistics import statistics
    from probing.tasks import heads as heads_task
    from probing.tasks.base import RunOutput
    from probing.tracking import NoTracker

    memory = {k: v for k, v in memory.items() if v != "default"}  # the config's own where not given
    if mode.startswith("part"):
        torch.set_num_threads(1)
    data = DataConfig(kind=DataKind.conllu, path=path, split="train", limit=limit)
    model = ModelConfig(name="minilm", name_or_path="bundled:minilm", device="cpu")
    base = resident_mb()
    cpu0, start = time.process_time(), time.perf_counter()
    if mode in ("heads", "heads-maps"):
        heads_task.run(model, data, ExtractConfig(cache_dir=cache, progress=False, keep_maps=mode == "heads-maps",
                                                  **memory),
                       HeadsConfig(figures=False), 0, RunOutput(Path(cache) / "run", NoTracker()))
        sentences = words = None
    else:
        corpus = load_corpus_cached(data, None, cache)
        enc = load_encoder(model)
        sentences, words = len(corpus), sum(len(s) for s in corpus)
        base = resident_mb()
        cpu0, start = time.process_time(), time.perf_counter()
        if mode == "extract":
            extract(enc, corpus, ExtractConfig(cache_dir=cache, progress=False, **memory))
        elif mode == "stats":
            extract(enc, corpus, ExtractConfig(cache_dir=cache, progress=False, keep_maps=False, **memory),
                    statistics=statistics(corpus, HeadsConfig()))
        else:  # part-K-of-N
            k, n = (int(x) for x in mode.split("-")[1::2])
            extract(enc, corpus, ExtractConfig(cache_dir=cache, progress=False, partitions=n, partition=k, **memory))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
    size = sum(f.stat().st_size for f in Path(cache).rglob("shard-*") if f.is_file())
    print(json.dumps({"mode": mode, "sentences": sentences, "words": words, "seconds": seconds, "cpu": cpu,
                      "peak_rss_mb": rss_mb(), "loaded_rss_mb": base, "store_bytes": size}))


def spawn(args: list[str], env: dict, memory: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", *args, json.dumps(memory or {})], stdout=subprocess.PIPE,
                            text=True, env=env)


def result(p: subprocess.Popen) -> dict:
    out, _ = p.communicate()
    if p.returncode:
        raise SystemExit(f"a child run failed (exit {p.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def memory(tmp: Path, sizes: list[float], env: dict, settings: dict) -> None:
    for size in sizes:
        path, limit = corpus_file(tmp, size)
        runs = {}
        for mode in ("extract", "stats", "heads", "heads-maps"):
            cache = tmp / f"cache-{mode}-{size}"
            runs[mode] = result(spawn([mode, str(path), str(limit or 0), str(cache)], env, settings))
            shutil.rmtree(cache)
        h, s, e, k = runs["heads"], runs["stats"], runs["extract"], runs["heads-maps"]
        print(f"size {size:>5}  {s['sentences']:6d} sentences {s['words']:7d} words | keep_maps=false heads run: "
              f"{h['seconds']:6.1f} s, peak RSS {h['peak_rss_mb']:5.0f} MB | extraction with statistics "
              f"{s['seconds']:6.1f} s, peak RSS {s['peak_rss_mb']:5.0f} MB (loaded {s['loaded_rss_mb']:4.0f}), kept "
              f"{s['store_bytes'] / 2**20:6.1f} MiB | extraction alone {e['seconds']:6.1f} s, peak RSS "
              f"{e['peak_rss_mb']:5.0f} MB (loaded {e['loaded_rss_mb']:4.0f}), maps {e['store_bytes'] / 2**20:6.1f} MiB"
              f" | with statistics / alone {s['seconds'] / e['seconds']:.2f}x, whole heads run / extraction alone "
              f"{h['seconds'] / e['seconds']:.2f}x | heads run keeping the maps {k['seconds']:6.1f} s, peak RSS "
              f"{k['peak_rss_mb']:5.0f} MB; keep_maps=false / keeping them {h['seconds'] / k['seconds']:.2f}x",
              flush=True)


def parts(tmp: Path, env: dict) -> None:
    path = str(EWT / "en_ewt-ud-train.conllu")
    cache = tmp / "cache-one"
    t0 = time.perf_counter()
    one = result(spawn(["extract", path, "0", str(cache)], env))
    one_wall = time.perf_counter() - t0
    shutil.rmtree(cache)
    cache = tmp / "cache-two"
    t0 = time.perf_counter()
    procs = [spawn([f"part-{k}-of-2", path, "0", str(cache)], env) for k in range(2)]
    two = [result(p) for p in procs]
    two_wall = time.perf_counter() - t0
    shutil.rmtree(cache)
    print(f"one process: {one_wall:.1f} s wall ({one['seconds']:.1f} s extracting, {one['cpu']:.1f} CPU s); two "
          f"parts side by side: {two_wall:.1f} s wall (extracting {two[0]['seconds']:.1f}, {two[1]['seconds']:.1f} s; "
          f"{two[0]['cpu'] + two[1]['cpu']:.1f} CPU s); wall ratio {two_wall / one_wall:.2f}x", flush=True)


def sizes_bert_large(tmp: Path, n: int) -> None:
    from extract import load
    from families import encoder

    from probing.config import ExtractConfig, HeadsConfig
    from probing.extract import extract
    from probing.heads.statistics import statistics

    corpus = load(str(EWT), n)
    enc = encoder("bert_large", tmp)
    maps = extract(enc, corpus, ExtractConfig(cache_dir=str(tmp / "s-maps"), progress=False)).store
    kept = extract(enc, corpus, ExtractConfig(cache_dir=str(tmp / "s-kept"), progress=False, keep_maps=False),
                   statistics=statistics(corpus, HeadsConfig())).store
    per = 1000 / len(corpus)
    a = sum(f.stat().st_size for f in (tmp / "s-maps").rglob("shard-*"))
    b = sum(f.stat().st_size for f in (tmp / "s-kept").rglob("shard-*"))
    print(f"BERT-large shape, first {len(corpus)} EWT dev sentences: maps {a * per / 2**20:.1f} MiB per 1,000 "
          f"sentences, kept statistics {b * per / 2**20:.1f} MiB per 1,000 ({b / a:.3f} of the maps; "
          f"{len(maps)} and {len(kept)} sentences)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="0.125,0.5,1,4")
    ap.add_argument("--sections", default="m,p,s")
    ap.add_argument("--bert-large-sentences", type=int, default=200)
    ap.add_argument("--trim-mb", default="default", help="extract.trim_mb of every run of section m (null: off)")
    ap.add_argument("--mmap-threshold-mb", default="default",
                    help="extract.mmap_threshold_mb of every run of section m (null: glibc's own)")
    ap.add_argument("--child", nargs=5, metavar=("MODE", "PATH", "LIMIT", "CACHE", "MEMORY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not os.environ.get("UD_EWT_DIR"):
        ap.error("set UD_EWT_DIR to the UD English EWT folder (en_ewt-ud-{train,dev,test}.conllu)")
    if args.child:
        mode, path, limit, cache, memory_settings = args.child
        child(mode, path, int(limit) or None, cache, json.loads(memory_settings))
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    tmp = Path(tempfile.mkdtemp(prefix="probing-bench-parts-"))
    try:
        sections = args.sections.split(",")
        if "m" in sections:
            settings = {k: v if v == "default" else None if v == "null" else float(v)
                        for k, v in (("trim_mb", args.trim_mb), ("mmap_threshold_mb", args.mmap_threshold_mb))}
            memory(tmp, [float(s) for s in args.sizes.split(",")], env, settings)
        if "p" in sections:
            parts(tmp, env)
        if "s" in sections:
            sizes_bert_large(tmp, args.bert_large_sentences)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
