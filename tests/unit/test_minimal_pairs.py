"""The grammar's minimal pairs (aligned sides that differ only where the feature flips, gold trees that are trees,
the agreeing word at the target) and a user's pair files (JSONL and CSV, BLiMP-style prefixes, a misaligned pair
refused naming its file and line, or skipped and counted)."""

from __future__ import annotations

import pytest

from probing.corpus.minimal_pairs import PLURAL, SINGULAR, VERBS, generate_pairs
from probing.corpus.pair_files import read_pairs
from probing.corpus.tree_checks import tree_problem
from probing.errors import ProbingError

KINDS = ["agreement", "agreement_pp", "agreement_relative", "determiner", "reflexive"]


def test_pairs_differ_only_at_the_cue_and_the_target_and_carry_trees():
    pairs = generate_pairs(KINDS, 60, seed=3)
    assert len(pairs) == 60 and len({p.clean.words for p in pairs}) == 60
    assert {p.kind for p in pairs} == set(KINDS)
    for p in pairs:
        differ = [i for i, (a, b) in enumerate(zip(p.clean.words, p.corrupt.words)) if a.lower() != b.lower()]
        assert differ == sorted({p.roles["cue"], p.target}), p
        assert p.clean.words[p.target] == p.good and p.corrupt.words[p.target] == p.bad
        assert p.label in (SINGULAR, PLURAL)
        for s in (p.clean, p.corrupt):
            assert tree_problem(s.heads) is None, s
        assert p.clean.heads == p.corrupt.heads and p.clean.relations == p.corrupt.relations


def test_subject_verb_pairs_put_the_subject_and_its_verb_on_an_nsubj_arc():
    for p in generate_pairs(["agreement", "agreement_pp", "agreement_relative"], 30, seed=1):
        cue = p.roles["cue"]
        assert p.clean.relations[cue] == "nsubj" and p.clean.heads[cue] == p.target
        singular = p.label == SINGULAR
        assert (p.good in VERBS) == singular  # a 3rd-singular verb for a singular subject
        if p.kind != "agreement":
            assert p.roles["cue"] < p.roles["attractor"] < p.target


def test_the_same_seed_gives_the_same_pairs():
    assert generate_pairs(KINDS, 20, 7) == generate_pairs(KINDS, 20, 7)
    assert generate_pairs(KINDS, 20, 7) != generate_pairs(KINDS, 20, 8)


def test_a_jsonl_file_of_pairs_and_blimp_style_prefixes(tmp_path):
    f = tmp_path / "pairs.jsonl"
    f.write_text('{"id": "a", "clean": "the key is here", "corrupt": "the keys are here", "target": 2, '
                 '"good": "is", "bad": "are", "cue": 1, "label": "singular"}\n\n'
                 '{"clean_prefix": "the dogs near the tree", "corrupt_prefix": "the dog near the tree", '
                 '"good": "bark", "bad": "barks", "cue": 1}\n')
    pairs, skipped = read_pairs(f)
    assert not skipped
    a, b = pairs
    assert (a.target, a.good, a.bad, a.roles, a.label) == (2, "is", "are", {"target": 2, "cue": 1}, "singular")
    assert b.clean.words == ("the", "dogs", "near", "the", "tree", "bark") and b.target == 5 and b.id == "pairs-3"


def test_a_misaligned_pair_is_one_line_naming_file_and_line_or_is_skipped_and_counted(tmp_path):
    f = tmp_path / "pairs.csv"
    f.write_text("clean,corrupt,target,good,bad\n"
                 "the key is here,the keys are here,2,is,are\n"
                 "the key is here,the many keys are here,2,is,are\n")
    with pytest.raises(ProbingError) as e:
        read_pairs(f)
    assert str(e.value) == (f"{f}:3: pair 3: clean has 4 words, corrupt 5; the two sides must align word for "
                            "word (patching.strict=false skips and counts such pairs)")
    pairs, skipped = read_pairs(f, strict=False)
    assert len(pairs) == 1 and len(skipped) == 1 and skipped[0].line == 3


def test_a_target_that_is_not_the_good_word_is_refused(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"clean": "the key is here", "corrupt": "the keys are here", "target": 3, "good": "is", '
                 '"bad": "are"}\n')
    with pytest.raises(ProbingError, match=r"p.jsonl:1: pair 1: word 3 is 'here' / 'here', not good 'is' / bad"):
        read_pairs(f)
