"""``task=inspect``: where does each word of one sentence look, in every layer and head?

``probing task=inspect text="The cat sat on the mat."`` (or ``inspect.file=FILE``, or ``data=... data.index=N``)
prints, for every layer and head, the position each word attends to most (special tokens included: they
often win), and, when the sentence has a gold tree (a treebank or the built-in grammar; raw text that
matches a grammar seed sentence counts too), marks with ``*`` the words whose most-attended *word* is
their gold head, with a per-head count. It writes ``inspect.txt``, a tidy ``inspect`` table, an offline
HTML view and a PNG grid of the word-level maps per sentence.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from probing.config import enum_value
from probing.corpus import Sentence, load_corpus, read_conllu, seed_sentences

log = logging.getLogger(__name__)

# words and punctuation as separate tokens ("mat." -> "mat", "."), keeping in-word hyphens and apostrophes
_WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")


def split_words(text: str) -> tuple[str, ...]:
    """Split raw text into words, punctuation apart: ``"The cat sat."`` -> ``("The", "cat", "sat", ".")``."""
    return tuple(_WORD.findall(text))


def with_seed_tree(words: Sequence[str], sentence_id: str) -> tuple[Sentence, str]:
    """A raw sentence; it takes the gold tree of a grammar seed sentence with the same words (any case)."""
    key = tuple(w.lower() for w in words)
    for seed in seed_sentences():
        if tuple(w.lower() for w in seed.words) == key:
            return Sentence(sentence_id, tuple(words), seed.heads, seed.relations, seed.upos), f"grammar ({seed.id})"
    return Sentence(sentence_id, tuple(words)), "text"


def sentences_to_inspect(cfg: Any) -> list[tuple[Sentence, str]]:
    """The sentences a run config asks for, each with a short description of where it came from."""
    from probing.paths import absolute
    from probing.pipeline import ProbingError

    icfg = cfg.inspect
    text = getattr(cfg, "text", None) or icfg.text
    if text:
        words = split_words(text)
        if not words:
            raise ProbingError("text= is empty: give a sentence, e.g. text=\"The cat sat on the mat.\"")
        return [with_seed_tree(words, "text-0")]
    if icfg.file:
        path = Path(absolute(icfg.file))
        if not path.is_file():
            raise ProbingError(f"inspect.file={icfg.file}: no such file ({path})")
        if path.suffix == ".conllu":
            corpus = read_conllu(path, split="", strict=True)
            found = [(s, f"{path.name} ({s.id})") for s in corpus]
        else:
            lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
            found = [with_seed_tree(split_words(ln), f"{path.stem}-{i}") for i, ln in enumerate(lines)]
            found = [(s, f"{path.name} line {i + 1}: {src}") for i, (s, src) in enumerate(found)]
        if not found:
            raise ProbingError(f"inspect.file={icfg.file}: no sentences in the file")
        if len(found) > icfg.max_sentences:
            log.warning("inspecting the first %d of %d sentences (inspect.max_sentences)", icfg.max_sentences,
                        len(found))
        return found[: icfg.max_sentences]
    kind = enum_value(cfg.data.kind)
    if cfg.data.index is not None or kind == "text":
        corpus = load_corpus(cfg.data)
        if cfg.data.index is None:
            return [(s, "text") for s in corpus.sentences[: icfg.max_sentences]]
        if not 0 <= cfg.data.index < len(corpus):
            raise ProbingError(f"data.index={cfg.data.index}: {corpus.name} {corpus.split} has {len(corpus)} sentences"
                               f" (0..{len(corpus) - 1})")
        s = corpus[cfg.data.index]
        return [(s, f"{corpus.name} {corpus.split} #{cfg.data.index} ({s.id})")]
    raise ProbingError('task=inspect needs a sentence: text="The cat sat on the mat.", inspect.file=FILE, '
                       "or data=ud_ewt data.index=N")


@dataclass(frozen=True)
class Choices:
    """Where the words of one sentence look. Arrays are ``(L, H, n)`` over query words.

    ``position``: the most-attended position over all ``M`` positions (specials included);
    ``weight``: its attention weight; ``word``: the most-attended *word* (specials excluded, as syntax
    is scored); ``gold``: ``word`` equals the gold head (None without a tree; always False for the root).
    """

    position: np.ndarray
    weight: np.ndarray
    word: np.ndarray
    gold: Optional[np.ndarray]


def head_choices(maps: np.ndarray, prefix: int, n: int, heads: Optional[Sequence[int]] = None) -> Choices:
    """Argmax choices of every head from position-level maps ``(L, H, M, M)`` (``prefix`` specials before
    the ``n`` words); ``heads`` is the gold tree (0-based, root -1) or None."""
    rows = np.asarray(maps, dtype=np.float32)[:, :, prefix:prefix + n, :]  # (L, H, n, M)
    position = rows.argmax(-1)
    weight = np.take_along_axis(rows, position[..., None], -1)[..., 0]
    word = rows[..., prefix:prefix + n].argmax(-1)
    gold = None if heads is None else word == np.asarray(heads)[None, None, :]  # the root (-1) never matches
    return Choices(position, weight, word, gold)


def position_labels(encoder: Any, words: Sequence[str]) -> tuple[list[str], int]:
    """A label for every position: the word, or the special token's text (``[CLS]``, ``[SEP]``, ``<s>``...)."""
    tok = encoder.tokenize([list(words)])[0]
    if isinstance(tok, str):
        raise ValueError(tok)
    pieces = encoder.tokenizer.convert_ids_to_tokens(tok.input_ids)
    labels: list[Optional[str]] = [None] * tok.n_positions
    for piece, pos in zip(pieces, tok.piece_position):
        if labels[pos] is None:
            labels[pos] = piece
    for i, w in enumerate(words):
        labels[tok.prefix + i] = w
    return [lab or "?" for lab in labels], tok.prefix


