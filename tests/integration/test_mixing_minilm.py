"""Context-mixing identities on the bundled MiniLM (all-MiniLM-L6-v2), on a padded batch of real sentences."""

from __future__ import annotations

import pytest
import torch
from conftest import load
from mixing_oracle import naive_value_zeroing, per_head_values, run

from probing.config import Measure
from probing.mixing import compute
from probing.mixing import measures as M

SENTENCES = [["The", "cat", "sat", "on", "the", "mat", "."],
             "I am going to deposit my money at the bank .".split()]


@pytest.mark.slow
def test_minilm_identities_and_value_zeroing():
    enc = load("bundled:minilm", "minilm-mixing")  # its own copy: nothing has bypassed a feed-forward block
    model = enc.model.cpu()
    toks = enc.tokenize(SENTENCES)
    t = max(len(x.input_ids) for x in toks)
    ids = torch.zeros((2, t), dtype=torch.long)
    mask = torch.zeros((2, t), dtype=torch.long)
    for b, x in enumerate(toks):
        ids[b, :len(x.input_ids)] = torch.tensor(x.input_ids)
        mask[b, :len(x.input_ids)] = 1
    pieces, attentions, ln_in, ln_out = run(model, ids, mask)
    real = mask.bool()
    assert len(pieces) == 6 and pieces[0].probs.shape[1] == 12
    for k, p in enumerate(pieces):
        assert (M.ln1_input(p) - ln_in[k])[real].abs().max().item() < 1e-4
        pre = M.ln1_input(p)
        scale = p.ln1.scale(pre)
        total = (p.ln1.linear(M.mixed_vectors(p, slice(None)), scale[:, :, None]).sum(2)
                 + p.ln1.linear(p.b_o.expand_as(pre), scale) + p.ln1.bias)
        assert (total - ln_out[k])[real].abs().max().item() < 1e-4
        f = per_head_values(model, k, p.x, 12)
        torch.testing.assert_close(M.norm(p), p.probs * f.norm(dim=-1).unsqueeze(2), atol=1e-5, rtol=1e-4)
    n = len(toks[1].input_ids)
    for k in (0, 5):
        naive = naive_value_zeroing(model, k, pieces[k].x[1:, :n])
        torch.testing.assert_close(M.value_zeroing(pieces[k])[1, 0, :n, :n], naive, atol=5e-4, rtol=1e-3)
    out = compute(list(Measure), pieces)
    for m, a in out.items():
        assert torch.isfinite(a).all(), m
