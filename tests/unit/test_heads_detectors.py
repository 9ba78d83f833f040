"""Head detectors: a planted previous-word head scores 1 with a small adjusted p-value while a uniform head sits
exactly at its null; the causal nulls differ from the bidirectional ones as worked by hand; the detectors table
has its columns; induction sequences are a random sequence repeated twice, and a tiny random decoder's heads are
scored on them inside ``task=heads``."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf
from test_heads_task import Recorder

from probing import schema
from probing.config import DataConfig, Detector, ExtractConfig, HeadsConfig, ModelConfig, Multiplicity
from probing.corpus import Corpus, Sentence
from probing.heads.detectors import DetectorTotals, detector_table, induction_corpus, reachable, targets
from probing.results import read_table
from probing.store import AttentionStore, write_manifest
from probing.store.shards import ShardWriter
from probing.tasks.base import RunOutput
from probing.tasks.heads import analyse


def _corpus(lengths) -> Corpus:
    """Sentences of these lengths; the last word of each is punctuation, the first word is repeated last but one."""
    sents = []
    for s, n in enumerate(lengths):
        words = [f"w{s}_{i}" for i in range(n - 1)] + ["."]
        words[n - 2] = words[0].upper()  # a duplicate (case folded) of the first word
        upos = ("NOUN",) * (n - 1) + ("PUNCT",)
        sents.append(Sentence(f"s{s}", tuple(words), upos=upos))
    return Corpus("toy", "dev", tuple(sents))


def _maps(n: int) -> np.ndarray:
    """``(1, 3, n + 2, n + 2)`` over [CLS] w.. [SEP]: head 0 a perfect previous-word head (the first word looks
    at [CLS]), head 1 uniform over every position, head 2 all on [SEP] but a quarter on itself."""
    m = n + 2
    a = np.zeros((1, 3, m, m))
    a[0, 0, np.arange(1, m - 1), np.arange(0, m - 2)] = 1.0
    a[0, 0, [0, m - 1], 0] = 1.0
    a[0, 1] = 1.0 / m
    a[0, 2, :, m - 1] = 0.75
    a[0, 2, np.arange(m), np.arange(m)] += 0.25
    return a


def _store(path, corpus: Corpus, causal: bool = False) -> AttentionStore:
    path.mkdir(parents=True, exist_ok=True)
    w = ShardWriter(path, "float32", shard_mb=0)
    for i, s in enumerate(corpus):
        w.add(i, _maps(len(s)), len(s), 1)
    w.flush()
    write_manifest(path, {"key": "toy", "inputs": {"pooling": "mean_sum"}, "model_name": "planted",
                          "corpus_name": corpus.name, "split": corpus.split, "n_sentences": len(corpus),
                          "num_layers": 1, "num_heads": 3, "store_dtype": "float32", "causal": causal,
                          "special_tokens": ["[CLS]", "[SEP]"], "skipped": []})
    return AttentionStore(path)


LENGTHS = (3, 4, 5, 6, 7, 8) * 4


def test_a_planted_previous_word_head_passes_and_a_uniform_head_sits_at_its_null(tmp_path):
    corpus = _corpus(LENGTHS)
    t = detector_table(_store(tmp_path / "store", corpus), corpus, [Detector.previous, Detector.self], ["PUNCT"],
                       200, 0.95, 0, Multiplicity.bh, 0.05, 0.1, 4.0).set_index(["detector", "layer", "head"])
    prev, uniform = t.loc[("previous", 0, 0)], t.loc[("previous", 0, 1)]
    # null: each word row's mass on words (n / (n + 2) for the uniform head, (n - 1) / n of rows for the
    # previous-word head, whose first word looks at [CLS]) over the n reachable words, for queries 1..n-1
    lens = np.array(LENGTHS, dtype=float)
    assert prev.score == 1.0 and prev.null == pytest.approx(np.mean(1 / lens))
    assert prev.ci_low == prev.ci_high == 1.0 and prev.p == pytest.approx(1 / 201) and prev.passes
    # to the bit (the chunks are read in float16, hence the tolerance against 1 / (n + 2))
    assert uniform.score == uniform.null == pytest.approx(np.mean(1 / (lens + 2)), rel=1e-3)
    assert uniform.p == 1.0 and not uniform.passes
    assert t.loc[("previous", 0, 0), "n_queries"] == int((lens - 1).sum())
    # head 2 puts a quarter on itself: self score 0.25 against a null of 0.25 / n
    own = t.loc[("self", 0, 2)]
    assert own.score == pytest.approx(0.25) and own.null == pytest.approx(np.mean(0.25 / lens)) and own.passes
    assert not t.loc[("self", 0, 0), "passes"]  # the previous-word head never attends to itself
    # its gain, about 0.2, is no head of that kind under a pre-set effect of 0.3 (the test is of gain > 0.3)
    strict = detector_table(_store(tmp_path / "strict", corpus), corpus, [Detector.self], ["PUNCT"], 200, 0.95, 0,
                            Multiplicity.bh, 0.05, 0.3, 4.0).set_index(["detector", "layer", "head"])
    assert own.score - own.null == pytest.approx(0.25 - np.mean(0.25 / lens))
    assert strict.loc[("self", 0, 2), "p"] == 1.0 and not strict.loc[("self", 0, 2), "passes"]


def _one_sentence(causal: bool, detector: Detector, punct=None, forms=None, n: int = 4):
    """Totals of one sentence whose every query attends uniformly over the keys it reaches."""
    reach = reachable(np.array([n]), n, causal).astype(float)
    a = (reach / reach.sum(-1, keepdims=True))[:, None, None]  # (1, 1, 1, n, n)
    tot = DetectorTotals([detector], 1, None)
    tot.add(np.array([0]), a, np.array([n]), causal, True, punct, forms)
    return float(tot.score[0, 0] / tot.sentences[0]), float(tot.null[0, 0] / tot.sentences[0])


def test_the_causal_null_is_the_uniform_mass_over_the_left_context_worked_by_hand():
    # previous word, 3 words: bidirectional queries 1, 2 reach 3 words: 1/3; causal: 1/2 and 1/3 -> 5/12
    assert _one_sentence(False, Detector.previous, n=3) == pytest.approx((1 / 3, 1 / 3))
    assert _one_sentence(True, Detector.previous, n=3) == pytest.approx((5 / 12, 5 / 12))
    # punctuation "a , b .": bidirectional 2 of 4 for every query; causal: word 0 reaches none (no query),
    # then 1/2, 1/3, 2/4 -> 4/9
    punct = np.array([[False, True, False, True]])
    assert _one_sentence(False, Detector.punctuation, punct=punct) == pytest.approx((0.5, 0.5))
    assert _one_sentence(True, Detector.punctuation, punct=punct) == pytest.approx((4 / 9, 4 / 9))
    # first word, queries 1..3: 1/4 each, causal 1/2, 1/3, 1/4
    assert _one_sentence(True, Detector.first, n=4)[1] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    # duplicate "x y x x": query 2 has one earlier copy, query 3 two; causal 1/3, 2/4; bidirectional 1/4, 2/4
    forms = np.array([[0, 1, 0, 0]])
    assert _one_sentence(True, Detector.duplicate, forms=forms)[1] == pytest.approx((1 / 3 + 2 / 4) / 2)
    assert _one_sentence(False, Detector.duplicate, forms=forms)[1] == pytest.approx((1 / 4 + 2 / 4) / 2)
    # next word: nothing a causal query reaches
    assert not targets(Detector.next, np.array([4]), 4, True).any()
    # induction, "a b c a b c": queries 3, 4, 5 target keys 1, 2, 3
    t = targets(Detector.induction, np.array([6]), 6, True)[0]
    assert [tuple(np.flatnonzero(row)) for row in t] == [(), (), (), (1,), (2,), (3,)]


def test_the_detectors_table_has_its_columns_and_drops_next_for_a_causal_store(tmp_path):
    corpus = _corpus(LENGTHS[:6])
    h = OmegaConf.structured(HeadsConfig(bootstrap=100, figures=False, distances=False, trees=False, patterns=False,
                                         min_count=1))
    m = analyse(corpus, _store(tmp_path / "store", corpus), h, 0, RunOutput(tmp_path / "run", Recorder())).metrics
    t = read_table(tmp_path / "run", "detectors")
    wanted = ["detector", "layer", "head", "score", "null", "ci_low", "ci_high", "p_adjusted"]
    assert set(wanted) <= set(t.columns)
    assert list(t.columns) == list(schema.DETECTORS.keys + schema.DETECTORS.metrics)
    assert sorted(set(t.detector)) == sorted(str(d) for d in Detector if d is not Detector.induction)
    assert len(t) == 6 * 3 and m["detector_heads"]["previous"] == 1
    causal = _store(tmp_path / "causal", corpus, causal=True)
    got = detector_table(causal, corpus, list(Detector)[:-1], ["PUNCT"], 0, 0.95, 0, Multiplicity.bh, 0.05, 0.1, 4.0)
    assert "next" not in set(got.detector) and got.ci_low.isna().all() and got.p_adjusted.isna().all()


def test_induction_sequences_repeat_a_random_sequence_of_distinct_corpus_words():
    corpus = Corpus("toy", "dev", tuple(Sentence(f"s{i}", tuple(f"w{chr(97 + i)}{chr(97 + j)}" for j in range(10)) + (".",))
                                        for i in range(5)))
    got = induction_corpus(corpus, 30, [4, 7], seed=3)
    assert len(got) == 30 and got.name == "toy-induction"
    vocab = {w for s in corpus for w in s.words}
    for s in got:
        k = len(s) // 2
        assert len(s) % 2 == 0 and 4 <= k <= 7 and s.words[:k] == s.words[k:] and len(set(s.words[:k])) == k
        assert set(s.words) <= vocab - {"."}
    assert {len(s) // 2 for s in got} == set(range(4, 8))
    assert got.fingerprint() == induction_corpus(corpus, 30, [4, 7], seed=3).fingerprint()
    with pytest.raises(Exception, match=r"heads.induction_words=\[4, 70\]: toy has only 50 distinct"):
        induction_corpus(corpus, 3, [4, 70], seed=0)


@pytest.mark.slow
def test_task_heads_scores_induction_on_a_tiny_random_decoder(tmp_path):
    from families import build
    from tokenizers_synth import byte_level_bpe, grammar_sentences, save

    from probing.tasks.heads import run

    d = tmp_path / "tiny_gpt2"
    sentences = grammar_sentences(100)
    build("gpt2", vocab=save(byte_level_bpe(sentences), d, "PreTrainedTokenizerFast")).save_pretrained(str(d))
    model = ModelConfig(name="tiny-gpt2", name_or_path=str(d), device="cpu")
    extract = ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False, store_dtype="float32")
    h = HeadsConfig(bootstrap=50, figures=False, distances=False, trees=False, patterns=False, min_count=1,
                    induction_sequences=12, induction_words=[5, 8])
    res = run(model, DataConfig(n_sentences=20), extract, h, 0, RunOutput(tmp_path / "run", Recorder()))
    t = read_table(tmp_path / "run", "detectors")
    ind = t[t.detector == "induction"]
    assert len(ind) == 2 * 4 and (ind.n_sentences == 12).all()
    assert [s["sentences"] for s in res.stores if s["corpus"] == "grammar-induction"] == [12]
    repeated = AttentionStore(next(p for p in (tmp_path / "cache").iterdir() if "induction" in p.name
                                   and p.is_dir()))
    lengths = repeated.n_words[repeated.indices]
    assert len(lengths) == 12 and (lengths % 2 == 0).all() and set(lengths // 2) <= set(range(5, 9))
    assert int(ind.n_queries.iloc[0]) == int((lengths // 2).sum()) and repeated.causal
    assert "next" not in set(t.detector)
