"""``task=importance``: what does each head do for syntax? Heads are ablated through gates on their context
vectors (:mod:`probing.importance.gates`: ``importance.ablation=mean|zero``) and a readout measures the damage
(``importance.readout``): a frozen relation probe's accuracy per relation, a frozen attachment probe's UAS, the
sentence embedding's cosine, or the model's own masked-LM loss on a fixed masked set (checkpoints with a
masked-LM head only). ``importance.method``: single-head and leave-one-layer-in ablation, the gradient
importance of Michel et al. (2019), or both. Pruning curves (gradient, attention-accuracy and random orders)
and, per relation, the Spearman correlation over heads between attention accuracy (``task=heads``: from
``importance.heads_run``, held fixed, or computed here and resampled with the importance) and ablation
importance, with bootstrap intervals over sentences.

Writes the ``importance``, ``pruning`` and ``importance_link`` tables (and ``heads``, the attention accuracy, when it
is computed here), a scatter per relation and the pruning curves under ``figures/``, and the most important head
per relation in ``metrics.json``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
import torch
from omegaconf import OmegaConf

from probing import schema
from probing.config import (
    Ablation,
    DataConfig,
    DataKind,
    Direction,
    ExtractConfig,
    HeadsConfig,
    ImportanceConfig,
    ImportanceMethod,
    LabelSet,
    Measure,
    ModelConfig,
    ReadoutKind,
    RunConfig,
)
from probing.corpus import Corpus
from probing.corpus.cache import load_corpus_cached
from probing.encoder import architectures, load_encoder, model_label
from probing.errors import ProbingError
from probing.extract import ensure_store
from probing.figures import importance as figures
from probing.heads.bootstrap import resample_counts
from probing.heads.head_accuracy import RelationCounts, accuracy_table, count_relations
from probing.importance.gates import head_means
from probing.importance.inputs import make_batches
from probing.importance.probes import fit_attachment, fit_relation
from probing.importance.pruning import gradient_order, order_settings, random_orders, removed_counts
from probing.importance.readouts import EmbeddingReadout, MlmReadout, has_mlm_head, mlm_unavailable
from probing.importance.scores import evaluate, gradients
from probing.importance.tables import (
    drop_rows,
    gradient_rows,
    kept_groups,
    link_rows,
    normalised_gradient,
)
from probing.paths import absolute
from probing.results import read_table
from probing.tasks.base import RunOutput, TaskResult
from probing.tasks.probe import SINGLE_SPLIT_KINDS
from probing.tasks.store_summary import store_use

log = logging.getLogger(__name__)


def splits(data: DataConfig, imp: ImportanceConfig, cache_dir: str) -> tuple[Corpus, Corpus]:
    """The probe's training corpus and the evaluation corpus. A single-split source (grammar, conllu, text)
    is cut: its last ``importance.eval_fraction`` is evaluated, the rest trains the probe."""
    if DataKind(data.kind) in SINGLE_SPLIT_KINDS:
        corpus = load_corpus_cached(data, None, cache_dir)
        cut = int(round((1 - imp.eval_fraction) * len(corpus)))
        if cut < 1 or cut >= len(corpus):
            raise ProbingError(f"{len(corpus)} sentences of {corpus.name} cannot be cut into train and eval")
        return (Corpus(corpus.name, "train", corpus.sentences[:cut]),
                Corpus(corpus.name, "eval", corpus.sentences[cut:]))
    # data.limit bounds the evaluation sentences; the probe's training set is bounded by its own key
    train = load_corpus_cached(_unlimited(data), imp.train_split, cache_dir)
    return train.head(imp.train_sentences), load_corpus_cached(data, imp.eval_split, cache_dir)


def _unlimited(data: DataConfig) -> DataConfig:
    """``data`` without ``data.limit`` (a typed DictConfig from Hydra, or the dataclass)."""
    if OmegaConf.is_config(data):
        copy = data.copy()
        copy.limit = None
        return copy
    return dataclasses.replace(data, limit=None)


def attention_accuracy(imp: ImportanceConfig, heads: HeadsConfig, model: ModelConfig, corpus: Corpus,
                       extract: ExtractConfig, stores: list, seed: int) -> tuple[pd.DataFrame, Optional[dict]]:
    """Every head's attention accuracy per relation and direction (UD labels as they are; a heads table: relation,
    direction, layer, head, accuracy, its interval...): the heads table of ``importance.heads_run`` (held fixed:
    no resamples), or computed here on the evaluation corpus's attention store, with its accuracy in the
    ``importance.bootstrap`` resamples of :func:`sentence_weights` (``(n, L·H)`` per (relation, direction))
    when the store holds every evaluation sentence."""
    if imp.heads_run:
        table = read_table(Path(absolute(imp.heads_run)), schema.HEADS.name)
        if table is None:
            raise ProbingError(f"importance.heads_run={imp.heads_run}: no {schema.HEADS.name} table there "
                               "(give the run dir of a task=heads run)")
        table = table[(table["label_set"] == LabelSet.as_is.value) & (table["measure"] == Measure.attention.value)]
        return table.reset_index(drop=True), None
    report = ensure_store(model, corpus, extract, Measure.attention)
    stores.append(store_use(report, corpus))
    store = report.store
    directions = [Direction.dep_to_head, Direction.head_to_dep]
    # count_relations draws resample_counts(len(corpus), bootstrap, seed) over corpus order: the very weights
    # of sentence_weights, so the two sides of the link are resampled together
    paired = imp.bootstrap > 0 and np.array_equal(store.indices, np.arange(len(corpus)))
    counts = count_relations(store, corpus, store.indices, directions, list(heads.offsets), [LabelSet.as_is],
                             imp.bootstrap if paired else 0, seed, heads.chunk_words, heads.block_mb)
    counts = counts[LabelSet.as_is]
    table, _ = accuracy_table(counts, directions, list(heads.offsets), store.num_layers, store.num_heads, 1,
                              heads.ci, [])
    return table, (_resampled_accuracy(counts, directions, store.num_layers * store.num_heads) if paired else None)


def _resampled_accuracy(counts: RelationCounts, directions: list[Direction], lh: int) -> dict:
    """``{(relation, direction): (n, L·H)}`` accuracy in each resample (NaN where it drew no arc)."""
    out = {}
    d = len(directions)
    for r, name in enumerate(counts.relations):
        boot = counts.boot[r].astype(np.float64)  # (n, F): D·LH hits, then the arc count
        n = boot[:, d * lh]
        with np.errstate(invalid="ignore", divide="ignore"):
            for j, direction in enumerate(directions):
                out[(name, str(direction))] = np.where(n[:, None] > 0, boot[:, j * lh:(j + 1) * lh]
                                                       / np.maximum(n, 1)[:, None], np.nan)
    return out


def sentence_weights(n_sentences: int, imp: ImportanceConfig, seed: int) -> np.ndarray:
    """``(n, S)`` float resample counts over the evaluation sentences in corpus order (probing's bootstrap:
    :func:`probing.heads.bootstrap.resample_counts`, the draws of ``task=heads`` at the same seed)."""
    return resample_counts(n_sentences, imp.bootstrap, seed).astype(np.float64)


def _labels(method: str, layers, heads) -> list[dict]:
    return [{"method": method, "layer": layer, "head": head} for layer, head in zip(layers, heads)]


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, imp: ImportanceConfig, heads: HeadsConfig,
        seed: int, out: RunOutput) -> TaskResult:
    """Every enabled importance computation of ``imp``, written through ``out``."""
    readout_kind, method = ReadoutKind(imp.readout), ImportanceMethod(imp.method)
    if readout_kind is ReadoutKind.mlm:
        archs = architectures(model)
        if not has_mlm_head(archs) or model.random_init:
            raise mlm_unavailable(model_label(model), archs)
    encoder = load_encoder(model, masked_lm=readout_kind is ReadoutKind.mlm)
    net = encoder.model
    if readout_kind is ReadoutKind.embedding and method is ImportanceMethod.gradient:
        EmbeddingReadout().loss(None, None)  # raises the one-line reason
    want_ablation = method in (ImportanceMethod.ablation, ImportanceMethod.both)
    want_gradient = method in (ImportanceMethod.gradient, ImportanceMethod.both) and readout_kind is not ReadoutKind.embedding
    if method is ImportanceMethod.both and not want_gradient:
        log.info("importance.readout=embedding: no gradient importance (1 − cosine has zero gradient unablated)")
    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    train, corpus = splits(data, imp, extract.cache_dir)
    batches = make_batches(encoder, corpus, imp.batch_size, imp.max_batch_tokens)
    if readout_kind is ReadoutKind.embedding:
        readout: Any = EmbeddingReadout()
    elif readout_kind is ReadoutKind.mlm:
        readout = MlmReadout(encoder.mlm_head, encoder.tokenizer.mask_token_id, imp.mlm_rate, seed)
        batches = readout.mask(batches)  # one masked copy, scored by every gated pass
    else:
        train_batches = make_batches(encoder, train, imp.batch_size, imp.max_batch_tokens)
        fit = fit_relation if readout_kind is ReadoutKind.relation else fit_attachment
        extra = {} if readout_kind is ReadoutKind.relation else {"negatives": imp.attachment_negatives}
        log.info("fitting the frozen %s probe on %d %s sentences ...", readout_kind, len(train), train.split)
        readout = fit(net, train, train_batches, corpus, extract.pooling, imp.C, imp.max_iter, seed=seed, **extra)
    seconds["probe"] = time.perf_counter() - t0
    n_layers, n_heads = encoder.num_layers, encoder.num_heads
    mean = (head_means(net, [b.inputs for b in batches]).to(encoder.device)
            if Ablation(imp.ablation) is Ablation.mean else None)
    # columns in batch order, the order of every per-sentence array below
    weights = sentence_weights(len(corpus), imp, seed)[:, np.concatenate([b.sentences for b in batches])]
    ident = {"model": model_label(model), "corpus": corpus.name, "split": corpus.split, "readout": readout_kind.value,
             "ablation": Ablation(imp.ablation).value}
    metrics: dict[str, Any] = {**ident, "method": method.value, "eval_sentences": len(corpus),
                               "train_sentences": len(train) if readout_kind in (ReadoutKind.relation, ReadoutKind.attachment) else 0,
                               "n_layers": n_layers, "n_heads": n_heads, "conventions": {
                                   "score": readout.metric, "groups": "UD labels as they are; root arcs not scored",
                                   "gradient": "E|dL/dxi| over sentences, divided by its L2 norm within each layer",
                                   "link": "Spearman over heads; interval: bootstrap over sentences"}}
    if readout_kind is ReadoutKind.mlm:
        metrics["conventions"]["mlm"] = (f"round({imp.mlm_rate} x words) of each sentence (at least one; seeded by "
                                         "the run's seed and the sentence) masked, all their pieces set to the "
                                         "mask token, the same in every pass; loss per masked piece")
    stores: list = []
    tables: list[pd.DataFrame] = []
    single = None
    groups = readout.groups

    t = time.perf_counter()
    flat = torch.arange(n_layers * n_heads)
    one = order_settings([], [0], n_layers, n_heads).expand(n_layers * n_heads, -1, -1).clone()
    one.view(-1, n_layers * n_heads)[flat, flat] = 0
    settings, labels = [one], _labels("ablation", flat // n_heads, flat % n_heads)
    if not want_ablation:  # the clean pass alone (its score for metrics.json)
        settings, labels = [one[:0]], []
    if want_ablation and imp.layer_in:
        keep_one = torch.zeros(n_layers, n_layers, n_heads)
        keep_one[torch.arange(n_layers), torch.arange(n_layers)] = 1
        settings.append(keep_one)
        labels += _labels("layer_in", range(n_layers), [None] * n_layers)
    sums = evaluate(net, batches, readout, torch.cat(settings), mean, imp.replicas)
    seconds["ablation"] = time.perf_counter() - t
    keep = kept_groups(groups, sums.n, imp.min_count)
    drop_table, drop, drop_samp = drop_rows(sums, groups, keep, labels, readout.metric, weights, imp.ci)
    clean = sums.clean_hits.sum(0) / np.maximum(sums.n.sum(0), 1)
    metrics[f"clean_{readout.metric}"] = float(clean[0])
    single = drop[: n_layers * n_heads] if want_ablation else None
    if want_ablation:
        tables.append(drop_table)
    if want_gradient:
        t = time.perf_counter()
        grads = gradients(net, batches, readout, mean, torch.ones(n_layers, n_heads))
        seconds["gradient"] = time.perf_counter() - t
        tables.append(gradient_rows(grads, weights, imp.ci))
    importance = pd.concat(tables, ignore_index=True)
    importance = pd.concat([pd.DataFrame({k: [v] * len(importance) for k, v in ident.items()}), importance], axis=1)
    for col in (schema.LAYER, schema.HEAD):
        importance[col] = pd.array(importance[col], dtype="Int64")
    out.table(schema.IMPORTANCE.name, importance[list(schema.IMPORTANCE.keys) + list(schema.IMPORTANCE.metrics)])

    if want_ablation:
        metrics.update(_headline(single, groups, keep, None, n_heads))
    accuracy = acc_samples = None
    if corpus.has_trees and readout_kind is not ReadoutKind.embedding or imp.heads_run:
        t = time.perf_counter()
        accuracy, acc_samples = attention_accuracy(imp, heads, model, corpus, extract, stores, seed)
        seconds["attention_accuracy"] = time.perf_counter() - t
        if not imp.heads_run:  # computed here: kept in the run dir, where the dashboard's scatter reads it
            run_keys = {"model": model_label(model), "corpus": corpus.name, "split": corpus.split,
                        "measure": Measure.attention.value}
            out.table(schema.HEADS.name, accuracy.assign(**run_keys)[list(schema.HEADS.keys)
                                                                      + list(schema.HEADS.metrics)])
    if accuracy is not None and want_ablation:
        link = link_rows(accuracy, single, drop_samp[:, : n_layers * n_heads], groups, keep, n_layers, n_heads,
                         imp.ci, acc_samples)
        metrics["conventions"]["link"] += (
            " of importance and attention accuracy together (the same resamples)" if acc_samples is not None
            else " of the importance, attention accuracy held at its full-sample value (importance.heads_run)")
        metrics.update(_headline(single, groups, keep, accuracy, n_heads))
        out.table(schema.IMPORTANCE_LINK.name, link.assign(**ident)[list(schema.IMPORTANCE_LINK.keys)
                                                                    + list(schema.IMPORTANCE_LINK.metrics)])
        if imp.figures:
            pts = _points(accuracy, single, groups, keep, n_heads)
            for p in figures.link_scatter(pts, link, n_layers, f"{model_label(model)} · {corpus.name} {corpus.split}",
                                          out.dir / "figures"):
                out.figure(p)
    if imp.pruning:
        t = time.perf_counter()
        prune = _pruning(imp, seed, net, batches, readout, mean, accuracy, want_gradient, n_layers, n_heads, keep,
                         groups)
        seconds["pruning"] = time.perf_counter() - t
        prune = pd.concat([pd.DataFrame({k: [v] * len(prune) for k, v in ident.items()}), prune], axis=1)
        prune["seed"] = pd.array(prune["seed"], dtype="Int64")
        prune = out.table(schema.PRUNING.name, prune[list(schema.PRUNING.keys) + list(schema.PRUNING.metrics)])
        metrics.update(_bend(prune))
        if imp.figures:
            out.figure(figures.pruning_plot(prune, schema.ALL, readout.metric,
                                            f"{model_label(model)} · {corpus.name} {corpus.split}",
                                            out.dir / "figures" / "pruning_all.png"))
    metrics["stage_seconds"] = {k: round(v, 2) for k, v in seconds.items()}
    console = _console(metrics, readout.metric)
    return out.result(metrics, stores, console)


def _points(accuracy: pd.DataFrame, single: np.ndarray, groups, keep, n_heads: int) -> pd.DataFrame:
    names = {groups[g]: g for g in keep}
    t = accuracy[accuracy["relation"].isin(names)].copy()
    t["importance"] = single[t["layer"].to_numpy(int) * n_heads + t["head"].to_numpy(int),
                             t["relation"].map(names).to_numpy(int)]
    return t


def _headline(single: np.ndarray, groups, keep, accuracy: Optional[pd.DataFrame], n_heads: int) -> dict:
    """The most important head per relation, with its drop and (when known) its best attention accuracy."""
    out = {}
    acc = (accuracy.groupby(["relation", "layer", "head"])["accuracy"].max() if accuracy is not None
           else pd.Series(dtype=float))
    for g in keep:
        i = int(np.nanargmax(single[:, g]))
        layer, head = divmod(i, n_heads)
        rel = groups[g]
        out[f"most_important_{rel}"] = f"L{layer}H{head}"
        out[f"most_important_{rel}_drop"] = float(single[i, g])
        if (rel, layer, head) in acc.index:
            out[f"most_important_{rel}_attention_accuracy"] = float(acc.loc[(rel, layer, head)])
    return out


def _pruning(imp: ImportanceConfig, seed: int, net, batches, readout, mean, accuracy: Optional[pd.DataFrame],
             want_gradient: bool, n_layers: int, n_heads: int, keep, groups) -> pd.DataFrame:
    """Scores of the pruning curves: every order's settings evaluated together."""
    total = n_layers * n_heads
    counts = removed_counts(total, imp.pruning_step)
    orders: list[tuple[str, Optional[int], list[int]]] = []
    if want_gradient:
        def importance_at(gates: torch.Tensor) -> np.ndarray:
            return normalised_gradient(gradients(net, batches, readout, mean, gates))
        orders.append(("gradient", None, gradient_order(importance_at, counts, n_layers, n_heads)))
    if accuracy is not None:
        acc = accuracy[accuracy["relation"] == schema.ALL].groupby(["layer", "head"])["accuracy"].max()
        score = np.full(total, -np.inf)
        score[acc.index.get_level_values(0).to_numpy(int) * n_heads + acc.index.get_level_values(1).to_numpy(int)] = acc
        orders.append(("attention", None, [int(i) for i in np.argsort(score, kind="stable")]))
    order_seeds = range(seed, seed + imp.pruning_seeds)
    for order_seed, order in zip(order_seeds, random_orders(total, order_seeds)):
        orders.append(("random", order_seed, [int(i) for i in order]))
    settings = torch.cat([order_settings(o, counts, n_layers, n_heads) for _, _, o in orders])
    sums = evaluate(net, batches, readout, settings, mean, imp.replicas)
    n = sums.n.sum(0)
    scores = sums.hits.sum(1) / np.maximum(n, 1)  # (A, G)
    rows = []
    for i, (name, order_seed, _) in enumerate(orders):
        for j, c in enumerate(counts):
            for g in keep:
                rows.append({"order": name, "seed": order_seed, "fraction_removed": round(c / total, 4),
                             "relation": groups[g], "heads_removed": c,
                             "score": float(scores[i * len(counts) + j, g])})
    return pd.DataFrame(rows)


