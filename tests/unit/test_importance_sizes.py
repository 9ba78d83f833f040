"""task=importance says what bounds each set of sentences: data.limit the scored ones, importance.max_train_sentences
the readout's (the log line and the console's first line)."""

from __future__ import annotations

from probing.config import DataConfig, DataKind, ImportanceConfig, ReadoutKind
from probing.tasks.importance import _sizes


def test_two_splits_name_the_key_that_bounds_each():
    ewt = DataConfig(kind=DataKind.ud, limit=200)
    assert _sizes(ewt, ImportanceConfig(), ReadoutKind.relation, 400, 200) == (
        "200 dev sentences scored (data.limit), the readout trained on 400 train sentences "
        "(importance.max_train_sentences)")
    # readouts that are not trained name only the scored sentences
    assert _sizes(ewt, ImportanceConfig(), ReadoutKind.embedding, 0, 200) == "200 dev sentences scored (data.limit)"


def test_one_corpus_is_cut_after_data_limit():
    grammar = DataConfig(kind=DataKind.grammar, limit=100)
    assert _sizes(grammar, ImportanceConfig(), ReadoutKind.attachment, 80, 20) == (
        "20 sentences scored (the last 0.2 of the corpus, cut by data.limit), the readout trained on 80 other "
        "sentences (importance.max_train_sentences)")
