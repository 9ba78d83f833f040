"""What is measured of a (gated) pass: per sentence and relation group, ``hits`` (correct arcs, or the cosine
to the unablated embedding), ``n`` (arcs, or 1) and ``loss`` (summed cross-entropy, or 1 − cosine), so that
any score over a set of sentences is a ratio of sums (and a bootstrap resample is a weighted sum).

Group 0 is ``all``; the others are the relations of the evaluation corpus (UD labels as they are). A readout
also gives a differentiable per-sentence loss for gradient importance. The ``mlm`` readout scores the model's
own masked-LM head on a fixed set of masked words, the ``lm`` readout a causal LM's next-word prediction.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import torch

from probing.config import Pooling
from probing.corpus import Corpus
from probing.errors import ProbingError
from probing.importance.inputs import Batch, position_vectors, sentence_embeddings
from probing.schema import ALL


@dataclass(frozen=True)
class Stats:
    """Per-replica, per-sentence sums: ``hits`` and ``loss`` ``(R, B, G)``, ``n`` ``(B, G)``."""

    hits: torch.Tensor
    n: torch.Tensor
    loss: torch.Tensor


class Readout(Protocol):
    groups: list[str]
    metric: str  # what score means: accuracy, uas, cosine

    def stats(self, hidden: torch.Tensor, batch: Batch, clean: torch.Tensor) -> Stats: ...

    def loss(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor: ...


@dataclass(frozen=True)
class Arcs:
    """The scored arcs of one batch: sentence row ``b``, dependent and head positions, gold probe class
    (-1: a label the probe never saw) and report group, each ``(A,)``."""

    b: torch.Tensor
    dep: torch.Tensor
    head: torch.Tensor
    label: torch.Tensor
    group: torch.Tensor


def trivial_baselines(metric: str, train: Corpus, corpus: Corpus) -> dict[str, float]:
    """What a readout that reads nothing scores on the evaluation corpus's non-root arcs: ``uas`` (the
    attachment readout) by the chains, every word attached to the word on its left or on its right;
    ``accuracy`` (the relation readout) by the training arcs' most frequent label; ``lm_accuracy`` (the lm
    readout, every word after each sentence's first) by the training sentences' most frequent such word; none
    for the others."""
    if metric == "lm_accuracy":
        seen = Counter(w for s in train for w in s.words[1:])
        if not seen:
            return {}
        top = seen.most_common(1)[0][0]
        scored = [w for s in corpus for w in s.words[1:]]
        return {f"most frequent word ({top!r})": float(np.mean([w == top for w in scored]))} if scored else {}
    arcs = [(w, h, r) for s in corpus for w, (h, r) in enumerate(zip(s.heads or (), s.relations or ())) if h >= 0]
    if not arcs:
        return {}
    w, h = np.array([a[0] for a in arcs]), np.array([a[1] for a in arcs])
    if metric == "uas":
        return {"left_chain": float(np.mean(h == w - 1)), "right_chain": float(np.mean(h == w + 1))}
    if metric == "accuracy":
        labels = [r for s in train for r, g in zip(s.relations or (), s.heads or ()) if g >= 0]
        if labels:
            top = max(set(labels), key=labels.count)
            return {f"majority ({top})": float(np.mean([a[2] == top for a in arcs]))}
    return {}


def relation_groups(corpus: Corpus) -> list[str]:
    """``all`` then every relation of the corpus's non-root arcs, sorted."""
    rels = {r for s in corpus for r, h in zip(s.relations or (), s.heads or ()) if h >= 0}
    return [ALL] + sorted(rels)


def batch_arcs(corpus: Corpus, batch: Batch, classes: dict[str, int], groups: dict[str, int]) -> Arcs:
    """Every non-root arc of the batch's sentences, as position indices (words start at ``prefix``)."""
    rows = []
    for b, (i, pre) in enumerate(zip(batch.sentences, batch.prefix)):
        s = corpus[int(i)]
        for w, (h, r) in enumerate(zip(s.heads, s.relations)):
            if h >= 0:
                rows.append((b, pre + w, pre + h, classes.get(r, -1), groups[r]))
    a = torch.tensor(rows, dtype=torch.long).reshape(-1, 5).to(batch.piece_position.device)
    return Arcs(*a.T)


