"""The built-in grammar: valid trees, reproducible, the seed sentences drawn as a linguist would."""

from __future__ import annotations

from probing.corpus import generate_corpus, seed_sentences
from probing.corpus.tree_checks import tree_problem


def arcs(s):
    return [(w, s.words[h] if h >= 0 else "ROOT", r) for w, h, r in zip(s.words, s.heads, s.relations)]


def test_the_cat_sat_on_the_mat():
    s = seed_sentences()[0]
    assert s.text == "The cat sat on the mat ."
    assert arcs(s) == [
        ("The", "cat", "det"), ("cat", "sat", "nsubj"), ("sat", "ROOT", "root"), ("on", "mat", "case"),
        ("the", "mat", "det"), ("mat", "sat", "obl"), (".", "sat", "punct"),
    ]


def test_deposit_my_money_at_the_bank():
    s = seed_sentences()[1]
    assert s.text == "I am going to deposit my money at the bank ."
    assert s.heads == (2, 2, -1, 4, 2, 6, 4, 9, 9, 4, 2)
    assert s.relations == ("nsubj", "aux", "root", "mark", "xcomp", "nmod:poss", "obj", "case", "det", "obl", "punct")
    assert s.upos[:5] == ("PRON", "AUX", "VERB", "PART", "VERB")


def test_trees_valid_and_seeded():
    a = generate_corpus(500, seed=3)
    b = generate_corpus(500, seed=3)
    c = generate_corpus(500, seed=4)
    assert a.sentences == b.sentences and a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()
    assert len(a) == 500 and len({s.words for s in a}) == 500
    for s in a:
        assert tree_problem(s.heads) is None, s.text
        assert len(s.heads) == len(s.words) == len(s.relations) == len(s.upos)
        assert s.relations[-1] == "punct" and s.words[-1] == "."


# What the grammar builds, read off its phrase builders: relation -> every (dependent UPOS, head UPOS, side of
# the head) it can produce. "right": the head comes after the dependent. The root has no head.
ARCS = {
    "det": {("DET", "NOUN", "right")},
    "amod": {("ADJ", "NOUN", "right")},
    "advmod": {("ADV", "ADJ", "right"), ("ADV", "VERB", "left")},  # "very happy"; "sat quietly"
    "nsubj": {("NOUN", "VERB", "right"), ("PRON", "VERB", "right"), ("NOUN", "ADJ", "right"),
              ("PRON", "ADJ", "right")},  # copular clauses: the adjective heads
    "obj": {("NOUN", "VERB", "left")},
    "iobj": {("NOUN", "VERB", "left")},
    "case": {("ADP", "NOUN", "right"), ("PART", "NOUN", "left")},  # "on the mat"; "the cat 's"
    "obl": {("NOUN", "VERB", "left")},
    "nmod": {("NOUN", "NOUN", "left")},
    "nmod:poss": {("PRON", "NOUN", "right"), ("NOUN", "NOUN", "right")},  # "my money"; "the cat 's ball"
    "nummod": {("NUM", "NOUN", "right")},
    "compound": {("NOUN", "NOUN", "right")},
    "aux": {("AUX", "VERB", "right")},
    "cop": {("AUX", "ADJ", "right")},
    "mark": {("PART", "VERB", "right")},
    "xcomp": {("VERB", "VERB", "left")},
    "conj": {("NOUN", "NOUN", "left"), ("VERB", "VERB", "left")},
    "cc": {("CCONJ", "NOUN", "right"), ("CCONJ", "VERB", "right")},
    "acl:relcl": {("VERB", "NOUN", "left")},
    "punct": {("PUNCT", "VERB", "left"), ("PUNCT", "ADJ", "left")},
    "root": {("VERB", None, None), ("ADJ", None, None)},
}
# fixed distances (head - dependent): "bank account", "to deposit", "going to deposit", "the cat 's"
OFFSET = {"compound": 1, "mark": 1, "xcomp": -2, ("case", "PART"): -1}


def test_relation_coverage():
    seen = set()
    for s in generate_corpus(1000, seed=0):
        assert s.heads.count(-1) == 1 and s.relations.count("root") == 1, s.text
        root = s.heads.index(-1)
        for d, (h, rel, upos) in enumerate(zip(s.heads, s.relations, s.upos)):
            arc = (upos, None, None) if h < 0 else (upos, s.upos[h], "right" if h > d else "left")
            assert arc in ARCS.get(rel, set()), (s.text, s.words[d], rel, arc)
            seen.add((rel, arc))
            want = OFFSET.get(rel, OFFSET.get((rel, upos)))
            if want is not None:
                assert h - d == want, (s.text, s.words[d], rel)
            if rel == "det":
                assert s.words[d].lower() in {"the", "a", "this"}, s.text
            if rel == "punct":
                assert d == len(s) - 1 and h == root, s.text
    # every arc shape the grammar can build occurs, and no other
    assert seen == {(rel, arc) for rel, arcs in ARCS.items() for arc in arcs}
