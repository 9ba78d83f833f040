"""``extract.measures``: one store per measure from one pass, the attention store's key as before, stores
extended without rebuilding what exists, and word-level maps that are the piece-level measures pooled."""

from __future__ import annotations

import functools
import hashlib
import json

import numpy as np
import pytest
import torch
from test_store_extract import TEXTS, cfg, corpus

from probing.alignment import pool_attention
from probing.config import Measure, Pooling
from probing.errors import ProbingError
from probing.extract import extract, store_dir, store_key
from probing.mixing import capture, compute, needs
from probing.store import FORMAT_VERSION

SOME = [Measure.attention, Measure.norm, Measure.alti, Measure.value_zeroing, Measure.rollout]


def test_attention_key_is_the_one_from_before_measures(tiny_encoder, tmp_path):
    """The attention store's fingerprint hashes exactly the inputs it hashed before measures existed, so
    existing caches are found; any other measure is keyed apart and named in its directory."""
    c, conf = corpus(), cfg(tmp_path)
    key, inputs = store_key(tiny_encoder.identity, c, conf, Measure.attention)
    before = {"format": FORMAT_VERSION, "model": tiny_encoder.identity, "corpus": c.fingerprint(),
              "n_sentences": len(c), "pooling": "mean_sum", "max_length": None, "store_dtype": "float32"}
    assert inputs == before
    assert key == hashlib.sha256(json.dumps(before, sort_keys=True, default=str).encode()).hexdigest()[:16]
    norm_key, norm_inputs = store_key(tiny_encoder.identity, c, conf, Measure.norm)
    assert norm_key != key and norm_inputs["measure"] == "norm"
    assert store_dir("tiny", c, conf, key, Measure.attention).name == f"tiny-tiny-x-{key}"
    assert store_dir("tiny", c, conf, norm_key, Measure.norm).name == f"tiny-tiny-x-norm-{norm_key}"


def test_one_pass_gives_a_store_per_measure(tiny_encoder, tmp_path):
    alone = extract(tiny_encoder, corpus(), cfg(tmp_path / "alone"))
    report = extract(tiny_encoder, corpus(), cfg(tmp_path / "all", measures=SOME))
    assert list(report.stores) == SOME and report.store is report.stores[Measure.attention]
    assert len({s.dir for s in report.stores.values()}) == len(SOME)
    for m, store in report.stores.items():
        assert store.measure == m.value and len(store) == len(TEXTS)
        assert store.num_heads == (4 if m in (Measure.attention, Measure.norm) else 1)
    att = report.stores[Measure.attention]
    for i in att.indices:
        np.testing.assert_array_equal(att.maps(i), alone.store.maps(i))
        for m in (Measure.alti, Measure.value_zeroing, Measure.rollout):
            np.testing.assert_allclose(report.stores[m].maps(i).sum(-1), 1.0, atol=1e-5)
    norm = report.stores[Measure.norm].maps(1)
    assert not np.allclose(norm.sum(-1), 1.0)  # not renormalised


def test_word_maps_are_the_piece_measures_pooled(tiny_encoder, tmp_path):
    """The norm and rollout stores hold the piece-level measures of probing.mixing pooled with the pooling
    rule of attention (``first``: norm rows not renormalised, rollout rows are)."""
    c = corpus()
    report = extract(tiny_encoder, c, cfg(tmp_path, measures=[Measure.norm, Measure.rollout], pooling="first"))
    i = 5  # "a dog saw the cat on the mat , running happily": split words
    tok = tiny_encoder.tokenize([c[i].words])[0]
    with capture(tiny_encoder.model) as cap:
        _, pos, m = tiny_encoder.attention([tok])
    with torch.inference_mode():
        maps = compute([Measure.norm, Measure.rollout], cap.pieces())
    for measure, stochastic in ((Measure.norm, False), (Measure.rollout, True)):
        expected = pool_attention(maps[measure], pos, m, Pooling.first, stochastic)[0].numpy()
        np.testing.assert_allclose(report.stores[measure].maps(i), expected, atol=1e-5, rtol=1e-5)
    assert len(tok.input_ids) > tok.n_positions  # the sentence has split words, so pooling did something


