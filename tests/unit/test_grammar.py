"""The built-in grammar: valid trees, reproducible, the seed sentences drawn as a linguist would."""

from __future__ import annotations

from collections import Counter

from probing.corpus import generate_corpus, seed_sentences
from probing.corpus.trees import tree_problem


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


def test_relation_coverage():
    counts = Counter(r for s in generate_corpus(400) for r in s.relations)
    expected = {"det", "amod", "nsubj", "obj", "iobj", "case", "obl", "nmod", "aux", "cop", "advmod", "conj", "cc",
                "acl:relcl", "nmod:poss", "punct", "root", "mark", "xcomp", "compound", "nummod"}
    assert expected <= set(counts)
    assert len(counts) >= 15
