"""Word-piece -> word pooling on hand-worked examples, and properties on random segmentations; word alignment
of byte-level BPE and SentencePiece tokenizers trained in-process (each word's pieces decode to the word and are
those it has mid-sentence)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from families import build
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers_synth import ODD_WORDS, byte_level_bpe, grammar_sentences, metaspace, save

from probing.alignment import piece_positions, pool_attention, pool_one
from probing.config import ModelConfig

# [CLS] a b1 b2 c [SEP]: word "b" is split in two pieces; positions: CLS=0 a=1 b=2 c=3 SEP=4
WORD_IDS = [None, 0, 1, 1, 2, None]
A = torch.tensor([
    [0.50, 0.10, 0.10, 0.10, 0.10, 0.10],
    [0.10, 0.20, 0.30, 0.10, 0.20, 0.10],
    [0.00, 0.40, 0.20, 0.20, 0.10, 0.10],
    [0.20, 0.20, 0.00, 0.40, 0.10, 0.10],
    [0.10, 0.10, 0.50, 0.10, 0.10, 0.10],
    [0.30, 0.00, 0.30, 0.00, 0.20, 0.20],
])


def test_piece_positions_keeps_special_tokens():
    pos, m, prefix = piece_positions(WORD_IDS, 6)
    assert pos == [0, 1, 2, 2, 3, 4]
    assert (m, prefix) == (5, 1)


def test_mean_sum_pooling_hand_worked():
    out = pool_one(A[None, None], WORD_IDS, "mean_sum")[0, 0].numpy()
    # row of "a" (piece 1): columns of b summed: 0.30 + 0.10
    np.testing.assert_allclose(out[1], [0.10, 0.20, 0.40, 0.20, 0.10], atol=1e-6)
    # row of "b" = mean of piece rows 2 and 3, then b's columns summed
    row2 = np.array([0.00, 0.40, 0.20 + 0.20, 0.10, 0.10])
    row3 = np.array([0.20, 0.20, 0.00 + 0.40, 0.10, 0.10])
    np.testing.assert_allclose(out[2], (row2 + row3) / 2, atol=1e-6)
    np.testing.assert_allclose(out[2], [0.10, 0.30, 0.40, 0.10, 0.10], atol=1e-6)
    np.testing.assert_allclose(out[4], [0.30, 0.00, 0.30, 0.20, 0.20], atol=1e-6)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-6)


def test_first_pooling_hand_worked():
    out = pool_one(A[None, None], WORD_IDS, "first")[0, 0].numpy()
    # row of "b" is its first piece's row (piece 2); column of b is its first piece's column; renormalised
    raw = np.array([0.00, 0.40, 0.20, 0.10, 0.10])
    np.testing.assert_allclose(out[2], raw / raw.sum(), atol=1e-6)
    raw_a = np.array([0.10, 0.20, 0.30, 0.20, 0.10])
    np.testing.assert_allclose(out[1], raw_a / raw_a.sum(), atol=1e-6)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-6)


def test_split_word_on_the_attending_side_only():
    # "x y1 y2": y is split; attention from y averages its two rows
    a = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    out = pool_one(a[None, None], [0, 1, 1], "mean_sum")[0, 0].numpy()
    np.testing.assert_allclose(out, [[1.0, 0.0], [0.25, 0.75]], atol=1e-6)


@st.composite
def segmentation(draw):
    n_words = draw(st.integers(1, 6))
    pieces = [draw(st.integers(1, 3)) for _ in range(n_words)]
    word_ids = [None] + [w for w, k in enumerate(pieces) for _ in range(k)] + [None]
    t = len(word_ids)
    seed = draw(st.integers(0, 2**16))
    return word_ids, t, seed


@settings(max_examples=60, deadline=None)
@given(segmentation(), st.sampled_from(["mean_sum", "first"]))
def test_pooled_rows_sum_to_one(seg, pooling):
    word_ids, t, seed = seg
    g = torch.Generator().manual_seed(seed)
    a = torch.softmax(torch.randn(2, 3, t, t, generator=g), -1)
    out = pool_one(a, word_ids, pooling)
    m = len(set(w for w in word_ids if w is not None)) + 2
    assert tuple(out.shape) == (2, 3, m, m)
    np.testing.assert_allclose(out.sum(-1).numpy(), 1.0, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(segmentation(), segmentation())
def test_batched_pooling_equals_single(seg1, seg2):
    """Padding a shorter sentence in a batch changes nothing."""
    singles, items = [], []
    for word_ids, t, seed in (seg1, seg2):
        g = torch.Generator().manual_seed(seed)
        a = torch.softmax(torch.randn(1, 2, t, t, generator=g), -1)
        singles.append(pool_one(a, word_ids, "mean_sum"))
        items.append((a, piece_positions(word_ids, t)))
    tmax = max(a.shape[-1] for a, _ in items)
    mmax = max(p[1] for _, p in items)
    batch = torch.zeros(2, 1, 2, tmax, tmax)
    pos = torch.full((2, tmax), -1)
    for b, (a, (p, m, _)) in enumerate(items):
        t = a.shape[-1]
        batch[b, :, :, :t, :t] = a
        pos[b, :t] = torch.tensor(p)
    pooled = pool_attention(batch, pos, mmax, "mean_sum")
    for b, (single, (_, (p, m, _))) in enumerate(zip(singles, items)):
        np.testing.assert_allclose(pooled[b, :, :, :m, :m].numpy(), single.numpy(), atol=1e-6)


def test_mean_sum_pooling_of_a_two_piece_word_by_hand():
    # [CLS] w1a w1b [SEP] under mean_sum: column sums over pieces, row means
    two = torch.tensor([[[[[0.4, 0.2, 0.2, 0.2], [0.1, 0.5, 0.3, 0.1], [0.3, 0.3, 0.1, 0.3], [0.25] * 4]]]])
    got = pool_attention(two, torch.tensor([[0, 1, 1, 2]]), 3, "mean_sum")[0, 0, 0].numpy()
    np.testing.assert_allclose(got, [[0.4, 0.4, 0.2], [0.2, 0.6, 0.2], [0.25, 0.5, 0.25]], atol=1e-6)


def _segmented(g: torch.Generator, lengths: list[int], max_pieces: int = 6) -> tuple[torch.Tensor, int]:
    """Piece positions of a padded batch: words of 1 to ``max_pieces`` pieces, -1 after each sentence."""
    pos = torch.full((len(lengths), max(lengths)), -1)
    for b, n in enumerate(lengths):
        sizes = torch.randint(1, max_pieces + 1, (n,), generator=g) * (torch.rand(n, generator=g) < 0.3)
        p = [w for w, k in enumerate(sizes.clamp(min=1).tolist()) for _ in range(k)][:n]
        pos[b, :n] = torch.tensor(p)
    return pos, int(pos.max()) + 1


@pytest.mark.parametrize("values", ["softmax", "magnitudes", "signed_zeros"])
def test_the_compiled_kernel_gives_the_bits_of_scatter_adds(values):
    """On CPU the kernel pools (and divides) with the same float32 operations, in the same order, as the
    scatter-adds: the same bits whatever the values (terms of wildly different size, where the order of the
    sums shows; negative zeros, which a sum started from 0 turns positive) and on every layer read lazily."""
    g = torch.Generator().manual_seed(1)
    for trial in range(8):
        pos, m = _segmented(g, torch.randint(1, 30, (4,), generator=g).tolist())
        shape = (4, 2, 3, pos.shape[1], pos.shape[1])
        a = torch.rand(shape, generator=g)
        if values == "softmax":
            a = a.softmax(-1)
        elif values == "magnitudes":
            a = a * 10.0 ** torch.randint(-30, 30, shape, generator=g)
        else:
            a = torch.where(a < 0.4, -0.0, torch.randn(shape, generator=g))
        for pooling in ("mean_sum", "first"):
            for stochastic in (True, False):
                want = pool_attention(a, pos, m, pooling, stochastic, kernel=False)
                got = pool_attention(_Layers(a), pos, m, pooling, stochastic)
                assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (trial, pooling, stochastic)


class _Layers:
    """The L layers of ``a``, each made when it is read (as LazyLayers makes a measure's)."""

    def __init__(self, a: torch.Tensor):
        self.a = a

    def __len__(self) -> int:
        return self.a.shape[1]

    def __getitem__(self, k: int) -> torch.Tensor:
        return self.a[:, k].clone()


# style: (model family, tokenizer, transformers class it is saved through, special positions before the words)
STYLES = {
    "gpt2-byte-level": ("gpt2", "byte_level", "PreTrainedTokenizerFast", 0),
    "qwen2-byte-level": ("qwen2", "byte_level", "PreTrainedTokenizerFast", 0),  # loads as Qwen2Tokenizer
    "llama-unigram": ("llama", "unigram", "PreTrainedTokenizerFast", 1),
    "llama-bpe": ("llama", "bpe", "LlamaTokenizer", 1),
}


@pytest.fixture(scope="module")
def sentences():
    return grammar_sentences(300)


@pytest.fixture(scope="module", params=sorted(STYLES))
def styled(request, sentences, tmp_path_factory):
    """An encoder loaded from a tiny checkpoint with the style's tokenizer, and its special positions before
    the words."""
    from probing.encoder import Encoder

    family, kind, cls, prefix = STYLES[request.param]
    d = tmp_path_factory.mktemp(request.param)
    tok = byte_level_bpe(sentences) if kind == "byte_level" else metaspace(sentences, kind)
    build(family, vocab=save(tok, d, cls)).save_pretrained(str(d))
    return Encoder.load(ModelConfig(name=request.param, name_or_path=str(d), device="cpu")), prefix


def _word_pieces(tok, k: int) -> list[int]:
    pos = np.asarray(tok.piece_position)
    return list(np.asarray(tok.input_ids)[pos == tok.prefix + k])


def test_each_word_decodes_to_itself_with_its_mid_sentence_pieces(styled, sentences):
    """Every word's pieces decode to the word, and a sentence's pieces are those of its running text placed
    after other text (a space before it): the first word gets the pieces it has mid-sentence."""
    enc, prefix = styled
    tokenizer, decoder = enc.tokenizer, enc.tokenizer.backend_tokenizer.decoder
    assert set(ODD_WORDS) <= {w for s in sentences for w in s}
    for words, tok in zip(sentences, enc.tokenize(sentences)):
        assert not isinstance(tok, str), f"{words}: {tok}"
        assert (tok.prefix, tok.n_positions) == (prefix, prefix + len(words))  # nothing after the words
        pieces = [_word_pieces(tok, k) for k in range(len(words))]
        assert all(pieces)
        assert [decoder.decode(tokenizer.convert_ids_to_tokens(p)).strip() for p in pieces] == list(words)
        running = tokenizer(" " + " ".join(words), add_special_tokens=False)["input_ids"]
        assert [i for p in pieces for i in p] == running


def test_first_word_gets_its_mid_sentence_pieces(styled):
    enc, _ = styled
    first, later = enc.tokenize([("The", "cat", "sat", "."), ("cat", "The", "sat", ".")])
    assert _word_pieces(first, 0) == _word_pieces(later, 1)
    assert _word_pieces(first, 1) == _word_pieces(later, 0)
