"""MiniLM on the first 200 sentences of EWT dev: the stored word-level maps against an independent
per-sentence computation (no batching, pooling by explicit loops over word pieces)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probing.config import ExtractConfig, ModelConfig
from probing.corpus import read_conllu
from probing.extract import extract


def independent_word_attention(encoder, words: tuple[str, ...]) -> np.ndarray:
    """Clark et al.'s rule by hand: sum over the pieces attended to, mean over the attending pieces."""
    tok = encoder.tokenizer
    enc = tok(list(words), is_split_into_words=True, return_tensors="pt")
    with torch.inference_mode():
        out = encoder.model(**enc, output_attentions=True)
    att = torch.stack(out.attentions, 1)[0].float().numpy()  # (L, H, T, T)
    word_ids = enc.word_ids(0)
    groups: list[list[int]] = []
    for t, w in enumerate(word_ids):
        if w is None or t == 0 or word_ids[t - 1] != w:
            groups.append([t])
        else:
            groups[-1].append(t)
    m = len(groups)
    cols = np.stack([att[..., g].sum(-1) for g in groups], -1)  # (L, H, T, m)
    return np.stack([cols[..., g, :].mean(-2) for g in groups], -2).reshape(att.shape[:2] + (m, m))


@pytest.mark.slow
def test_minilm_ewt_dev_first_200(ewt_dir, tmp_path):
    from probing.encoder import Encoder

    corpus = read_conllu(ewt_dir / "en_ewt-ud-dev.conllu", split="dev", strict=True).head(200)
    encoder = Encoder.load(ModelConfig(name="minilm", name_or_path="bundled:minilm"))
    report = extract(encoder, corpus, ExtractConfig(cache_dir=str(tmp_path), progress=False, batch_size=16))
    store = report.store
    assert len(store) == 200 and store.num_layers == 6 and store.num_heads == 12
    # a fresh, untouched model (full last layer)
    reference = Encoder.load(ModelConfig(name="minilm", name_or_path="bundled:minilm"))
    worst = 0.0
    for i in range(200):
        maps = store.maps(i).astype(np.float32)
        assert maps.shape[-1] == len(corpus[i]) + 2
        np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-3)
        expected = independent_word_attention(reference, corpus[i].words)
        worst = max(worst, float(np.abs(maps - expected).max()))
    assert worst <= 2e-3, worst
