"""Hugging Face ``datasets`` -> :class:`Corpus`, with configurable column names."""

from __future__ import annotations

from typing import Any, Optional

from probing.corpus.sentence import Corpus, Sentence, Skip
from probing.corpus.tree_checks import tree_problem
from probing.errors import CorpusError


def _as_heads(raw: Any, one_based: bool) -> list[int]:
    return [int(h) - (1 if one_based else 0) for h in raw]


def read_hf(
    path: str,
    split: str,
    name: Optional[str] = None,
    data_files: Optional[str] = None,
    words_column: str = "tokens",
    heads_column: Optional[str] = "head",
    relations_column: Optional[str] = "deprel",
    upos_column: Optional[str] = "upos",
    heads_one_based: bool = True,
    strict: bool = True,
) -> Corpus:
    """Load ``path`` (a hub id, or a builder such as ``json`` with ``data_files``) and map its columns.

    Head columns follow CoNLL-U (1-based, 0 = root) unless ``heads_one_based`` is false.
    """
    source = f"hf:{path}" + (f"/{name}" if name else "") + f"[{split}]"
    ds = _load(source, path, split, name, data_files)
    columns = (words_column, heads_column, relations_column, upos_column)
    missing = [c for c in columns if c and c not in ds.column_names]
    if missing:
        raise CorpusError(
            f"{source}: no column(s) {missing}; the dataset has {ds.column_names} "
            f"(set data.words_column / data.heads_column / data.relations_column / data.upos_column)"
        )
    sentences: list[Sentence] = []
    skipped: list[Skip] = []
    for i, row in enumerate(ds):
        words = tuple(str(w) for w in row[words_column])
        try:
            heads, rels, upos = _annotations(row, words, source, i, columns[1:], heads_one_based)
        except (CorpusError, ValueError, TypeError) as e:
            if strict:
                if isinstance(e, CorpusError):
                    raise
                raise CorpusError.at(source, i, f"bad row: {e}") from None
            skipped.append(Skip(source, i, None, getattr(e, "reason", str(e))))
            continue
        sid = str(row.get("id", i)) if isinstance(row, dict) else str(i)
        sentences.append(Sentence(sid, words, heads, rels, upos))
    return Corpus(path, split, tuple(sentences), tuple(skipped))


def _load(source: str, path: str, split: str, name: Optional[str], data_files: Optional[str]) -> Any:
    """The dataset's split; no ``datasets`` package or a failed load is one :class:`CorpusError` line."""
    try:
        import datasets
    except ImportError as e:  # pragma: no cover - a dependency
        raise CorpusError(f"the 'datasets' package is needed for data=hf ({e})") from None
    try:
        return datasets.load_dataset(path, name, data_files=data_files, split=split)
    except Exception as e:  # noqa: BLE001 - the hub raises many types; one clear line is what a user needs
        first_line = str(e).splitlines()[0]
        raise CorpusError(f"{source}: could not load dataset: {type(e).__name__}: {first_line}") from None


def _annotations(row: Any, words: tuple[str, ...], source: str, i: int,
                 columns: tuple[Optional[str], Optional[str], Optional[str]], heads_one_based: bool
                 ) -> tuple[Optional[tuple[int, ...]], Optional[tuple[str, ...]], Optional[tuple[str, ...]]]:
    """Row ``i``'s heads, relations and UPOS tags from ``columns`` (None where a column is not set). Raises
    :class:`CorpusError` (or what a bad value raises) when the row has no words or its heads are no tree."""
    heads_column, relations_column, upos_column = columns
    if not words:
        raise CorpusError.at(source, i, "sentence has no words")
    heads = rels = upos = None
    if heads_column:
        h = _as_heads(row[heads_column], heads_one_based)
        if len(h) != len(words) or any(not -1 <= x < len(words) for x in h):
            raise CorpusError.at(source, i, f"heads {h} do not fit {len(words)} words")
        problem = tree_problem(h)
        if problem:
            raise CorpusError.at(source, i, problem)
        heads = tuple(h)
    if relations_column:
        rels = tuple(str(r) for r in row[relations_column])
    if upos_column:
        upos = tuple(str(u) for u in row[upos_column])
    return heads, rels, upos