def format_choices(words: Sequence[str], labels: Sequence[str], prefix: int, ch: Choices) -> list[str]:
    """One line per layer and head: ``query->choice`` for each word; ``*`` marks a gold-head choice.

    When a special token wins, the most-attended word follows in parentheses: ``sat->[SEP](mat)``.
    """
    n_layers, n_heads, n = ch.word.shape
    lines = []
    for layer in range(n_layers):
        for head in range(n_heads):
            parts = []
            for q in range(n):
                pos = int(ch.position[layer, head, q])
                wd = int(ch.word[layer, head, q])
                mark = "*" if ch.gold is not None and ch.gold[layer, head, q] else ""
                if pos - prefix == wd:  # a word won
                    parts.append(f"{words[q]}->{words[wd]}{mark}")
                else:  # a special token won; the best word follows
                    parts.append(f"{words[q]}->{labels[pos]}({words[wd]}{mark})")
            score = ""
            if ch.gold is not None:
                score = f" gold {int(ch.gold[layer, head].sum())}/{n - 1}"
            lines.append(f"L{layer:<2d} H{head:<2d}{score:>11s} | " + "  ".join(parts))
    return lines


def choices_table(index: int, sentence: Sentence, labels: Sequence[str], prefix: int, ch: Choices) -> pd.DataFrame:
    """Tidy rows: one per sentence x layer x head x query word."""
    n_layers, n_heads, n = ch.word.shape
    layer, head, query = np.meshgrid(np.arange(n_layers), np.arange(n_heads), np.arange(n), indexing="ij")
    words = np.asarray(sentence.words, dtype=object)
    lab = np.asarray(labels, dtype=object)
    df = pd.DataFrame({
        "sentence": index, "sentence_id": sentence.id,
        "layer": layer.ravel(), "head": head.ravel(), "query": query.ravel(), "query_word": words[query.ravel()],
        "choice_position": ch.position.ravel(), "choice_label": lab[ch.position.ravel()],
        "choice_weight": ch.weight.ravel(), "choice_is_special": (ch.position.ravel() < prefix)
        | (ch.position.ravel() >= prefix + n),
        "word_choice": ch.word.ravel(), "word_choice_word": words[ch.word.ravel()],
    })
    if sentence.heads is not None:
        df["gold_head"] = np.asarray(sentence.heads)[query.ravel()]
        df["is_gold"] = ch.gold.ravel()
    return df


