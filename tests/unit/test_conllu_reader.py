"""The CoNLL-U reader on valid input and on every malformed case, strict and lenient."""

from __future__ import annotations

import pytest

from probing.corpus import CorpusError, base_relation, read_conllu

GOOD = """# sent_id = s1
# text = The cat's bowl.
1-2\tThe cat\t_\t_\t_\t_\t_\t_\t_\t_
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t4\tnmod:poss\t_\t_
3\t's\t's\tPART\tPOS\t_\t2\tcase\t_\t_
4\tbowl\tbowl\tNOUN\tNN\t_\t0\troot\t_\t_
4.1\tis\tbe\tAUX\t_\t_\t_\t_\t4:cop\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = s2
1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_

"""


def write(tmp_path, text, name="x.conllu"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_valid_file_multiword_and_empty_nodes_are_not_words(tmp_path):
    c = read_conllu(write(tmp_path, GOOD), split="dev", strict=True)
    assert len(c) == 2
    s = c[0]
    assert s.id == "s1"
    assert s.words == ("The", "cat", "'s", "bowl", ".")
    assert s.heads == (1, 3, 1, -1, 3)
    assert s.relations == ("det", "nmod:poss", "case", "root", "punct")
    assert s.upos == ("DET", "NOUN", "PART", "NOUN", "PUNCT")
    assert base_relation("nmod:poss") == "nmod" and base_relation("det") == "det"
    assert c[1].heads == (-1,)


def broken(line_no_to_replace: int, new_line: str) -> str:
    lines = GOOD.splitlines()
    lines[line_no_to_replace - 1] = new_line
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("line_no,new_line,message", [
    (4, "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_", "expected 10 tab-separated columns, found 9"),
    (4, "1\tThe\tthe\tDET\tDT\t_\tx\tdet\t_\t_", "head"),
    (4, "1\tThe\tthe\tDET\tDT\t_\t9\tdet\t_\t_", "head 9 is out of range"),
    (4, "1\tThe\tthe\tDET\tDT\t_\t0\tdet\t_\t_", "2 roots"),
    (7, "4\tbowl\tbowl\tNOUN\tNN\t_\t2\troot\t_\t_", "no root"),
    (5, "2\tcat\tcat\tNOUN\tNN\t_\t3\tnmod:poss\t_\t_", "cycle"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line_no, new_line, message):
    p = write(tmp_path, broken(line_no, new_line))
    with pytest.raises(CorpusError) as e:
        read_conllu(p, "", strict=True)
    text = str(e.value)
    assert message in text
    assert str(p) in text
    # the error names the token's line for token problems and the sentence's first line for tree problems
    assert f"{p}:{line_no}:" in text or f"{p}:1:" in text


def test_cycle_names_the_words(tmp_path):
    with pytest.raises(CorpusError, match=r"cycle through words 2 -> 3 -> 2"):
        read_conllu(write(tmp_path, broken(5, "2\tcat\tcat\tNOUN\tNN\t_\t3\tnmod:poss\t_\t_")), "", strict=True)


def test_empty_sentence_and_missing_file(tmp_path):
    p = write(tmp_path, "# sent_id = only-comments\n# text = \n\n" + GOOD)
    with pytest.raises(CorpusError, match=r"x.conllu:1: sentence only-comments has no words"):
        read_conllu(p, "", strict=True)
    with pytest.raises(CorpusError, match="no such CoNLL-U file"):
        read_conllu(tmp_path / "absent.conllu", "", strict=True)


def test_lenient_mode_skips_and_counts(tmp_path):
    text = broken(4, "1\tThe\tthe\tDET\tDT\t_\t9\tdet\t_\t_") + "\n# sent_id = s3\n1\tx\tx\tX\t_\t_\t1\troot\t_\t_\n"
    c = read_conllu(write(tmp_path, text), "", strict=False)
    assert [s.id for s in c] == ["s2"]
    assert len(c.skipped) == 2
    assert c.skip_summary() == {"out of range": 1, "no root": 1}
    assert c.skipped[0].line == 4 and "out of range" in c.skipped[0].reason


def test_ewt_dev_reads_with_multiword_tokens(ewt_dir):
    c = read_conllu(ewt_dir / "en_ewt-ud-dev.conllu", split="dev", strict=True)
    assert len(c) == 2001
    n_words = sum(len(s) for s in c)
    raw = (ewt_dir / "en_ewt-ud-dev.conllu").read_text().splitlines()
    expected = sum(1 for line in raw if line and line[0].isdigit() and line.split("\t")[0].isdigit())
    assert n_words == expected
    assert any("nmod:poss" in s.relations for s in c)


def test_encodings_directories_and_empty_fields_are_named_by_file_and_line(tmp_path):
    good = GOOD.split("\n\n")[1] + "\n\n"  # one valid sentence (line 1: its sent_id comment)
    p = tmp_path / "u16.conllu"
    p.write_bytes(good.encode("utf-16"))
    with pytest.raises(CorpusError, match=r"u16\.conllu:1: not UTF-8 text \(byte 0\).*UTF-16"):
        read_conllu(p, "", strict=True)
    p = tmp_path / "bin.conllu"
    p.write_bytes(good.encode() + b"\x89PNG\r\n\x1a\n\xff")
    with pytest.raises(CorpusError, match=rf"bin\.conllu:4: not UTF-8 text \(byte {len(good.encode())}\)"):
        read_conllu(p, "", strict=True)
    with pytest.raises(CorpusError, match="is a directory, not a CoNLL-U file.*data=ud_ewt"):
        read_conllu(tmp_path, "", strict=True)
    # the UD validator's empty FORM (and an empty UPOS): refused by line in strict mode, counted otherwise
    empty_form = good + "1\t\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\tNN\t_\t0\troot\t_\t_\n\n"
    with pytest.raises(CorpusError, match=r"x\.conllu:4: empty FORM field \(column 2\)"):
        read_conllu(write(tmp_path, empty_form), "", strict=True)
    empty_upos = good + "1\tThe\tthe\t\tDT\t_\t0\troot\t_\t_\n\n"
    with pytest.raises(CorpusError, match=r"x\.conllu:4: empty UPOS field \(column 4\)"):
        read_conllu(write(tmp_path, empty_upos), "", strict=True)
    lenient = read_conllu(write(tmp_path, empty_form), "", strict=False)
    assert len(lenient) == 1 and lenient.skip_summary() == {"empty": 1}
