"""Representations of the bundled MiniLM on EWT dev sentences: the stored head context vectors,
through the output projection, are the attention block's output; the stored hidden states are the full model's
(its last feed-forward block included), pooled to words."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import load
from representations_oracle import check_heads_identity

from probing.config import DataConfig, DataKind, ExtractConfig, Representation
from probing.corpus import load_corpus
from probing.encoder import resolve_model_path
from probing.extract import extract


@pytest.mark.slow
def test_minilm_heads_and_hidden_in_the_store(ewt_dir, tmp_path):
    enc = load("bundled:minilm", "minilm-reps")  # its own copy: extraction toggles its last FFN
    corpus = load_corpus(DataConfig(kind=DataKind.ud_ewt, dir=str(ewt_dir), limit=24), "dev")
    cfg = ExtractConfig(cache_dir=str(tmp_path), progress=False, store_dtype="float32", batch_size=8,
                        representations=[Representation.hidden, Representation.heads])
    r = extract(enc, corpus, cfg)
    heads, hidden = r.stores[Representation.heads], r.stores[Representation.hidden]
    assert (heads.num_layers, heads.num_heads, heads.dim) == (6, 12, 32) and hidden.layout.lead == (7,)
    split = [i for i in heads.indices if len(enc.tokenize([corpus[int(i)].words])[0].input_ids)
             > len(corpus[int(i)]) + 2]
    picks = [int(split[0]), int(heads.indices[-1])]  # a sentence with split words, and the longest (padded less)
    check_heads_identity(enc, heads, corpus, picks, atol=2e-5)

    from transformers import AutoModel

    full = AutoModel.from_pretrained(resolve_model_path("bundled:minilm"), attn_implementation="eager").eval()
    for i in picks:
        tok = enc.tokenize([corpus[i].words])[0]
        with torch.no_grad():
            out = full(input_ids=torch.tensor([tok.input_ids]), output_hidden_states=True)
        states = torch.stack(out.hidden_states, 1)[0].numpy()  # (7, T, 384)
        pos = np.asarray(tok.piece_position)
        expected = np.stack([states[:, pos == p].mean(1) for p in range(tok.n_positions)], 1)
        np.testing.assert_allclose(hidden.vectors(i), expected, atol=5e-5, rtol=1e-4)