def best_heads(ch: Choices, k: int = 5) -> list[tuple[int, int, int]]:
    """The ``k`` heads whose word choices hit the gold head most often: ``(layer, head, hits)``."""
    if ch.gold is None:
        return []
    hits = ch.gold.sum(-1)  # (L, H)
    order = np.argsort(-hits, axis=None, kind="stable")[:k]
    return [(int(i // hits.shape[1]), int(i % hits.shape[1]), int(hits.flat[i])) for i in order]


def run_inspect(cfg: Any, out_dir: Path) -> dict:
    """Print every head's choices for the configured sentence(s); write text, table, HTML and PNG."""
    from probing.encoder import load_encoder
    from probing.extract import extract_in_memory
    from probing.report import inspect_views as views
    from probing.results import write_table

    out_dir = Path(out_dir)
    found = sentences_to_inspect(cfg)
    encoder = load_encoder(cfg.model)
    pooling = enum_value(cfg.extract.pooling)
    maps_list = extract_in_memory(encoder, [s.words for s, _ in found], pooling)
    text_lines: list[str] = []
    tables, items, pngs = [], [], []
    for k, ((sentence, source), got) in enumerate(zip(found, maps_list)):
        if isinstance(got, str):
            log.warning("sentence %d (%s) skipped: %s", k, sentence.id, got)
            text_lines.append(f"sentence {k}: skipped ({got})")
            continue
        maps, prefix = got
        labels, _ = position_labels(encoder, sentence.words)
        ch = head_choices(maps, prefix, len(sentence), sentence.heads)
        header = [f"sentence {k}: {' '.join(sentence.words)}",
                  f"  source: {source}; model {cfg.model.name}, {ch.word.shape[0]} layers x {ch.word.shape[1]} heads,"
                  f" pooling {pooling}",
                  "  each word -> the position it attends to most"
                  + ("; * = the most-attended word is the gold head (root excluded)" if ch.gold is not None
                     else "; no gold tree for this sentence")]
        best = best_heads(ch)
        lines = header + format_choices(sentence.words, labels, prefix, ch)
        if best:
            lines.append("  heads choosing the gold head most often: "
                         + ", ".join(f"L{la}H{h} {c}/{len(sentence) - 1}" for la, h, c in best))
        text_lines.extend(lines + [""])
        tables.append(choices_table(k, sentence, labels, prefix, ch))
        png = None
        if cfg.inspect.png:
            png = views.png_grid(maps, prefix, sentence.words, ch, out_dir / f"inspect_{k}.png",
                                 f"{cfg.model.name}: {' '.join(sentence.words)}")
            pngs.append(png)
        items.append(views.SentenceView(k, sentence, source, labels, prefix, maps, ch, png))
    text = "\n".join(text_lines)
    print(text, flush=True)
    (out_dir / "inspect.txt").write_text(text + "\n", encoding="utf-8")
    if not items:
        from probing.pipeline import ProbingError

        raise ProbingError("no sentence could be inspected (see the warnings above)")
    write_table(pd.concat(tables, ignore_index=True), out_dir, "inspect")
    html_path = views.write_html(items, out_dir / "inspect.html", cfg.model.name)
    bertviz = views.write_bertviz(items, out_dir) if cfg.inspect.bertviz else []
    log.info("inspector: %s%s", html_path, "".join(f", {p}" for p in pngs))
    gold = [it for it in items if it.choices.gold is not None]
    metrics: dict[str, Any] = {"sentences": len(items), "with_gold_tree": len(gold), "html": str(html_path),
                               "png": [str(p) for p in pngs], "bertviz": [str(p) for p in bertviz]}
    if gold:
        hits = sum(it.choices.gold.sum(-1) for it in gold)  # (L, H) over all gold sentences
        scored = sum(len(it.sentence) - 1 for it in gold)
        layer, head = np.unravel_index(int(np.argmax(hits)), hits.shape)
        metrics.update(best_head=f"L{layer}H{head}", best_head_gold=int(hits[layer, head]), gold_scored=scored)
    return metrics
