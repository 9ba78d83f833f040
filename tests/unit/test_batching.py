"""One batching rule for extraction and importance: consecutive sentences, capped by count and padded pieces."""

from probing.encoder import length_batches


def test_batches_are_capped_by_count_and_by_padded_pieces():
    # two a batch at most; a third 10-piece sentence would pad 3 x 10 = 30 > 20 pieces
    assert length_batches([3, 3, 4, 10, 10], batch_size=2, max_tokens=20) == [[0, 1], [2, 3], [4]]
    assert length_batches([3, 3, 4, 10, 10], batch_size=8, max_tokens=20) == [[0, 1, 2], [3, 4]]
    # a sentence longer than the cap still gets a batch of its own
    assert length_batches([50, 2], batch_size=8, max_tokens=20) == [[0], [1]]
    assert length_batches([], batch_size=8, max_tokens=20) == []
