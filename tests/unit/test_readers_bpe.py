"""Hugging Face datasets and raw-text readers; byte-level BPE (RoBERTa-style) alignment with a tiny model."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from probing.config import DataConfig, DataKind, ExtractConfig, ModelConfig
from probing.corpus import CorpusError, load_corpus
from probing.extract import extract


def test_hf_local_json_with_custom_columns(tmp_path):
    rows = [
        {"toks": ["The", "cat", "sat", "."], "hd": [2, 3, 0, 3], "rel": ["det", "nsubj", "root", "punct"]},
        {"toks": ["Dogs", "bark"], "hd": [2, 0], "rel": ["nsubj", "root"]},
    ]
    f = tmp_path / "d.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows))
    cfg = DataConfig(kind=DataKind.hf, hf_path="json", hf_data_files=str(f), split="train", words_column="toks",
                     heads_column="hd", relations_column="rel", upos_column=None)
    c = load_corpus(cfg)
    assert [s.words for s in c] == [("The", "cat", "sat", "."), ("Dogs", "bark")]
    assert c[0].heads == (1, 2, -1, 2) and c[1].relations == ("nsubj", "root")
    bad = replace(cfg, words_column="tokens")
    with pytest.raises(CorpusError, match=r"no column\(s\) \['tokens'\]"):
        load_corpus(bad)


def test_hf_bad_tree_strict_and_lenient(tmp_path):
    f = tmp_path / "d.jsonl"
    f.write_text(json.dumps({"tokens": ["a", "b"], "head": [2, 1], "deprel": ["x", "y"]}) + "\n"
                 + json.dumps({"tokens": ["c"], "head": [0], "deprel": ["root"]}) + "\n")
    cfg = DataConfig(kind=DataKind.hf, hf_path="json", hf_data_files=str(f), split="train", upos_column=None)
    with pytest.raises(CorpusError, match=r"\[train\]:0: no root"):
        load_corpus(cfg)
    c = load_corpus(replace(cfg, strict=False))
    assert len(c) == 1 and len(c.skipped) == 1


def test_text_reader(tmp_path):
    c = load_corpus(DataConfig(kind=DataKind.text, text="The cat sat ."))
    assert c[0].words == ("The", "cat", "sat", ".") and not c.has_trees
    f = tmp_path / "s.txt"
    f.write_text("one two\n\nthree four five\n")
    assert [len(s) for s in load_corpus(DataConfig(kind=DataKind.text, path=str(f)))] == [2, 3]


@pytest.fixture(scope="module")
def tiny_roberta_dir(tmp_path_factory):
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    d = tmp_path_factory.mktemp("tiny_roberta")
    bpe = ByteLevelBPETokenizer()
    texts = ["the cat sat on the mat", "unbelievable things happen", "a dog barked loudly at the postman"] * 20
    bpe.train_from_iterator(texts, vocab_size=300, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(d))
    RobertaTokenizerFast.from_pretrained(str(d)).save_pretrained(str(d))
    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=bpe.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=66, pad_token_id=1)
    RobertaModel(cfg).save_pretrained(str(d))
    return d


def test_bpe_alignment_keeps_words_and_specials(tiny_roberta_dir, tmp_path):
    from probing.corpus import Corpus, Sentence
    from probing.encoder import Encoder

    enc = Encoder.load(ModelConfig(name="tiny-roberta", name_or_path=str(tiny_roberta_dir)))
    words = ("unbelievably", "the", "postman", "barked", "zebra!")
    tok = enc.tokenize([words])[0]
    assert tok.prefix == 1 and tok.n_positions == len(words) + 2
    assert len(tok.input_ids) > len(words) + 2  # some words are split into several BPE pieces
    running = enc.tokenizer(" " + " ".join(words), add_special_tokens=False)["input_ids"]
    assert tok.input_ids[1:-1] == running  # every word, the first too, with the pieces it has mid-sentence
    c = Corpus("t", "x", (Sentence("a", words), Sentence("b", ("the", "cat"))))
    store = extract(enc, c, ExtractConfig(cache_dir=str(tmp_path), progress=False, store_dtype="float32")).store
    for i in store.indices:
        maps = store.maps(i)
        assert maps.shape == (2, 4, len(c[i]) + 2, len(c[i]) + 2)
        np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
    assert enc.max_length == 64  # RoBERTa reserves two position ids
