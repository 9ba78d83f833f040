"""``task=inspect``: where does each word of one sentence look, in every layer and head?

``probing task=inspect text="The cat sat on the mat."`` (short for ``data=text data.text=...``; or a file with
``data=text data.path=FILE.txt`` or ``data=conllu data.path=FILE.conllu``, or ``data=... data.index=N``)
prints, for every layer and head, the position each word attends to most (special tokens included: they
often win), and, when the sentence has a gold tree (a treebank or the built-in grammar; raw text that
matches a grammar seed sentence counts too), marks with ``*`` the words whose most-attended *word* is
their gold head, with a per-head count. ``inspect.measures=[norm,alti]`` shows context-mixing measures
(:mod:`probing.mixing`, computed in the sentence's one forward pass) next to the weights: tagged console lines
per measure, a section per measure on the page, a PNG grid per measure (per-layer measures: a panel a layer).
It writes ``inspect.txt``, a tidy ``inspect`` table (a ``measure`` column), an offline HTML view and the PNGs.

``inspect.pair=cat,sat`` asks which heads link two words: for each sentence holding both, every head of every
measure ranked by the weight linking them (either way), the top ones printed and all in the ``inspect_pair``
table. Without a gold tree the summary of each measure is every head's strongest word-to-word links.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    InspectConfig,
    Measure,
    ModelConfig,
    RunConfig,
    enum_value,
)
from probing.corpus import Sentence, load_corpus, seed_sentences
from probing.encoder import load_encoder, model_label
from probing.errors import ProbingError
from probing.extract import extract_in_memory
from probing.figures.inspect import png_grid
from probing.heads.choices import choices_table, format_choices, head_choices, position_labels, top_heads
from probing.heads.links import (
    LINKS_TOP,
    find_pair,
    format_links,
    format_pair,
    pair_words,
    rank_pair,
    strongest_links,
    word_level,
)
from probing.io import atomic_write_text
from probing.report import inspect as views
from probing.schema import INSPECT, INSPECT_PAIR
from probing.tasks.base import RunOutput, TaskResult

log = logging.getLogger(__name__)

def with_seed_tree(words: Sequence[str], sentence_id: str) -> tuple[Sentence, str]:
    """A raw sentence; it takes the gold tree of a grammar seed sentence with the same words (any case)."""
    key = tuple(w.lower() for w in words)
    for seed in seed_sentences():
        if tuple(w.lower() for w in seed.words) == key:
            return Sentence(sentence_id, tuple(words), seed.heads, seed.relations, seed.upos), f"grammar ({seed.id})"
    return Sentence(sentence_id, tuple(words)), "text"


def sentences_to_inspect(data: DataConfig, inspect: InspectConfig) -> list[tuple[Sentence, str]]:
    """The sentences of ``data`` to inspect, each with where it came from: one (``data.index``), or the first
    ``inspect.max_sentences`` of raw text or a CoNLL-U file."""
    kind = DataKind(data.kind)
    if data.index is None and kind not in (DataKind.text, DataKind.conllu):
        raise ProbingError('task=inspect needs sentences: text="The cat sat on the mat.", data=text '
                           "data.path=FILE.txt, data=conllu data.path=FILE.conllu, or data.index=N of any corpus")
    corpus = load_corpus(data)
    if data.index is not None:
        if not 0 <= data.index < len(corpus):
            raise ProbingError(f"data.index={data.index}: {corpus.name} {corpus.split} has {len(corpus)} sentences"
                               f" (0..{len(corpus) - 1})")
        s = corpus[data.index]
        return [(s, f"{corpus.name} {corpus.split} #{data.index} ({s.id})")]
    if kind is DataKind.text:
        found = [(t, f"{t.id}: {src}") for t, src in (with_seed_tree(s.words, s.id) for s in corpus)]
    else:
        found = [(s, f"{corpus.name} ({s.id})") for s in corpus]
    if len(found) > inspect.max_sentences:
        log.warning("inspecting the first %d of %d sentences (inspect.max_sentences)", inspect.max_sentences,
                    len(found))
    return found[: inspect.max_sentences]


def measures_shown(inspect: InspectConfig) -> list[Measure]:
    """The weights first, then ``inspect.measures`` in order, each once."""
    return list(dict.fromkeys([Measure.attention] + [Measure(m) for m in inspect.measures]))


def _measure_lines(sentence: Sentence, labels: Sequence[str], prefix: int, mv: views.MeasureView) -> list[str]:
    """The console lines of one measure: ``attention`` untagged (as before measures), others tagged with it."""
    ch, n = mv.choices, len(sentence)
    tag = "" if mv.measure == "attention" else f"{mv.measure} "
    lines = [] if not tag else [f"  measure {mv.measure}: {mv.note}"]
    lines += format_choices(sentence.words, labels, prefix, ch, tag=tag, per_layer=mv.per_layer)
    best = top_heads(ch, 5)
    if best:
        what = "layers" if mv.per_layer else "heads"
        lines.append(f"  {tag}{what} choosing the gold head most often: "
                     + ", ".join((f"L{la}" if mv.per_layer else f"L{la}H{h}") + f" {c}/{n - 1}" for la, h, c in best))
    elif ch.gold is None and n > 1:
        lines += _links_lines(sentence.words, prefix, mv, tag)
    return lines


def _links_lines(words: Sequence[str], prefix: int, mv: views.MeasureView, tag: str) -> list[str]:
    """The summary without a gold tree: each head's (or layer's) strongest word-to-word links."""
    what, value = ("layer", mv.measure) if mv.per_layer else ("head", "weight" if mv.measure == "attention"
                                                                  else mv.measure)
    links = strongest_links(word_level(mv.maps, prefix, len(words)), LINKS_TOP)
    return ([f"  {tag}strongest links of each {what} (no gold tree): its top {links[0].shape[-1]} word pairs "
             f"query->key by {value}, self-links left out"]
            + format_links(words, links, f"{tag}links ", per_layer=mv.per_layer))


def _pair_section(k: int, sentence: Sentence, prefix: int, shown: Sequence[views.MeasureView],
                  pair: tuple[str, str]) -> tuple[list[str], list[pd.DataFrame], Optional[tuple]]:
    """Sentence ``k``'s answer to ``inspect.pair``: every measure's heads ranked by the weight linking the two
    words (lines: the top ones; tables: all; the positions and rankings for the page), or one line naming a
    word the sentence lacks."""
    found = find_pair(sentence.words, pair)
    if isinstance(found, str):
        return [f"  pair: {found}"], [], None
    ranked, tables = [], []
    for mv in shown:
        df = rank_pair(word_level(mv.maps, prefix, len(sentence)), found.a, found.b)
        ranked.append((mv.measure, mv.per_layer, df))
        df = df.assign(measure=mv.measure, sentence=k, sentence_id=sentence.id, word_a=sentence.words[found.a],
                       a=found.a, word_b=sentence.words[found.b], b=found.b)
        tables.append(df[list(INSPECT_PAIR.keys) + ["word_a", "a", "word_b", "b"] + list(INSPECT_PAIR.metrics)])
    return format_pair(sentence.words, found, ranked), tables, (found.a, found.b, tuple(ranked))


def _pair(inspect: InspectConfig) -> tuple[str, str] | None:
    """``inspect.pair`` as two words, or None; anything else is one line."""
    try:
        return pair_words(list(inspect.pair or []))
    except ValueError as e:
        raise ProbingError(str(e)) from None


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, inspect: InspectConfig, out: RunOutput
        ) -> TaskResult:
    """Print every head's choices for the configured sentence(s) under each measure (and, with
    ``inspect.pair``, the heads linking the two words); write text, tables, HTML and PNG."""
    out_dir = out.dir
    pair = _pair(inspect)
    found = sentences_to_inspect(data, inspect)
    measures = measures_shown(inspect)
    encoder = load_encoder(model)
    maps_list = extract_in_memory(encoder, [s.words for s, _ in found], extract.pooling, measures)
    text_lines: list[str] = []
    tables, pair_tables, items, pngs = [], [], [], []
    for k, ((sentence, source), got) in enumerate(zip(found, maps_list)):
        if isinstance(got, str):
            log.warning("sentence %d (%s) skipped: %s", k, sentence.id, got)
            text_lines.append(f"sentence {k}: skipped ({got})")
            continue
        maps, prefix = got
        labels, _ = position_labels(encoder, sentence.words)
        shown = [_view(k, sentence, maps, measure, prefix, inspect.png, model_label(model), out_dir)
                 for measure in measures]
        pngs += [mv.png for mv in shown if mv.png is not None]
        for mv in shown:
            table = choices_table(k, sentence, labels, prefix, mv.choices)
            table.insert(0, "measure", mv.measure)
            tables.append(table)
        pair_lines, ranked, on_page = _pair_section(k, sentence, prefix, shown, pair) if pair else ([], [], None)
        pair_tables += ranked
        text_lines += _sentence_lines(k, sentence, source, labels, prefix, shown,
                                      f"model {model_label(model)}", extract.pooling, pair_lines)
        items.append(views.SentenceView(k, sentence, source, labels, prefix, tuple(shown), on_page))
    text = "\n".join(text_lines)
    print(text, flush=True)
    atomic_write_text(out_dir / "inspect.txt", text + "\n")
    if not items:
        raise ProbingError("no sentence could be inspected (see the warnings above)")
    out.table(INSPECT.name, pd.concat(tables, ignore_index=True))
    if pair_tables:
        out.table(INSPECT_PAIR.name, pd.concat(pair_tables, ignore_index=True))
    html_path = views.write_html(items, out_dir / "inspect.html", model_label(model))
    bertviz = views.write_bertviz(items, out_dir) if inspect.bertviz else []
    log.info("inspector: %s%s", html_path, "".join(f", {p}" for p in pngs))
    metrics: dict[str, Any] = {"sentences": len(items), "html": str(html_path), "png": [str(p) for p in pngs],
                               "bertviz": [str(p) for p in bertviz], "measures": [mv.measure for mv in items[0].measures]}
    metrics.update(_gold_metrics(items, metrics["measures"]))
    if pair:
        metrics.update(_pair_metrics(pair, pair_tables))
    return out.result(metrics)


def _pair_metrics(pair: tuple[str, str], tables: Sequence[pd.DataFrame]) -> dict[str, Any]:
    """The pair, how many sentences hold both words, and the head whose weights link them most in the first
    (``tables`` come in sentence order, the weights first)."""
    sentences = {int(t["sentence"].iloc[0]) for t in tables}
    metrics: dict[str, Any] = {"pair": list(pair), "pair_sentences": len(sentences)}
    if tables:
        top = tables[0].iloc[0]
        metrics["pair_best_head"] = f"L{int(top['layer'])}H{int(top['head'])}"
    return metrics


def _view(k: int, sentence: Sentence, maps: dict, measure: Measure, prefix: int, png: bool, model: str,
          out_dir: Path) -> views.MeasureView:
    """One measure's view of sentence ``k``: every head's choices, and its PNG grid when ``png``."""
    name = str(enum_value(measure))
    ch = head_choices(maps[measure], prefix, len(sentence), sentence.heads)
    mv = views.MeasureView(name, maps[measure], ch, not measure.per_head, None)
    if png:
        stem = f"inspect_{k}" if measure is Measure.attention else f"inspect_{k}_{name}"
        mv = replace(mv, png=png_grid(mv, prefix, sentence.words, out_dir / f"{stem}.png",
                                            f"{model}: {' '.join(sentence.words)}"))
    return mv


def _sentence_lines(k: int, sentence: Sentence, source: str, labels: Sequence[str], prefix: int,
                    shown: Sequence[views.MeasureView], model: str, pooling: Any,
                    extra: Sequence[str] = ()) -> list[str]:
    """The console lines of sentence ``k``: where it came from, every measure's choices, then ``extra``."""
    weights = shown[0].choices
    lines = [f"sentence {k}: {' '.join(sentence.words)}",
             f"  source: {source}; {model}, {weights.word.shape[0]} layers x {weights.word.shape[1]} heads, "
             f"pooling {pooling}" + (f"; measures {', '.join(mv.measure for mv in shown)}" if len(shown) > 1 else ""),
             "  each word -> the position it attends to most"
             + ("; * = the most-attended word is the gold head (root excluded)" if weights.gold is not None
                else "; no gold tree for this sentence")]
    for mv in shown:
        lines += _measure_lines(sentence, labels, prefix, mv)
    return lines + list(extra) + [""]


def _gold_metrics(items: Sequence[views.SentenceView], measures: Sequence[str]) -> dict[str, Any]:
    """How many sentences have a gold tree and, per measure, the head choosing the gold head most often."""
    gold = [it for it in items if it.weights.choices.gold is not None]
    metrics: dict[str, Any] = {"with_gold_tree": len(gold)}
    if gold:
        for i, name in enumerate(measures):
            hits = sum(it.measures[i].choices.gold.sum(-1) for it in gold)  # (L, H) over all gold sentences
            layer, head = np.unravel_index(int(np.argmax(hits)), hits.shape)
            best = f"L{layer}" if items[0].measures[i].per_layer else f"L{layer}H{head}"
            suffix = "" if name == "attention" else f"_{name}"
            metrics.update({f"best_head{suffix}": best, f"best_head_gold{suffix}": int(hits[layer, head])})
        metrics["gold_scored"] = sum(len(it.sentence) - 1 for it in gold)
    return metrics


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract, cfg.inspect, out)