def test_adding_a_measure_reuses_the_stores_that_exist(tiny_encoder, tmp_path, monkeypatch):
    import probing.extract as ex

    first = extract(tiny_encoder, corpus(), cfg(tmp_path))
    shards = sorted(p.name for p in first.store.dir.iterdir())
    asked = []
    real = ex.batch_maps

    def spy(encoder, batch, pooling, measures, *args):
        asked.append(list(measures))
        return real(encoder, batch, pooling, measures, *args)

    monkeypatch.setattr(ex, "batch_maps", spy)
    second = extract(tiny_encoder, corpus(), cfg(tmp_path, measures=[Measure.attention, Measure.globenc]))
    assert not second.reused and second.store.dir == first.store.dir
    # untouched: the same files (the reuse is recorded in .last_used, for probing-cache)
    assert sorted(p.name for p in first.store.dir.iterdir() if p.name != ".last_used") == shards
    assert asked and all(a == [Measure.globenc] for a in asked)  # only the missing measure was computed
    asked.clear()
    third = extract(tiny_encoder, corpus(), cfg(tmp_path, measures=[Measure.globenc, Measure.attention]))
    assert third.reused and not asked and third.store.measure == "globenc"


def test_empty_measures_is_one_line(tiny_encoder, tmp_path):
    with pytest.raises(ProbingError, match="extract.measures is empty"):
        extract(tiny_encoder, corpus(), cfg(tmp_path, measures=[]))


def test_heads_reads_the_store_of_heads_measure(tiny_model_dir, tmp_path):
    """``heads.measure=alti`` builds the ALTI store beside the attention store (extract.measures lacks it) and
    every table the task writes carries the measure; the per-layer store has one "head" per layer."""
    from omegaconf import OmegaConf
    from test_heads_task import Recorder

    from probing.config import DataConfig, DataKind, ExtractConfig, HeadsConfig, ModelConfig
    from probing.results import read_table
    from probing.tasks import heads as heads_task
    from probing.tasks.base import RunOutput

    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    data = DataConfig(kind=DataKind.grammar, n_sentences=12)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    h = HeadsConfig(measure=Measure.alti, min_count=1, bootstrap=0, figures=False, distance_sentences=5,
                    tree_sentences=5)
    result = heads_task.run(model, data, ext, h, 0, RunOutput(tmp_path / "run", Recorder()))
    # the corpus's ALTI store, and the ALTI maps of the induction detector's repeated sequences
    assert [(s["corpus"], s["measure"]) for s in result.stores] == [("grammar", "alti"), ("grammar-induction", "alti")]
    assert result.metrics["measure"] == "alti" and result.metrics["n_heads"] == 1
    for name in ("heads", "patterns", "trees"):
        df = read_table(tmp_path / "run", name)
        assert set(df["measure"]) == {"alti"} and set(df["head"]) == {0}, name
    built = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir() and p.name != "corpora"
                   and "-induction-" not in p.name)
    assert len(built) == 2 and sum("-alti-" in n for n in built) == 1


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A pre-LN, grouped-query (2 key/value heads for 4) checkpoint with the test WordPiece vocabulary."""
    from conftest import TINY_VOCAB, load
    from families import build
    from transformers import BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_llama")
    (d / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    BertTokenizerFast.from_pretrained(str(d), do_lower_case=True).save_pretrained(str(d))
    build("llama", vocab=len(TINY_VOCAB)).save_pretrained(str(d))
    return load(str(d), "tiny-llama")


def _reference_extraction(monkeypatch) -> None:
    """Extraction the plain way, for reference: every layer's measures computed and stacked before pooling,
    the values (not their norms) and the heads' context vectors captured, pooled by scatter-adds."""
    import probing.extract as ex

    monkeypatch.setattr(ex, "pool_attention", functools.partial(pool_attention, kernel=False))
    monkeypatch.setattr(ex, "layer_maps", compute)
    monkeypatch.setattr(ex, "needs", lambda ms: "norm" if needs(ms) == "value_norms" else needs(ms))
    monkeypatch.setattr(ex, "capture", lambda model, need, heads: capture(model, need))


