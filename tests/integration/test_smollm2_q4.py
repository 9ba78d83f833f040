"""The real decoder from the package index (model=smollm2_q4: SmolLM2-135M-Instruct as a Q4_1 GGUF file), offline:
its shape, its own next-word predictions, and word alignment on all of UD English EWT."""

from __future__ import annotations

import pytest
import torch

from probing.config import DataConfig, DataKind, ModelConfig
from probing.corpus import load_corpus
from probing.encoder import Encoder, bundled_gguf_file, resolve_model_path
from probing.errors import ModelLoadError

pytestmark = pytest.mark.slow

CFG = ModelConfig(name="smollm2_q4", name_or_path="bundled:smollm2_q4")


@pytest.fixture(scope="module")
def smollm2():
    try:
        bundled_gguf_file("smollm2_q4")
    except ModelLoadError as e:
        pytest.skip(str(e))
    return Encoder.load(CFG)


def test_it_loads_offline_as_a_grouped_query_llama(smollm2):
    cfg = smollm2.model.config
    assert (smollm2.num_layers, smollm2.num_heads, cfg.num_key_value_heads, smollm2.hidden_size) == (30, 9, 3, 576)
    assert type(smollm2.model).__name__ == "LlamaModel"
    assert smollm2.identity["weights"].startswith("Q4_1 GGUF dequantised, sha256 ")
    assert smollm2.tokenizer.convert_ids_to_tokens(smollm2.tokenizer(" The cat sat")["input_ids"]) == \
        ["ĠThe", "Ġcat", "Ġsat"]


def test_its_language_model_head_predicts_as_the_model_does(smollm2):
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(resolve_model_path(CFG.name_or_path), attn_implementation="eager")
    tok = smollm2.tokenizer
    ids = tok("The capital of France is", return_tensors="pt")
    out = lm.generate(**ids, max_new_tokens=2, do_sample=False)
    assert tok.decode(out[0, ids["input_ids"].shape[1]:]).startswith(" Paris")

    def logit(prefix, word):
        enc = tok(prefix, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            return lm(enc).logits[0, -1, tok(" " + word)["input_ids"][0]].item()

    assert logit("The keys to the cabinet", "are") > logit("The keys to the cabinet", "is")


def test_word_alignment_round_trips_on_all_of_ewt(smollm2, ewt_dir):
    """Each word's pieces are the pieces of the word alone after a space (so the first word's are too), they
    decode to the word, and every word has a position of its own."""
    tok = smollm2.tokenizer
    n_sent = n_words = 0
    for split in ("train", "dev", "test"):
        corpus = load_corpus(DataConfig(kind=DataKind.conllu, path=str(ewt_dir / f"en_ewt-ud-{split}.conllu")))
        sentences = [s.words for s in corpus]
        types = sorted({w for s in sentences for w in s})
        alone = dict(zip(types, tok([" " + w for w in types], add_special_tokens=False)["input_ids"]))
        for words, t in zip(sentences, smollm2.tokenize(sentences)):
            assert not isinstance(t, str), f"{split}: {words[:5]}: {t}"
            assert t.prefix == 0 and t.n_positions == len(words)
            for w, word in enumerate(words):
                ids = [i for i, p in zip(t.input_ids, t.piece_position) if p == w]
                assert ids == alone[word], (split, words, word)
                assert tok.decode(ids) == " " + word
            n_sent, n_words = n_sent + 1, n_words + len(words)
    assert n_sent == 16622 and n_words > 250_000, (n_sent, n_words)

