"""An oracle for the head context vectors of a representation store (unit and integration tests)."""

from __future__ import annotations

import numpy as np

from probing.encoder import Encoder
from probing.store import VectorStore


def check_heads_identity(encoder: Encoder, store: VectorStore, c, indices, atol=1e-5) -> None:
    """Σ_h W_O^h z^h + b_O of the stored word vectors of ``indices`` equals the attention output projection's
    output, captured by a forward hook on it and mean-pooled to positions (a linear map commutes with the
    mean over a word's pieces)."""
    layers = encoder.model.encoder.layer
    for i in indices:
        tok = encoder.tokenize([c[i].words])[0]
        outputs = {}
        hooks = [lay.attention.output.dense.register_forward_hook(
            lambda mod, args, out, k=k: outputs.__setitem__(k, out)) for k, lay in enumerate(layers)]
        try:
            encoder.attention([tok])
        finally:
            for h in hooks:
                h.remove()
        pos = np.asarray(tok.piece_position)
        z = store.vectors(i).astype(np.float64)  # (L, H, M, d)
        for k, lay in enumerate(layers):
            w = lay.attention.output.dense.weight.detach().double().numpy()  # (D, H*d)
            b = lay.attention.output.dense.bias.detach().double().numpy()
            n_heads, d = z.shape[1], z.shape[3]
            written = np.einsum("hmd,ehd->me", z[k], w.reshape(-1, n_heads, d)) + b  # (M, D)
            out = outputs[k][0].double().numpy()  # (T, D)
            expected = np.stack([out[pos == p].mean(0) for p in range(tok.n_positions)])
            np.testing.assert_allclose(written, expected, atol=atol, rtol=1e-4)