@pytest.mark.parametrize("family", ["bert", "llama"])
@pytest.mark.parametrize("pooling", ["mean_sum", "first"])
def test_stores_are_byte_identical_however_the_batch_is_computed(family, pooling, tiny_encoder, tiny_llama,
                                                                 tmp_path, monkeypatch):
    """A per-head measure computed layer by layer as it is pooled, its norms taken in the forward pass, the
    compiled pooling kernel and the last layer's feed-forward block skipped (for the decoder, its ``mlp``
    zeroed in the pass) store the bytes that stacking every layer's maps, scatter-adds and the whole model
    store (float16, the default store dtype)."""
    encoder = tiny_encoder if family == "bert" else tiny_llama
    measures = [Measure.attention, Measure.norm, Measure.rollout, Measure.alti, Measure.value_zeroing]
    conf = dict(measures=measures, pooling=pooling, store_dtype="float16")
    with monkeypatch.context() as patched:
        _reference_extraction(patched)
        before = extract(encoder, corpus(), cfg(tmp_path / "before", skip_last_ffn=False, **conf))
    for norms_only in (False, True):  # norm alone: only the norms are captured
        now = extract(encoder, corpus(), cfg(tmp_path / f"now{norms_only}", **conf))
        assert encoder._ffn_skipped
        for m in (measures[:2] if norms_only else measures):
            shards = sorted(p.name for p in before.stores[m].dir.glob("shard-*"))
            assert shards and shards == sorted(p.name for p in now.stores[m].dir.glob("shard-*"))
            for name in shards:
                was, got = (before.stores[m].dir / name).read_bytes(), (now.stores[m].dir / name).read_bytes()
                assert was == got, (m, name)
        conf["measures"] = measures[:2]


def test_a_decoders_last_mlp_is_zeroed_in_the_pass_only(tiny_llama):
    """Skipping the last feed-forward block of a decoder leaves every attention map and every hidden state
    below the last as they were, and the ``mlp`` module itself intact outside the model's pass (the mixing
    measures call it)."""
    tiny_llama.restore_last_ffn()
    batch = tiny_llama.tokenize([t.split() for t in TEXTS[:3]])
    full, _, _, states = tiny_llama.forward(batch, hidden=True)
    assert tiny_llama.skip_last_ffn()
    try:
        skipped, _, _, skipped_states = tiny_llama.forward(batch, hidden=True)
        mlp = tiny_llama._skipped_mlp
        h = torch.randn(1, 3, tiny_llama.hidden_size)
        assert mlp(h).abs().sum() > 0  # itself outside the pass
    finally:
        tiny_llama.restore_last_ffn()
    assert torch.equal(full, skipped)
    assert all(torch.equal(a, b) for a, b in zip(states[:-1], skipped_states[:-1]))
    assert not torch.equal(states[-1], skipped_states[-1])  # the last layer's block did not run


def test_the_summary_says_which_stores_this_run_built(tiny_encoder, tmp_path):
    """Adding a measure to an extracted corpus builds its store alone, and the console says so: the attention
    store is reused, the norm store built."""
    from probing.tasks.store_summary import describe_store

    c = corpus()
    extract(tiny_encoder, c, cfg(tmp_path))
    report = extract(tiny_encoder, c, cfg(tmp_path, measures=[Measure.attention, Measure.norm]))
    assert report.built == (Measure.norm,) and not report.reused
    text = describe_store(report, c)
    n = len(TEXTS)
    assert f"\n  reused (already built): {n} of {n} sentences" in text
    assert text.splitlines()[-1].endswith("MiB, built)") and "norm store:" in text.splitlines()[-1]
    again = describe_store(extract(tiny_encoder, c, cfg(tmp_path, measures=[Measure.attention, Measure.norm])), c)
    assert "reused (already built)" in again and again.splitlines()[-1].endswith("MiB, reused)")
