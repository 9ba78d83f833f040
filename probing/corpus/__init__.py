"""Corpora: the :class:`Sentence` type and one reader per source; :func:`load_corpus` picks by config."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from probing.config import enum_value
from probing.corpus.conllu_reader import read_conllu
from probing.corpus.grammar import generate_corpus, seed_sentences
from probing.corpus.sentence import Corpus, Sentence, Skip, base_relation
from probing.corpus.ud import read_treebank
from probing.errors import CorpusError
from probing.paths import absolute

__all__ = [
    "Corpus", "CorpusError", "Sentence", "Skip", "base_relation", "generate_corpus", "load_corpus",
    "read_conllu", "read_text", "seed_sentences",
]

UD_EWT_HINT = (
    "Universal Dependencies English EWT is at https://github.com/UniversalDependencies/UD_English-EWT "
    "(files en_ewt-ud-{train,dev,test}.conllu); point data.dir at the folder that holds them"
)


# words and punctuation as separate tokens ("mat." -> "mat", "."), keeping in-word hyphens and apostrophes
_WORD = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")


def split_words(text: str) -> tuple[str, ...]:
    """Split raw text into words, punctuation apart: ``"The cat sat."`` -> ``("The", "cat", "sat", ".")``."""
    return tuple(_WORD.findall(text))


def read_text(lines: list[str], name: str = "text") -> Corpus:
    """Raw sentences, one per line (ids keep the line numbers, from 1), words and punctuation split apart
    (:func:`split_words`); no gold trees."""
    sentences = [Sentence(f"{name}-{no}", split_words(line)) for no, line in enumerate(lines, start=1)
                 if split_words(line)]
    if not sentences:
        raise CorpusError(f"{name}: no sentences in the text")
    return Corpus(name, "", tuple(sentences))


def ud_ewt_path(directory: str, split: str) -> Path:
    """The CoNLL-U file of one EWT split, or a clear error saying where to get it."""
    if split not in ("train", "dev", "test"):
        raise CorpusError(f"data.split={split!r}: UD EWT has splits train, dev and test")
    path = Path(directory).expanduser() / f"en_ewt-ud-{split}.conllu"
    if not path.is_file():
        raise CorpusError(f"{path}: not found. {UD_EWT_HINT}")
    return path


def split_name(data: dict) -> str:
    """The split a corpus built from a data config (as a plain dict) carries: ``seed<N>`` for the grammar (its
    sentences are the seed's), none for raw text, ``data.split`` otherwise."""
    kind = str(data.get("kind"))
    if kind == "grammar":
        return f"seed{data.get('grammar_seed', data.get('seed', 0))}"
    return "" if kind == "text" else str(data.get("split") or "")


def load_corpus(cfg, split: Optional[str] = None) -> Corpus:
    """Build the corpus a :class:`~probing.config.DataConfig` describes (``split`` overrides ``cfg.split``)."""
    kind = enum_value(cfg.kind)
    split = split or cfg.split
    if kind == "grammar":
        corpus = generate_corpus(cfg.n_sentences, cfg.grammar_seed)
    elif kind == "conllu":
        if not cfg.path:
            raise CorpusError("data=conllu needs data.path=FILE.conllu")
        corpus = read_conllu(absolute(cfg.path), split=split, strict=cfg.strict)
    elif kind == "ud_ewt":
        if not cfg.dir:
            raise CorpusError(f"data=ud_ewt needs data.dir (or UD_EWT_DIR). {UD_EWT_HINT}")
        path = ud_ewt_path(absolute(cfg.dir), split)
        corpus = read_conllu(path, split=split, strict=cfg.strict, name="ud_ewt")
    elif kind == "ud":
        corpus = read_treebank(cfg, split)
    elif kind == "hf":
        from probing.corpus.hf_reader import read_hf

        if not cfg.hf_path:
            raise CorpusError("data=hf needs data.hf_path (a hub id, or json/csv/parquet with data.hf_data_files)")
        corpus = read_hf(
            cfg.hf_path, split, cfg.hf_name, absolute(cfg.hf_data_files) if cfg.hf_data_files else None,
            cfg.words_column, cfg.heads_column, cfg.relations_column, cfg.upos_column, cfg.heads_one_based,
            cfg.strict,
        )
    elif kind == "text":
        if cfg.text:
            corpus = read_text([cfg.text], "text")
        elif cfg.path:
            p = Path(absolute(cfg.path))
            if not p.is_file():
                raise CorpusError(f"{p}: no such text file")
            corpus = read_text(p.read_text(encoding="utf-8").splitlines(), p.stem)
        else:
            raise CorpusError("data=text needs data.text='a sentence' or data.path=FILE.txt")
    else:  # the schema's enum makes this unreachable from config
        raise CorpusError(f"unknown data.kind {kind!r}")
    return corpus.head(cfg.limit)

