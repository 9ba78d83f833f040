"""``importance.readout=mlm`` on a tiny random BertForMaskedLM saved like a hub checkpoint: the fixed masked
set, the unablated loss against transformers' own masked-LM loss, a head's ablation against the model with
that head's slice of the output projection zeroed, gradients against a finite difference, the task end to
end, and the one-line refusal for MiniLM (no masked-LM head)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from conftest import TINY_VOCAB
from mixing_oracle import randomise
from omegaconf import OmegaConf
from test_heads_task import Recorder

from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    HeadsConfig,
    ImportanceConfig,
    LmHead,
    ModelConfig,
)
from probing.corpus import Corpus, Sentence
from probing.encoder import load_encoder
from probing.errors import ProbingError
from probing.importance.inputs import make_batches
from probing.importance.readouts import MlmReadout, masked_words
from probing.importance.scores import evaluate, gradients
from probing.interventions.gates import gated
from probing.results import read_table
from probing.tasks import importance as task
from probing.tasks.base import RunOutput

CORPUS = Corpus("toy", "dev", (
    Sentence("a", ("the", "cat", "sat", "on", "the", "mat"), (1, 2, -1, 5, 5, 2),
             ("det", "nsubj", "root", "case", "det", "obl")),
    Sentence("b", ("unbelievably", "happy", "dog"), (1, 2, -1), ("advmod", "amod", "root")),
    Sentence("c", ("i", "saw", "a", "big", "red", "house", "."), (1, -1, 5, 5, 5, 1, 1),
             ("nsubj", "root", "det", "amod", "amod", "obj", "punct")),
))


@pytest.fixture(scope="module")
def mlm(tmp_path_factory):
    """The checkpoint dir, the full BertForMaskedLM (the independent reference) and the encoder with its head."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_mlm")
    (d / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    BertTokenizerFast.from_pretrained(str(d), do_lower_case=True).save_pretrained(str(d))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    full = randomise(BertForMaskedLM(cfg), seed=3)
    full.save_pretrained(str(d))
    encoder = load_encoder(ModelConfig(name="tiny-mlm", name_or_path=str(d), device="cpu"), LmHead.masked)
    return d, full, encoder


def _masked(encoder, rate=0.3, seed=2):  # seed 2 masks "unbelievably" (five pieces)
    readout = MlmReadout(encoder.lm_head, encoder.tokenizer.mask_token_id, rate, seed)
    return readout, readout.mask(make_batches(encoder, CORPUS, 2, 4096))


def _hf_loss_sum(full, batch, original_ids):
    """Independent: transformers' own masked-LM loss (mean over labelled pieces) times their count."""
    ids = batch.inputs["input_ids"]
    labels = torch.where(ids == 4, original_ids, torch.full_like(ids, -100))
    with torch.no_grad():
        out = full(input_ids=ids, attention_mask=batch.inputs["attention_mask"], labels=labels)
    return out.loss.item() * int((labels != -100).sum())


def test_masked_words_are_seeded_per_sentence():
    assert masked_words(20, 0.15, 0, 7).tolist() == masked_words(20, 0.15, 0, 7).tolist()
    assert len(masked_words(20, 0.15, 0, 7)) == 3 and len(masked_words(2, 0.15, 0, 7)) == 1
    assert masked_words(20, 0.15, 0, 7).tolist() != masked_words(20, 0.15, 0, 8).tolist()


def test_mlm_readout_masks_whole_words_and_scores_the_unablated_loss(mlm):
    _, full, encoder = mlm
    assert encoder.tokenizer.convert_tokens_to_ids("[MASK]") == 4  # _hf_loss_sum's mask id
    readout, batches = _masked(encoder)
    plain = make_batches(encoder, CORPUS, 2, 4096)
    for batch, orig in zip(batches, plain):
        ids, ids0 = batch.inputs["input_ids"], orig.inputs["input_ids"]
        for b, (i, pre, n) in enumerate(zip(batch.sentences, batch.prefix, batch.n_words)):
            words = int(pre) + masked_words(int(n), 0.3, 2, int(i))
            want = torch.isin(batch.piece_position[b], torch.as_tensor(words))
            assert torch.equal(ids[b] == 4, want)  # every piece of a chosen word, nothing else
        with torch.no_grad():
            clean = encoder.model(**batch.inputs).last_hidden_state
            with gated(encoder.model, torch.ones(1, 2, 4)):
                ones = encoder.model(**batch.inputs).last_hidden_state
        st, st1 = readout.stats(clean, batch, clean), readout.stats(ones, batch, clean)
        assert torch.equal(st.loss, st1.loss) and torch.equal(st.hits, st1.hits)  # gate 1: the unablated loss
        assert st.loss.sum().item() == pytest.approx(_hf_loss_sum(full, batch, ids0), rel=1e-5)


def test_mlm_head_ablation_equals_the_zeroed_output_projection(mlm):
    _, full, encoder = mlm
    readout, batches = _masked(encoder)
    settings = torch.ones(3, 2, 4)
    settings[0, 1, 2] = 0
    settings[1, 0, 1] = 0
    sums = evaluate(encoder.model, batches, readout, settings, None, replicas=2)
    plain = make_batches(encoder, CORPUS, 2, 4096)
    dh = 32 // 4
    for a, (layer, head) in enumerate([(1, 2), (0, 1)]):
        ref = copy.deepcopy(full)
        with torch.no_grad():
            ref.bert.encoder.layer[layer].attention.output.dense.weight[:, head * dh:(head + 1) * dh] = 0
        want = sum(_hf_loss_sum(ref, b, o.inputs["input_ids"]) for b, o in zip(batches, plain))
        assert sums.loss[a].sum() == pytest.approx(want, rel=1e-5)
        assert abs(sums.loss[a].sum() - sums.clean_loss.sum()) > 1e-3  # the ablation changed the loss
    np.testing.assert_array_equal(sums.loss[2], sums.clean_loss)
    assert sums.n.sum() == 2 + 5 + 2  # masked pieces: sat on; un ##bel ##ie ##va ##bly; saw red


def test_mlm_gradient_is_a_finite_difference(mlm):
    _, _, encoder = mlm
    readout, batches = _masked(encoder)
    net = copy.deepcopy(encoder.model).double()
    readout.head = copy.deepcopy(encoder.lm_head).double()
    batch = batches[0]
    grads = gradients(net, [batch], readout, None, torch.ones(2, 4, dtype=torch.float64))
    eps = 1e-6
    for layer, head in ((0, 3), (1, 0)):
        vals = []
        for sign in (1, -1):
            xi = torch.ones(batch.size, 2, 4, dtype=torch.float64)
            xi[0, layer, head] += sign * eps
            with torch.no_grad(), gated(net, xi):
                vals.append(readout.loss(net(**batch.inputs).last_hidden_state, batch)[0].item())
        assert grads[0, layer, head] == pytest.approx(abs(vals[0] - vals[1]) / (2 * eps), rel=1e-5, abs=1e-9)


def test_mlm_task_end_to_end(mlm, tmp_path):
    d, _, _ = mlm
    imp = ImportanceConfig(readout="mlm", bootstrap=20, pruning_step=0.5, pruning_seeds=1, min_count=1,
                           figures=False)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    result = task.run(ModelConfig(name="tiny-mlm", name_or_path=str(d), device="cpu"),
                      DataConfig(kind=DataKind.grammar, n_sentences=10), ext, imp,
                      HeadsConfig(), 0, RunOutput(tmp_path / "run", Recorder()))
    assert result.metrics["readout"] == "mlm" and 0 <= result.metrics["clean_mlm_accuracy"] <= 1
    t = read_table(tmp_path / "run", "importance")
    assert set(t.metric) == {"mlm_accuracy_drop", "loss_change", "gradient"} and set(t.relation) == {"all"}
    assert len(t[(t.method == "ablation") & (t.metric == "loss_change")]) == 8


def test_mlm_on_minilm_is_refused_in_one_line(tmp_path):
    with pytest.raises(ProbingError) as err:
        task.run(ModelConfig(), DataConfig(), ExtractConfig(), ImportanceConfig(readout="mlm"), HeadsConfig(), 0,
                 RunOutput(tmp_path, Recorder()))
    assert str(err.value) == ("importance.readout=mlm: model minilm (BertModel) has no masked-LM head; use "
                              "importance.readout=relation, attachment or embedding")


def test_random_init_run_is_labelled_as_the_random_model(mlm, tmp_path):
    """A random-init copy's tables, metrics and heads table carry ``-random<seed>``, never the trained name."""
    d, _, _ = mlm
    imp = ImportanceConfig(readout="embedding", method="ablation", bootstrap=5, pruning=False, layer_in=False,
                           min_count=1, figures=False)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    model = ModelConfig(name="tiny-mlm", name_or_path=str(d), device="cpu", random_init=True, init_seed=5)
    result = task.run(model, DataConfig(kind=DataKind.grammar, n_sentences=6), ext, imp, HeadsConfig(), 0,
                      RunOutput(tmp_path / "run", Recorder()))
    assert result.metrics["model"] == "tiny-mlm-random5"
    assert set(read_table(tmp_path / "run", "importance")["model"]) == {"tiny-mlm-random5"}