def _bend(prune: pd.DataFrame) -> dict:
    """Per order, the largest fraction of heads removed with the ``all`` score within 5 points of the
    unablated score (random: the mean curve)."""
    out = {}
    t = prune[prune["relation"] == schema.ALL]
    for order, s in t.groupby("order"):
        curve = s.groupby("fraction_removed")["score"].mean().sort_index()
        ok = curve >= curve.iloc[0] - 0.05
        first_bad = (~ok).to_numpy().argmax() if (~ok).any() else len(curve)
        out[f"prunable_fraction_{order}"] = float(curve.index[max(first_bad - 1, 0)])
    return out


def _console(metrics: dict, metric: str) -> str:
    lines = [f"importance: {metrics['readout']} readout, {metrics['ablation']} ablation, "
             f"{metrics['eval_sentences']} sentences; unablated {metric} {metrics.get('clean_' + metric, float('nan')):.4f}"]
    for k, v in metrics.items():
        if k.startswith("most_important_") and isinstance(v, str):
            rel = k[len("most_important_"):]
            acc = metrics.get(f"{k}_attention_accuracy")
            lines.append(f"  {rel:<12} {v:<6} drop {metrics[k + '_drop']:+.4f}"
                         + (f"  attention accuracy {acc:.3f}" if acc is not None else ""))
    for k, v in metrics.items():
        if k.startswith("prunable_fraction_"):
            lines.append(f"  {k}: {v:.2f}")
    return "\n".join(lines)


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract, cfg.importance, cfg.heads, cfg.seed, out)
