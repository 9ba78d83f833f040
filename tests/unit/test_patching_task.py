"""``task=patching`` end to end on tiny random checkpoints saved like hub models: a BERT whose WordPiece vocabulary
holds the pairs' words (probe readout, the target masked) and a Llama with its causal-LM head and a byte-level BPE
(logit readout). The tables carry the schema's columns, the residual stream patched at the first layer's input at
the cue is the corrupt run (the sides differ nowhere else), and the metrics name the clean run's accuracy."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from mixing_oracle import randomise
from tokenizers_synth import byte_level_bpe, save

from probing import schema
from probing.config import PatchingConfig, RunConfig, TaskConfig, TaskName
from probing.corpus import minimal_pairs as mp
from probing.corpus.minimal_pairs import generate_pairs
from probing.errors import ProbingError
from probing.tasks.base import RunOutput
from probing.tasks.patching import from_config
from probing.tracking import make_tracker

KINDS = ["agreement", "agreement_pp", "agreement_relative"]


def _lexicon() -> list[str]:
    words = {"the", "that", "."}
    for d in (mp.SUBJECTS, mp.VERBS, mp.ATTRACTORS):
        words |= set(d) | set(d.values())
    words |= set(mp.PREPS) | set(mp.PAST) | set(mp.ADJS) | set(mp.DETERMINERS) | set(mp.DETERMINERS.values())
    words |= set(mp.GENDERED) | {v[0] for v in mp.GENDERED.values()} | {v[1] for v in mp.GENDERED.values()}
    words |= set(mp.INTRANSITIVE_PAST) | set(mp.REFLEXIVE_VERBS) | {"themselves"}
    return sorted(words)


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    d = tmp_path_factory.mktemp("pairs_bert")
    (d / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _lexicon()) + "\n")
    BertTokenizerFast.from_pretrained(str(d), do_lower_case=True).save_pretrained(str(d))
    cfg = BertConfig(vocab_size=5 + len(_lexicon()), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(0)
    randomise(BertModel(cfg), seed=1).eval().save_pretrained(str(d))
    return d


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    d = tmp_path_factory.mktemp("pairs_llama")
    sentences = [p.clean.words for p in generate_pairs(KINDS, 300, 11)] + [p.corrupt.words for p in
                                                                           generate_pairs(KINDS, 300, 11)]
    vocab = save(byte_level_bpe(sentences, vocab_size=600), d)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64, pad_token_id=0,
                      tie_word_embeddings=False)
    torch.manual_seed(0)
    randomise(LlamaForCausalLM(cfg), seed=2).eval().save_pretrained(str(d))
    return d


def _run(tmp_path, model_dir, name, **patching):
    cfg = RunConfig(task=TaskConfig(name=TaskName.patching),
                    patching=PatchingConfig(**{"n_pairs": 24, "bootstrap": 50, "readout_seeds": 2, "probe_pairs": 60,
                                               "top_k": 3, "figures": False, "kinds": KINDS, **patching}))
    cfg.model.name, cfg.model.name_or_path, cfg.model.device = name, str(model_dir), "cpu"
    out = RunOutput(tmp_path, make_tracker(cfg.logger, {}, tmp_path, None))
    return from_config(cfg, out)


def _check_tables(tmp_path, n_layers=2, n_heads=4):
    heads = pd.read_csv(tmp_path / "patching.csv")
    assert list(heads.columns) == list(schema.PATCHING_KEYS + ("position", "layer", "head")) + list(
        schema.PATCHING.metrics[:1]) + list(schema.PATCHING.metrics[1:])
    assert set(heads["position"]) == {"all", "target", "cue", "attractor"}
    assert len(heads) == 4 * n_layers * n_heads
    resid = pd.read_csv(tmp_path / "patching_residual.csv")
    first = resid[(resid["layer"] == 0)].set_index("position")["effect"]
    np.testing.assert_allclose(first[["all", "cue"]], 1.0, atol=1e-4)  # only the cue differs between the sides
    pairs = pd.read_parquet(tmp_path / "patching_pairs.parquet")
    one = pairs[(pairs.position == "all")]
    # the table's effect is the ratio of the per-pair means (readouts averaged)
    g = one.groupby(["readout_seed", "layer", "head"])[["patched", "clean", "corrupt"]].mean()
    ratio = ((g.patched - g.clean) / (g.corrupt - g.clean)).groupby(["layer", "head"]).mean()
    got = heads[heads.position == "all"].set_index(["layer", "head"])["effect"]
    np.testing.assert_allclose(ratio.loc[got.index], got, rtol=1e-6)
    top = pd.read_csv(tmp_path / "patching_top.csv")
    assert len(top) == 3 and (top["n_pairs"] == 12).all()
    atlas = pd.read_csv(tmp_path / "patching_atlas.csv")
    assert len(atlas) == n_layers * n_heads and atlas["attention_accuracy"].between(0, 1).all()
    return heads


def test_an_encoder_is_read_by_probes_trained_on_held_out_pairs(tmp_path, bert_dir):
    result = _run(tmp_path, bert_dir, "pairs-bert")
    m = result.metrics
    assert m["readout"] == "probe" and m["n_pairs"] == 24 and m["readout_seeds"] == 2
    # 8 heads at alpha 0.05 need 159 resamples (1/(1+B) < 0.05/8); the run drew 50
    assert m["power"] == {"resamples": 50, "tests": 8, "resamples_needed": 159, "enough": False}
    assert 0 <= m["clean_accuracy"] <= 1 and "attribution_spearman" in m
    heads = _check_tables(tmp_path)
    assert heads["effect_seed_sd"].notna().all()  # two probe seeds


def test_a_decoder_is_read_by_its_own_logits(tmp_path, llama_dir):
    result = _run(tmp_path, llama_dir, "pairs-llama")
    m = result.metrics
    assert m["readout"] == "logits" and m["n_pairs"] + m["n_pairs_skipped"] == 24
    heads = _check_tables(tmp_path)
    assert heads["effect_seed_sd"].isna().all()  # one readout: the model's logits
    saved = json.loads(json.dumps(m))  # metrics.json-ready
    assert saved["top_heads"][0]["layer"] in (0, 1)


def test_logits_on_a_model_without_a_causal_lm_head_is_one_line(tmp_path, bert_dir):
    with pytest.raises(ProbingError, match="patching.readout=logits: model pairs-bert has no trained causal-LM head"):
        _run(tmp_path, bert_dir, "pairs-bert", readout="logits")


def test_the_dashboard_has_the_effect_maps_and_the_atlas_with_hover_per_head(tmp_path, bert_dir):
    from probing.report.dashboard import write_dashboard

    result = _run(tmp_path, bert_dir, "pairs-bert")
    (tmp_path / schema.METRICS_FILE).write_text(json.dumps(result.metrics))  # what tasks.run writes last
    html = write_dashboard([tmp_path], tmp_path / "dashboard.html").read_text()
    assert "id='patching'" in html or 'id="patching"' in html
    assert "atlas · " in html and "offset baseline" in html
    atlas = pd.read_csv(tmp_path / "patching_atlas.csv")
    first = atlas.sort_values("effect", ascending=False).iloc[0]
    assert first["quadrant"] in html and "attention accuracy, target → cue" in html
    assert html.count("patching effects · ") >= 1


def test_the_atlas_is_drawn_per_relation_of_the_target_cue_arc(tmp_path, bert_dir):
    result = _run(tmp_path, bert_dir, "pairs-bert", kinds=["agreement", "determiner", "reflexive"], n_pairs=36,
                  positions=["all", "cue"], residual=False)
    atlas = pd.read_csv(tmp_path / "patching_atlas.csv")
    assert set(atlas["relation"]) == {"nsubj", "det", "no arc"}  # a reflexive and its antecedent share no arc
    assert set(result.metrics["atlas"]) == {"nsubj", "det", "no arc"}
    assert (atlas.groupby("relation").size() == 8).all()  # every head, once a relation
