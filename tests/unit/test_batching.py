"""One batching rule for extraction and importance: consecutive sentences, capped by count and padded pieces."""

from probing.encoder import length_batches


def test_batches_are_capped_by_count_and_by_padded_pieces():
    # two a batch at most; a third 10-piece sentence would pad 3 x 10 = 30 > 20 pieces
    assert length_batches([3, 3, 4, 10, 10], batch_size=2, max_tokens=20) == [[0, 1], [2, 3], [4]]
    assert length_batches([3, 3, 4, 10, 10], batch_size=8, max_tokens=20) == [[0, 1, 2], [3, 4]]
    # a sentence longer than the cap still gets a batch of its own
    assert length_batches([50, 2], batch_size=8, max_tokens=20) == [[0], [1]]
    assert length_batches([], batch_size=8, max_tokens=20) == []


def test_attention_cells_cap_long_sentences_batches():
    # 4 sentences of 10 pieces: 100 cells each; a cap of 250 cells takes two at a time, a 30-piece one alone
    assert length_batches([10, 10, 10, 10, 30], batch_size=8, max_tokens=1000, max_cells=250) == [[0, 1], [2, 3], [4]]
    assert length_batches([10, 10, 10, 10, 30], batch_size=8, max_tokens=1000) == [[0, 1, 2, 3, 4]]