def _group_sums(values: torch.Tensor, arcs: Arcs, b: int, g: int) -> torch.Tensor:
    """``values (R, A)`` summed per (sentence, group) and into ``all`` (group 0) -> ``(R, B, G)``."""
    r = values.shape[0]
    out = torch.zeros(r, b * g, dtype=values.dtype, device=values.device)
    out.index_add_(1, arcs.b * g + arcs.group, values)
    out.index_add_(1, arcs.b * g, values)
    return out.view(r, b, g)


def _ce(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy ``(R, A)`` of ``logits (R, A, C)`` at ``target (A,)``; 0 where the target is -1."""
    known = target >= 0
    picked = logits.gather(-1, target.clamp(min=0)[None, :, None].expand(logits.shape[0], -1, 1))[..., 0]
    return torch.where(known, torch.logsumexp(logits, -1) - picked, torch.zeros_like(picked))


class _PairReadout:
    """Shared by the relation and arc readouts: arcs of a batch, sums per group."""

    def __init__(self, corpus: Corpus, pooling: Pooling, classes: dict[str, int]):
        if not corpus.has_trees:
            raise ProbingError(f"importance readouts relation and attachment need gold trees; {corpus.name} has none")
        self.corpus, self.pooling, self.classes = corpus, Pooling(pooling), classes
        self.groups = relation_groups(corpus)
        self._gid = {r: i for i, r in enumerate(self.groups)}

    def arcs(self, batch: Batch) -> Arcs:
        return batch_arcs(self.corpus, batch, self.classes, self._gid)

    def _vectors(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        h = hidden if hidden.dtype == torch.float64 else hidden.float()  # half-precision models scored in float32
        x = position_vectors(h, batch.piece_position, batch.n_positions, self.pooling)
        return x.view(-1, batch.size, batch.n_positions, x.shape[-1])  # (R, B, M, D)

    def _scored(self, hidden: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, Arcs, torch.Tensor]:
        """Scores ``(R, A, K)`` of each arc's K choices, the arcs, and each arc's gold choice ``(A,)``."""
        raise NotImplementedError

    def stats(self, hidden: torch.Tensor, batch: Batch, clean: torch.Tensor) -> Stats:
        s, arcs, gold = self._scored(hidden, batch)
        return self._stats(s.argmax(-1) == gold, _ce(s, gold), arcs, batch.size)

    def loss(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        s, arcs, gold = self._scored(hidden, batch)
        out = torch.zeros(batch.size, dtype=s.dtype, device=s.device)
        return out.index_add(0, arcs.b, _ce(s, gold)[0])

    def _stats(self, correct: torch.Tensor, ce: torch.Tensor, arcs: Arcs, b: int) -> Stats:
        g = len(self.groups)
        n = _group_sums(torch.ones(1, len(arcs.b), device=ce.device), arcs, b, g)[0]
        return Stats(_group_sums(correct.float(), arcs, b, g), n, _group_sums(ce, arcs, b, g))


class RelationReadout(_PairReadout):
    """A frozen linear probe from ``[x_dep; x_head]`` (final-layer word vectors) to the UD label."""

    metric = "accuracy"

    def __init__(self, corpus: Corpus, pooling: Pooling, weight: torch.Tensor, bias: torch.Tensor,
                 classes: list[str]):
        super().__init__(corpus, pooling, {c: i for i, c in enumerate(classes)})
        self.weight, self.bias = weight, bias  # (C, 2D), (C,)

    def _scored(self, hidden: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, Arcs, torch.Tensor]:
        x, arcs = self._vectors(hidden, batch), self.arcs(batch)
        feats = torch.cat([x[:, arcs.b, arcs.dep], x[:, arcs.b, arcs.head]], -1)  # (R, A, 2D)
        w, bias = self.weight.to(feats.device), self.bias.to(feats.device)
        return feats @ w.T + bias, arcs, arcs.label


def arc_scores(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """The attachment readout's scores ``(..., M, M)`` of word vectors ``x (..., M, D)``: entry ``[i, j]`` is
    ``s_ij = (x_i U)·(x_j V) + x_j·c``, word j scored as the head of word i (``U, V (D, r)``, ``c (D,)``)."""
    return (x @ u) @ (x @ v).transpose(-1, -2) + (x @ c)[..., None, :]


def candidate_mask(pos: torch.Tensor, prefix: torch.Tensor, n_words: torch.Tensor,
                   dep: torch.Tensor) -> torch.Tensor:
    """``(A, M)``: the candidate heads of each dependent, the other words of its sentence (positions
    ``pos (M,)``; a sentence's words at ``prefix <= position < prefix + n_words``, each ``(A,)`` like ``dep``)."""
    return (pos >= prefix[:, None]) & (pos < (prefix + n_words)[:, None]) & (pos != dep[:, None])


class AttachmentReadout(_PairReadout):
    """A frozen bilinear arc scorer (Dozat and Manning's biaffine form without the MLPs, frozen): every other
    word j of the sentence is scored as the head of word i by :func:`arc_scores`,
    ``s_ij = (x_i U)·(x_j V) + x_j·c`` on final-layer word vectors (``U, V (D, r)``: a rank-r bilinear term;
    ``c (D,)``: how likely j is to be a head at all). The prediction is the best-scoring other word (UAS);
    ``loss`` is the cross-entropy of the softmax over those candidates at the gold head. Root arcs are not
    scored. Fitted by :func:`probing.importance.probes.fit_attachment` (softmax over the candidates, Adam,
    early stopping on a held-out tenth of the training sentences), then frozen."""

    metric = "uas"

    def __init__(self, corpus: Corpus, pooling: Pooling, u: torch.Tensor, v: torch.Tensor, c: torch.Tensor,
                 fit: dict | None = None):
        super().__init__(corpus, pooling, {})
        self.u, self.v, self.c = u, v, c  # (D, r), (D, r), (D,)
        self.fit = fit or {}  # how the fit went (metrics.json: readout_fit)

    def _scored(self, hidden: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, Arcs, torch.Tensor]:
        x, arcs = self._vectors(hidden, batch), self.arcs(batch)
        u, v, c = (w.to(device=x.device, dtype=x.dtype) for w in (self.u, self.v, self.c))
        s = arc_scores(x, u, v, c)[:, arcs.b, arcs.dep]  # (R, A, M): every position as the head of each dependent
        dev = x.device
        ok = candidate_mask(torch.arange(batch.n_positions, device=dev),
                            torch.as_tensor(batch.prefix, device=dev)[arcs.b],
                            torch.as_tensor(batch.n_words, device=dev)[arcs.b], arcs.dep)
        return s.masked_fill(~ok, float("-inf")), arcs, arcs.head


class EmbeddingReadout:
    """The sentence embedding (mean of the last hidden state over all positions): cosine to the unablated
    embedding per sentence (``hits``), ``loss`` 1 − cosine; one group, ``all``."""

    metric = "cosine"
    groups = [ALL]

    def stats(self, hidden: torch.Tensor, batch: Batch, clean: torch.Tensor) -> Stats:
        mask = batch.inputs["attention_mask"]
        e, e0 = sentence_embeddings(hidden.float(), mask), sentence_embeddings(clean.float(), mask)
        cos = torch.nn.functional.cosine_similarity(e.view(-1, batch.size, e.shape[-1]), e0[None], dim=-1)
        return Stats(cos[..., None], torch.ones(batch.size, 1, device=cos.device), (1 - cos)[..., None])

    def loss(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        raise ProbingError("importance.method=gradient with importance.readout=embedding: 1 − cosine to the "
                           "unablated embedding is at its minimum when no head is ablated, so its gradient is 0; "
                           "use importance.method=ablation")


def masked_words(n_words: int, rate: float, seed: int, sentence: int) -> np.ndarray:
    """The words of sentence ``sentence`` (corpus index) that the ``mlm`` readout masks: ``round(rate · n)``
    of its ``n`` words (at least one), drawn without replacement from a generator seeded by (seed, sentence),
    so the set depends on neither batching nor corpus order."""
    k = min(n_words, max(1, int(round(rate * n_words))))
    return np.sort(np.random.default_rng([seed, sentence]).choice(n_words, size=k, replace=False))


class MlmReadout:
    """The model's own masked-LM head on a fixed masked copy of the evaluation batches: every piece of the
    :func:`masked_words` of each sentence replaced by the mask token (always the mask token, no 80/10/10),
    the same masked inputs in every gated pass. Per sentence: ``hits`` masked pieces predicted (top 1),
    ``n`` masked pieces, ``loss`` their summed cross-entropy (score: ``mlm_accuracy``; ``loss_change``: the
    change in masked-word loss per piece); one group, ``all``."""

    metric = "mlm_accuracy"
    groups = [ALL]

    def __init__(self, head: torch.nn.Module, mask_id: int, rate: float, seed: int):
        if not 0 < rate <= 1:
            raise ProbingError(f"importance.mlm_rate={rate}: the share of words masked must be in (0, 1]")
        # frozen: gradient importance differentiates through the head to the gates only
        self.head, self.mask_id, self.rate, self.seed = head.requires_grad_(False), mask_id, rate, seed
        self._targets: dict[bytes, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def mask(self, batches: Sequence[Batch]) -> list[Batch]:
        """The batches with their masked words' pieces set to the mask token (targets kept for scoring)."""
        out = []
        for batch in batches:
            pos = batch.piece_position
            words = [torch.as_tensor(int(pre) + masked_words(int(n), self.rate, self.seed, int(i)), device=pos.device)
                     for i, pre, n in zip(batch.sentences, batch.prefix, batch.n_words)]
            chosen = torch.stack([torch.isin(pos[b], w) for b, w in enumerate(words)])
            ids = batch.inputs["input_ids"]
            rows, cols = chosen.nonzero(as_tuple=True)
            self._targets[batch.sentences.tobytes()] = (rows, cols, ids[rows, cols].clone())
            out.append(dataclasses.replace(batch, inputs={**batch.inputs,
                                                          "input_ids": ids.masked_fill(chosen, self.mask_id)}))
        return out

    def _scored(self, hidden: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Logits ``(R, P, V)`` at the batch's P masked pieces, their sentence rows and target ids ``(P,)``."""
        rows, cols, target = self._targets[batch.sentences.tobytes()]
        h = hidden.view(-1, batch.size, *hidden.shape[1:])[:, rows, cols]  # (R, P, D)
        return self.head(h).float() if h.dtype != torch.float64 else self.head(h), rows, target

    def _per_sentence(self, values: torch.Tensor, rows: torch.Tensor, b: int) -> torch.Tensor:
        out = torch.zeros(values.shape[0], b, dtype=values.dtype, device=values.device)
        return out.index_add_(1, rows, values)

    def stats(self, hidden: torch.Tensor, batch: Batch, clean: torch.Tensor) -> Stats:
        logits, rows, target = self._scored(hidden, batch)
        ce = torch.logsumexp(logits, -1) - logits.gather(-1, target.expand(len(logits), -1)[..., None])[..., 0]
        hits = (logits.argmax(-1) == target).to(ce.dtype)
        n = self._per_sentence(torch.ones(1, len(rows), dtype=ce.dtype, device=ce.device), rows, batch.size)[0]
        return Stats(self._per_sentence(hits, rows, batch.size)[..., None], n[:, None],
                     self._per_sentence(ce, rows, batch.size)[..., None])

    def loss(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        return self.stats(hidden, batch, hidden).loss[0, :, 0]


class LmReadout:
    """The model's own next-word prediction through its frozen causal-LM head, teacher-forced: every word after
    the first of each sentence is scored, each of its pieces predicted from the hidden state of the piece before
    it (so from the words on its left and its own earlier pieces). Per sentence: ``hits`` words whose every
    piece is the head's top-1 prediction, ``n`` words scored, ``loss`` their summed cross-entropy over pieces,
    nats (score: ``lm_accuracy``; ``loss_change``: the change in a word's loss); one group, ``all``. Logits are
    computed for :data:`CHUNK` pieces at a time (a vocabulary of 49k makes them the largest tensor)."""

    metric = "lm_accuracy"
    groups = [ALL]
    CHUNK = 256

    def __init__(self, head: torch.nn.Module):
        self.head = head.requires_grad_(False)  # frozen: gradient importance reaches the gates only
        self._targets: dict[bytes, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]] = {}

    def _of(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int]:
        """The batch's P scored pieces: sentence rows, the columns that predict them (the piece before), target
        ids, each piece's word slot (0..W-1 over the batch's scored words) and W."""
        key = batch.sentences.tobytes()
        if key not in self._targets:
            pos = batch.piece_position
            dev = pos.device
            word = pos - torch.as_tensor(batch.prefix, device=dev)[:, None]
            scored = (word >= 1) & (word < torch.as_tensor(batch.n_words, device=dev)[:, None])
            scored[:, 0] = False  # nothing before the first piece
            rows, cols = scored.nonzero(as_tuple=True)
            slots, slot = torch.unique(rows * (int(word.max()) + 1) + word[rows, cols], return_inverse=True)
            self._targets[key] = (rows, cols - 1, batch.inputs["input_ids"][rows, cols], slot, len(slots))
        return self._targets[key]

    def _pieces(self, hidden: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy and top-1 correctness ``(R, P)`` of every scored piece."""
        rows, cols, target, _, _ = self._of(batch)
        h = hidden.view(-1, batch.size, *hidden.shape[1:])[:, rows, cols]  # (R, P, D)
        ce, ok = [], []
        for a in range(0, len(rows), self.CHUNK):
            logits = self.head(h[:, a:a + self.CHUNK])
            logits = logits.float() if logits.dtype not in (torch.float32, torch.float64) else logits
            t = target[a:a + self.CHUNK].expand(len(logits), -1)[..., None]
            ce.append(torch.logsumexp(logits, -1) - logits.gather(-1, t)[..., 0])
            ok.append(logits.argmax(-1) == t[..., 0])
        if not ce:
            empty = hidden.new_zeros(hidden.shape[0] // batch.size, 0, dtype=torch.float32)
            return empty, empty.bool()
        return torch.cat(ce, 1), torch.cat(ok, 1)

    def stats(self, hidden: torch.Tensor, batch: Batch, clean: torch.Tensor) -> Stats:
        ce, ok = self._pieces(hidden, batch)
        rows, _, _, slot, n_slots = self._of(batch)
        r = ce.shape[0]
        wrong = torch.zeros(r, n_slots, device=ce.device).index_add_(1, slot, (~ok).to(torch.float32))
        word_row = torch.zeros(n_slots, dtype=torch.long, device=ce.device).index_copy_(0, slot, rows)
        hits = torch.zeros(r, batch.size, dtype=ce.dtype, device=ce.device).index_add_(
            1, word_row, (wrong == 0).to(ce.dtype))
        n = torch.zeros(batch.size, dtype=ce.dtype, device=ce.device).index_add_(
            0, word_row, torch.ones(n_slots, dtype=ce.dtype, device=ce.device))
        loss = torch.zeros(r, batch.size, dtype=ce.dtype, device=ce.device).index_add_(1, rows, ce)
        return Stats(hits[..., None], n[:, None], loss[..., None])

    def loss(self, hidden: torch.Tensor, batch: Batch) -> torch.Tensor:
        ce, _ = self._pieces(hidden, batch)
        rows = self._of(batch)[0]
        return torch.zeros(batch.size, dtype=ce.dtype, device=ce.device).index_add(0, rows, ce[0])


def has_lm_head(architectures: list[str]) -> bool:
    """Whether a checkpoint's ``config.architectures`` name a causal-LM head."""
    return any("CausalLM" in a or "LMHeadModel" in a for a in architectures)


def lm_unavailable(model_name: str, architectures: list[str]) -> ProbingError:
    """The one-line error for ``readout=lm`` on a model without a causal-LM head (or with random weights)."""
    arch = ", ".join(architectures) or "no architectures listed"
    return ProbingError(f"importance.readout=lm: model {model_name} ({arch}) has no trained causal-LM head; use "
                        "a decoder such as model=smollm2_q4, or importance.readout=relation, attachment or "
                        "embedding")


def has_mlm_head(architectures: list[str]) -> bool:
    """Whether a checkpoint's ``config.architectures`` name a masked-LM head."""
    return any("MaskedLM" in a or "PreTraining" in a for a in architectures)


def mlm_unavailable(model_name: str, architectures: list[str]) -> ProbingError:
    """The one-line error for ``readout=mlm`` on a model without a masked-LM head."""
    arch = ", ".join(architectures) or "no architectures listed"
    return ProbingError(f"importance.readout=mlm: model {model_name} ({arch}) has no masked-LM head; use "
                        "importance.readout=relation, attachment or embedding")
