"""The ``lm`` readout (a causal LM's own next-word prediction) on a tiny random Llama with a byte-level BPE:
its loss is transformers' own shifted language-model loss over the scored pieces, a word is a hit only when all
its pieces are predicted, a head's ablation equals its zeroed slice of the output projection, and a model
without a causal-LM head is refused in one line."""

from __future__ import annotations

import copy

import pytest
import torch
from mixing_oracle import randomise
from tokenizers_synth import byte_level_bpe, grammar_sentences, save

from probing.config import ImportanceMethod, LmHead, ModelConfig, ReadoutKind
from probing.corpus import Corpus, Sentence
from probing.encoder import load_encoder
from probing.errors import ProbingError
from probing.importance.inputs import make_batches
from probing.importance.readouts import LmReadout, trivial_baselines
from probing.importance.scores import evaluate
from probing.tasks import importance as task

CORPUS = Corpus("toy", "dev", tuple(Sentence(str(i), words) for i, words in enumerate(
    [("the", "cat", "sat", "on", "the", "mat"), ("a", "zebra!", "naïve"), ("dogs", "bark"), ("hello",)])))


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    """The checkpoint's full LlamaForCausalLM (the independent reference) and the encoder with its head."""
    from transformers import LlamaConfig, LlamaForCausalLM

    d = tmp_path_factory.mktemp("tiny_llama_lm")
    vocab = save(byte_level_bpe(grammar_sentences(100)), d)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64, pad_token_id=0,
                      tie_word_embeddings=False)
    torch.manual_seed(0)
    full = randomise(LlamaForCausalLM(cfg), seed=4).eval()
    full.save_pretrained(str(d))
    encoder = load_encoder(ModelConfig(name="tiny-llama", name_or_path=str(d), device="cpu"), LmHead.causal)
    return d, full, encoder


def _hf_word_losses(full, ids):
    """Independent: per-piece cross-entropy of the next piece, from transformers' logits."""
    with torch.no_grad():
        logits = full(input_ids=ids[None]).logits[0]
    return torch.nn.functional.cross_entropy(logits[:-1], ids[1:], reduction="none"), logits[:-1].argmax(-1)


def test_lm_readout_scores_every_word_after_the_first_as_the_model_predicts_it(lm):
    _, full, encoder = lm
    readout = LmReadout(encoder.lm_head)
    for batch in make_batches(encoder, CORPUS, 2, 4096):
        with torch.no_grad():
            hidden = encoder.model(**batch.inputs).last_hidden_state
        st = readout.stats(hidden, batch, hidden)
        for b, i in enumerate(batch.sentences):
            n = int(batch.inputs["attention_mask"][b].sum())
            ids, pos = batch.inputs["input_ids"][b, :n], batch.piece_position[b, :n]
            ce, top = _hf_word_losses(full, ids)
            scored = pos[1:] >= 1  # the pieces of words 1.. (no specials around a sentence here)
            assert st.n[b, 0].item() == len(CORPUS[int(i)]) - 1
            assert st.loss[0, b, 0].item() == pytest.approx(ce[scored].sum().item(), rel=1e-5, abs=1e-6)
            ok = top == ids[1:]
            words = [w for w in range(1, len(CORPUS[int(i)])) if ok[pos[1:] == w].all()]
            assert st.hits[0, b, 0].item() == len(words)


def test_lm_head_ablation_equals_the_zeroed_output_projection(lm):
    _, full, encoder = lm
    readout = LmReadout(encoder.lm_head)
    batches = make_batches(encoder, CORPUS, 2, 4096)
    settings = torch.ones(2, 2, 4)
    settings[0, 1, 3] = 0
    settings[1, 0, 0] = 0
    sums = evaluate(encoder.model, batches, readout, settings, None, replicas=2)
    dh = 32 // 4
    for a, (layer, head) in enumerate([(1, 3), (0, 0)]):
        ref = copy.deepcopy(full)
        with torch.no_grad():
            ref.model.layers[layer].self_attn.o_proj.weight[:, head * dh:(head + 1) * dh] = 0
        want = 0.0
        for batch in batches:
            for b in range(batch.size):
                n = int(batch.inputs["attention_mask"][b].sum())
                ids, pos = batch.inputs["input_ids"][b, :n], batch.piece_position[b, :n]
                want += _hf_word_losses(ref, ids)[0][pos[1:] >= 1].sum().item()
        assert sums.loss[a].sum() == pytest.approx(want, rel=1e-5)


def test_the_trivial_baseline_is_the_most_frequent_later_word():
    train = Corpus("toy", "train", (Sentence("t", ("a", "the", "the", "cat")),))
    assert trivial_baselines("lm_accuracy", train, CORPUS) == {"most frequent word ('the')": 1 / 8}  # of 5 + 2 + 1 later words


def test_a_model_without_a_causal_lm_head_is_refused_in_one_line():
    with pytest.raises(ProbingError) as err:
        task._check_readout(ModelConfig(), ReadoutKind.lm, ImportanceMethod.both)
    assert str(err.value) == ("importance.readout=lm: model minilm (BertModel) has no trained causal-LM head; use a "
                              "decoder such as model=smollm2_q4, or importance.readout=relation, attachment or "
                              "embedding")
