"""Argmax predictions and offset baselines on hand-made maps whose answers are worked out by hand."""

import numpy as np
import pytest

from probing.heads.scoring import as_ordered, offset_correct, pointers, predict, zero_diagonal


def test_ties_go_to_the_leftmost_word_and_the_diagonal_is_ignored():
    a = np.array([[0.9, 0.05, 0.05],   # itself is largest: zeroed, then the tie 0.05/0.05 -> word 1
                  [0.4, 0.2, 0.4],     # tie between words 0 and 2 -> 0
                  [0.0, 0.0, 1.0]],    # only itself: all zero after zeroing -> the leftmost word, 0
                 dtype=np.float32)
    pred = predict(zero_diagonal(a.copy()), "dep_to_head")
    assert pred.tolist() == [1, 0, 0]


def test_head_to_dep_is_the_argmax_of_the_column():
    a = np.array([[0.0, 0.7, 0.1],
                  [0.2, 0.0, 0.6],
                  [0.5, 0.2, 0.0]], dtype=np.float32)
    # column 0: rows 1, 2 give 0.2, 0.5 -> 2; column 1: 0.7 from row 0; column 2: 0.6 from row 1
    assert predict(a, "head_to_dep").tolist() == [2, 0, 1]
    with pytest.raises(ValueError, match="unknown direction"):
        predict(a, "sideways")


def test_float16_integer_view_orders_like_the_floats():
    rng = np.random.default_rng(0)
    x = rng.random((50, 7)).astype(np.float16)
    x[3, [1, 4]] = x[3].max()  # a tie
    assert np.array_equal(as_ordered(x).argmax(-1), x.astype(np.float32).argmax(-1))


def test_a_head_pointing_at_the_gold_head_scores_every_non_root_word():
    # "a b c": a -> b, b root, c -> b; the head looks at the gold head; the root looks at itself
    gold = np.array([1, -1, 1])
    a = np.zeros((1, 1, 1, 3, 3), dtype=np.float16)
    a[0, 0, 0, 0, 1] = a[0, 0, 0, 2, 1] = 1.0
    a[0, 0, 0, 1, 1] = 1.0
    picks = pointers(a, np.array([3]), ["dep_to_head", "head_to_dep"])
    hits = picks == gold[:, None, None]  # how the relation counts score a pick
    assert hits.shape == (3, 2, 1)
    assert hits[:, 0, 0].tolist() == [True, False, True]  # the root is never correct
    # head_to_dep: column 0 has its max (1.0) in row 0 itself -> zeroed -> leftmost zero: row 0 -> wrong
    assert hits[:, 1, 0].tolist() == [False, False, False]


def test_padding_never_wins_and_words_come_out_sentence_by_sentence():
    # two sentences padded to 3 words; sentence 2 has 2 words whose rows are all zero but the diagonal
    gold = np.array([1, -1, 1, -1, 0])  # the real words of both sentences, one after the other
    a = np.zeros((2, 1, 1, 3, 3), dtype=np.float32)
    a[0, 0, 0] = [[0, 1, 0], [1, 0, 0], [0, 1, 0]]
    a[1, 0, 0, 1, 0] = 0.0  # word 1 of sentence 2 sees nothing but itself: leftmost -> word 0 (its gold head)
    a[1, 0, 0, 1, 1] = 1.0
    picks = pointers(a, np.array([3, 2]), ["dep_to_head"])
    assert picks.shape == (5, 1, 1) and picks.dtype == np.int16  # the padded third word of sentence 2 is not there
    hits = picks == gold[:, None, None]
    assert hits[:, 0, 0].tolist() == [True, False, True, False, True]


def test_offsets_hand_worked_and_outside_the_sentence_is_wrong():
    # heads: w0 -> w1, w1 root, w2 -> w1, w3 -> w2
    gold = np.array([1, -1, 1, 2])
    pos = np.arange(4)
    length = np.full(4, 4)
    hits = offset_correct(gold, pos, length, [-1, 1, 2])
    assert hits[:, 0].tolist() == [False, False, True, True]  # offset -1: w0 -> -1 is outside, not ROOT
    assert hits[:, 1].tolist() == [True, False, False, False]
    assert hits[:, 2].tolist() == [False, False, False, False]
