"""Minimal pairs as padded model batches: the clean and the corrupt side of each pair in the same rows, with the
same pieces at the same positions, so a head's slice at a position of one run can be put into the other.

A decoder sees the words before the target and is read at the last piece of the word before it (whose logits
predict the target); an encoder sees the whole sentence with the target replaced by its mask token and is read
at that word. Named positions are word pieces: ``all`` (every real piece, specials included) and the pair's roles
(``target``: for a decoder the word before the target, where it is read; ``cue``, ``subject``, ``attractor``).
A pair whose two sides get different pieces, or that a decoder cannot read (target first, or good and bad with the
same first piece), is left out with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from probing.corpus.minimal_pairs import MinimalPair
from probing.encoder import Encoder, Tokenized, length_batches

ALL = "all"


@dataclass(frozen=True)
class PairBatch:
    """``B`` pairs padded to ``T`` pieces: ``clean``/``corrupt`` model inputs; ``masks[name] (B, T)`` 1 at the
    pieces of a named position (a pair without that role has none); ``read (B, T)`` the weights that pool the read
    word (a decoder: 1 at its last piece; an encoder: the mean of the target's pieces); decoders' ``good``/``bad``
    ``(B,)`` token ids; ``pairs (B,)`` indices into the pair list."""

    clean: dict
    corrupt: dict
    masks: dict
    read: torch.Tensor
    good: torch.Tensor
    bad: torch.Tensor
    pairs: np.ndarray

    @property
    def size(self) -> int:
        return len(self.pairs)


@dataclass(frozen=True)
class _Side:
    clean: Tokenized
    corrupt: Tokenized
    words: dict  # role -> word index in the model's input
    read_word: int
    good: int
    bad: int


def _first_piece(encoder: Encoder, word: str) -> int:
    return encoder.tokenizer(encoder.word_prefix + word, add_special_tokens=False)["input_ids"][0]


def _inputs(pair: MinimalPair, causal: bool, mask_token: str | None) -> tuple[list[str], list[str]]:
    if causal:
        return list(pair.clean.words[:pair.target]), list(pair.corrupt.words[:pair.target])
    clean, corrupt = list(pair.clean.words), list(pair.corrupt.words)
    clean[pair.target] = corrupt[pair.target] = mask_token or ""
    return clean, corrupt


def prepare(encoder: Encoder, pairs: Sequence[MinimalPair], causal: bool) -> list[_Side | str]:
    """Each pair's tokenised sides, or the reason it is left out."""
    mask_token = getattr(encoder.tokenizer, "mask_token", None)
    if not causal and not mask_token:
        raise ValueError(f"{encoder.name}: an encoder read at the masked target needs a mask token")
    words = [_inputs(p, causal, mask_token) for p in pairs]
    toks = encoder.tokenize([w for pair in words for w in pair])
    out: list = []
    for i, p in enumerate(pairs):
        c, k = toks[2 * i], toks[2 * i + 1]
        if isinstance(c, str) or isinstance(k, str):
            out.append(c if isinstance(c, str) else k)
            continue
        if c.input_ids == k.input_ids:
            out.append("the two sides get the same word pieces")
            continue
        if c.piece_position != k.piece_position:
            out.append("the two sides' words get different numbers of word pieces")
            continue
        read = p.target - 1 if causal else p.target
        if read < 0:
            out.append("a decoder cannot read a target that is the first word")
            continue
        n_input = len(words[i][0])
        roles = {r: w for r, w in p.roles.items() if r != "target" and w < n_input}
        roles["target"] = read
        good = bad = -1
        if causal:
            good, bad = _first_piece(encoder, p.good), _first_piece(encoder, p.bad)
            if good == bad:
                out.append(f"{p.good!r} and {p.bad!r} start with the same word piece")
                continue
        out.append(_Side(c, k, roles, read, good, bad))
    return out


def make_pair_batches(encoder: Encoder, sides: Sequence[_Side], indices: Sequence[int], batch_size: int,
                      max_tokens: int, causal: bool, names: Sequence[str]) -> list[PairBatch]:
    """Length-sorted batches of the pairs ``indices`` (their :func:`prepare` sides); ``names``: the positions
    to mask (``all`` and roles)."""
    order = sorted(indices, key=lambda i: len(sides[i].clean.input_ids))
    groups = length_batches([len(sides[i].clean.input_ids) for i in order], batch_size, max_tokens)
    return [_batch(encoder, sides, [order[j] for j in g], causal, names) for g in groups]


def _batch(encoder: Encoder, sides: Sequence[_Side], group: list[int], causal: bool, names: Sequence[str]
           ) -> PairBatch:
    b, t = len(group), max(len(sides[i].clean.input_ids) for i in group)
    ids = torch.full((2, b, t), encoder.pad_id, dtype=torch.long)
    attn = torch.zeros((b, t), dtype=torch.long)
    pos = torch.full((b, t), -1, dtype=torch.long)
    for row, i in enumerate(group):
        s = sides[i]
        n = len(s.clean.input_ids)
        ids[0, row, :n], ids[1, row, :n] = torch.tensor(s.clean.input_ids), torch.tensor(s.corrupt.input_ids)
        attn[row, :n] = 1
        pos[row, :n] = torch.tensor(s.clean.piece_position)
    prefix = torch.tensor([sides[i].clean.prefix for i in group])[:, None]
    word = torch.where(pos >= 0, pos - prefix, -1)  # (B, T) the word of each piece, -1 for specials and padding

    def pieces_of(index: list[int]) -> torch.Tensor:
        return (word == torch.tensor(index)[:, None]).float()

    masks = {ALL: attn.float()}
    for name in names:
        if name != ALL:
            masks[name] = pieces_of([sides[i].words.get(name, -2) for i in group])
    read = pieces_of([sides[i].read_word for i in group])
    if causal:  # the word's last piece
        last = torch.arange(t)[None, :] * read
        read = (torch.arange(t)[None, :] == last.argmax(1, keepdim=True)).float()
    else:
        read = read / read.sum(1, keepdim=True)
    dev = encoder.device
    inputs = [{"input_ids": ids[j].to(dev), "attention_mask": attn.to(dev)} for j in (0, 1)]
    return PairBatch(inputs[0], inputs[1], {k: v.to(dev) for k, v in masks.items()}, read.to(dev),
                     torch.tensor([sides[i].good for i in group], device=dev),
                     torch.tensor([sides[i].bad for i in group], device=dev), np.array(group))
