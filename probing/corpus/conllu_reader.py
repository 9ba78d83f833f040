"""CoNLL-U files -> :class:`Corpus`, with line-precise errors.

Lines are parsed with the ``conllu`` package; this module adds what it leaves out: the column count,
tree validity (heads in range, one root, no cycle) and the file:line of every problem.
Multiword-token ranges (``3-4``) and empty nodes (``8.1``) are not words of the tree and are dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator, Optional

from conllu.exceptions import ParseException
from conllu.parser import DEFAULT_FIELDS, parse_line

from probing.corpus.sentence import Corpus, Sentence, Skip
from probing.corpus.tree_checks import tree_problem
from probing.errors import CorpusError


def _blocks(lines: list[str]) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """Yield (first line number, [(line number, line)]) for each blank-line separated block."""
    block: list[tuple[int, str]] = []
    for no, line in enumerate(lines, start=1):
        if line.strip() == "":
            if block:
                yield block[0][0], block
                block = []
        else:
            block.append((no, line))
    if block:
        yield block[0][0], block


def _parse_block(path: str, block: list[tuple[int, str]], index: int) -> Sentence:
    sent_id: Optional[str] = None
    words: list[str] = []
    heads: list[int] = []
    rels: list[str] = []
    upos: list[str] = []
    ids: list[int] = []
    lines_of: list[int] = []
    for no, line in block:
        if line.startswith("#"):
            key, _, value = line[1:].partition("=")
            if key.strip() == "sent_id":
                sent_id = value.strip()
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise CorpusError.at(path, no, f"expected 10 tab-separated columns, found {len(cols)}")
        for col, field_name in ((1, "FORM"), (3, "UPOS"), (6, "HEAD"), (7, "DEPREL")):
            if not cols[col].strip():  # the UD validator's "empty field" error; '_' is a value
                raise CorpusError.at(path, no, f"empty {field_name} field (column {col + 1})")
        try:
            token = parse_line(line, DEFAULT_FIELDS)
        except ParseException as e:
            raise CorpusError.at(path, no, f"{e}") from None
        tid = token["id"]
        if isinstance(tid, tuple):  # 3-4 multiword range or 8.1 empty node
            continue
        if not isinstance(token["head"], int):
            raise CorpusError.at(path, no, f"head {cols[6]!r} is not an integer")
        ids.append(tid)
        words.append(token["form"])
        heads.append(token["head"] - 1)
        rels.append(token["deprel"])
        upos.append(token["upos"])
        lines_of.append(no)
    first = block[0][0]
    sid = sent_id or f"{Path(path).name}#{index}"
    if not words:
        raise CorpusError.at(path, first, f"sentence {sid} has no words")
    if ids != list(range(1, len(ids) + 1)):
        raise CorpusError.at(path, first, f"sentence {sid} word ids are not 1..{len(ids)} in order")
    n = len(words)
    for i, h in enumerate(heads):
        if not -1 <= h < n:
            raise CorpusError.at(
                path, lines_of[i], f"head {h + 1} is out of range (sentence {sid} has {n} words)"
            )
    problem = tree_problem(heads)
    if problem:
        raise CorpusError.at(path, first, f"sentence {sid}: {problem}")
    return Sentence(sid, tuple(words), tuple(heads), tuple(rels), tuple(upos))


def _kind(reason: str) -> str:
    for key in ("empty", "columns", "not an integer", "out of range", "cycle", "no root", "roots", "no words", "own head"):
        if key in reason:
            return key.strip()
    return "malformed"


def read_conllu(path: str | Path, split: str, strict: bool, name: Optional[str] = None) -> Corpus:
    """Read one CoNLL-U file. ``strict=False`` skips malformed sentences and records why."""
    p = Path(path)
    if p.is_dir():
        raise CorpusError.at(str(p), None, "is a directory, not a CoNLL-U file (data=conllu reads one file; for "
                                           "the EWT folder use data=ud_ewt data.dir=DIR)")
    if not p.is_file():
        raise CorpusError.at(str(p), None, "no such CoNLL-U file")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        hint = " (it looks like UTF-16: convert it to UTF-8)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise CorpusError.at(str(p), line, f"not UTF-8 text (byte {e.start}); CoNLL-U files are UTF-8{hint}") from None
    lines = text.splitlines()
    sentences: list[Sentence] = []
    skipped: list[Skip] = []
    for index, (first, block) in enumerate(_blocks(lines)):
        try:
            sentences.append(_parse_block(str(p), block, index))
        except CorpusError as e:
            if strict:
                raise
            skipped.append(Skip(str(p), e.line, None, e.reason, _kind(e.reason)))
    if not sentences and not skipped:
        raise CorpusError.at(str(p), None, "no sentences")
    return Corpus(name or p.stem, split, tuple(sentences), tuple(skipped))
