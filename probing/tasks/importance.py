"""``task=importance``: what does each head do for syntax? Heads are ablated through gates on their context
vectors (:mod:`probing.interventions.gates`: ``importance.ablation=mean|zero``) and a readout measures the damage
(``importance.readout``): a frozen relation probe's accuracy per relation, a frozen attachment probe's UAS, the
sentence embedding's cosine, or the model's own masked-LM loss on a fixed masked set (checkpoints with a
masked-LM head only). ``importance.method``: single-head and leave-one-layer-in ablation, the gradient
importance of Michel et al. (2019), or both. Pruning curves (gradient, attention-accuracy and random orders)
and, per relation, the Spearman correlation over heads between attention accuracy (``task=heads``: from
``importance.heads_run``, held fixed, or computed here and resampled with the importance) and ablation
importance, with bootstrap intervals over sentences.

Writes the ``importance``, ``importance_heldout``, ``pruning`` and ``importance_link`` tables (and ``heads``, the
attention accuracy, when it is computed here), a scatter per relation and the pruning curves under ``figures/``, and
the most important head per relation in ``metrics.json``, chosen on one half of the sentences and scored on the
other.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

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
    LmHead,
    Measure,
    ModelConfig,
    Multiplicity,
    ReadoutKind,
    RunConfig,
)
from probing.corpus import Corpus
from probing.corpus.cache import load_corpus_cached
from probing.encoder import architectures, load_encoder, model_label
from probing.errors import ProbingError
from probing.extract import ensure_store
from probing.figures import importance as figures
from probing.heads.head_accuracy import RelationCounts, accuracy_table, count_relations
from probing.importance.inputs import make_batches
from probing.importance.probes import fit_attachment, fit_relation
from probing.importance.pruning import gradient_order, order_settings, random_orders, removed_counts
from probing.importance.readouts import (
    EmbeddingReadout,
    LmReadout,
    MlmReadout,
    has_lm_head,
    has_mlm_head,
    lm_unavailable,
    mlm_unavailable,
    trivial_baselines,
)
from probing.importance.scores import evaluate, evaluate_refitted, gradients
from probing.importance.tables import (
    adjust_drops,
    drop_rows,
    gradient_rows,
    halves,
    heldout_rows,
    kept_groups,
    link_rows,
    normalised_gradient,
    pruning_rows,
    scoring_weights,
)
from probing.interventions.gates import head_means
from probing.paths import absolute
from probing.probes.data import sample_sentences
from probing.results import read_table
from probing.stats.bootstrap import resample_counts
from probing.stats.multiplicity import adjust, resamples_needed
from probing.tasks.base import SINGLE_SPLIT_KINDS, RunOutput, StageTimer, TaskResult, holdout, one_corpus
from probing.tasks.store_summary import store_use

log = logging.getLogger(__name__)


def splits(data: DataConfig, imp: ImportanceConfig, cache_dir: str, seed: int) -> tuple[Corpus, Corpus]:
    """The probe's training corpus and the evaluation corpus. One corpus (a single-split source, or
    ``train_split == eval_split``) is cut: its last ``importance.eval_fraction`` is evaluated, the rest trains
    the probe (a seeded subsample of at most ``importance.max_train_sentences`` of them)."""
    if one_corpus(data, imp):
        single = DataKind(data.kind) in SINGLE_SPLIT_KINDS
        corpus = load_corpus_cached(data, None if single else imp.eval_split, cache_dir)
        cut = holdout(len(corpus), imp, "importance")
        return (_subsample(Corpus(corpus.name, "train", corpus.sentences[:cut]), imp.max_train_sentences, seed),
                Corpus(corpus.name, "eval", corpus.sentences[cut:]))
    # data.limit bounds the evaluation sentences; the probe's training set is bounded by its own key
    train = load_corpus_cached(_unlimited(data), imp.train_split, cache_dir)
    return _subsample(train, imp.max_train_sentences, seed), load_corpus_cached(data, imp.eval_split, cache_dir)


def _subsample(corpus: Corpus, limit: Optional[int], seed: int) -> Corpus:
    """A seeded subsample of whole sentences, in corpus order (the probes' rule: probing.probes.data)."""
    keep = sample_sentences(len(corpus), limit, seed, "importance.max_train_sentences")
    return corpus if len(keep) == len(corpus) else Corpus(corpus.name, corpus.split,
                                                          tuple(corpus.sentences[int(i)] for i in keep))


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
    # every relation with an arc (the link keeps those with importance.min_count), less heads.skip_relations
    # (root: ROOT is never predicted, so its accuracy is 0 for every head)
    table, _ = accuracy_table(counts, directions, list(heads.offsets), store.num_layers, store.num_heads, 1,
                              heads.ci, list(heads.skip_relations))
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
    :func:`probing.stats.bootstrap.resample_counts`, the draws of ``task=heads`` at the same seed)."""
    return resample_counts(n_sentences, imp.bootstrap, seed).astype(np.float64)


def _labels(method: str, layers, heads) -> list[dict]:
    return [{"method": method, "layer": layer, "head": head} for layer, head in zip(layers, heads)]


@dataclass
class _Passes:
    """What every gated evaluation of a run reads: the model, the evaluation batches, the frozen readout, the
    mean context vectors that replace an ablated head's (None: zeros), and the model's shape."""

    net: torch.nn.Module
    batches: list
    readout: Any
    mean: Optional[torch.Tensor]
    n_layers: int
    n_heads: int
    replicas: int
    fit: Optional[Callable[[], Any]] = None  # refits the readout on its training sentences (relation, attachment)

    def evaluate(self, settings: torch.Tensor, refit: bool = False):
        """The readout's sums for every setting; ``refit``: each scored by a readout refitted with its gates on."""
        if refit:
            return evaluate_refitted(self.net, self.batches, self.fit, settings, self.mean, self.replicas)
        return evaluate(self.net, self.batches, self.readout, settings, self.mean, self.replicas)

    def gradients(self, gates: torch.Tensor) -> np.ndarray:
        return gradients(self.net, self.batches, self.readout, self.mean, gates)


_LM_HEADS = {ReadoutKind.mlm: LmHead.masked, ReadoutKind.lm: LmHead.causal}  # readouts of the model's own head


def _check_refit(kind: ReadoutKind, imp: ImportanceConfig) -> None:
    """``importance.pruning_refit`` with a readout that is not fitted is refused in one line."""
    if imp.pruning and imp.pruning_refit and kind not in (ReadoutKind.relation, ReadoutKind.attachment):
        raise ProbingError(f"importance.pruning_refit=true: importance.readout={kind} is not fitted, so there is "
                           "nothing to refit; use importance.readout=relation or attachment")


def _check_readout(model: ModelConfig, kind: ReadoutKind, method: ImportanceMethod) -> None:
    """A readout the model or the method cannot have is refused in one line before the model loads."""
    if kind is ReadoutKind.mlm:
        archs = architectures(model)
        if not has_mlm_head(archs) or model.random_init:
            raise mlm_unavailable(model_label(model), archs)
    if kind is ReadoutKind.lm:
        archs = architectures(model)
        if not has_lm_head(archs) or model.random_init:
            raise lm_unavailable(model_label(model), archs)
    if kind is ReadoutKind.embedding and method is ImportanceMethod.gradient:
        EmbeddingReadout().loss(None, None)  # raises the one-line reason


def _readout(encoder, kind: ReadoutKind, imp: ImportanceConfig, train: Corpus, corpus: Corpus, batches: list,
             pooling, seed: int) -> tuple[Any, list, Optional[Callable[[], Any]]]:
    """The frozen readout (fitted on ``train`` for relation and attachment), the evaluation batches it
    scores (the mlm readout masks one copy of them) and, for a fitted readout, the fit itself (run again, under
    gates, by ``importance.pruning_refit``)."""
    if kind is ReadoutKind.embedding:
        return EmbeddingReadout(), batches, None
    if kind is ReadoutKind.mlm:
        readout = MlmReadout(encoder.lm_head, encoder.tokenizer.mask_token_id, imp.mlm_rate, seed)
        return readout, readout.mask(batches), None  # one masked copy, scored by every gated pass
    if kind is ReadoutKind.lm:
        return LmReadout(encoder.lm_head), batches, None
    train_batches = make_batches(encoder, train, imp.batch_size, imp.max_batch_tokens)

    def fit() -> Any:
        if kind is ReadoutKind.relation:
            return fit_relation(encoder.model, train, train_batches, corpus, pooling, imp.C, imp.max_iter, seed)
        return fit_attachment(encoder.model, train, train_batches, corpus, pooling, imp.attachment_rank,
                              imp.attachment_epochs, seed)

    log.info("fitting the frozen %s probe on %d %s sentences ...", kind, len(train), train.split)
    return fit(), batches, fit


def _metrics(ident: dict, method: ImportanceMethod, kind: ReadoutKind, imp: ImportanceConfig, train: Corpus,
             corpus: Corpus, p: _Passes) -> dict[str, Any]:
    """metrics.json's description of the run, and the conventions its numbers follow."""
    metrics: dict[str, Any] = {**ident, "method": method.value, "eval_sentences": len(corpus),
                               "train_sentences": len(train) if kind in (ReadoutKind.relation,
                                                                         ReadoutKind.attachment) else 0,
                               "n_layers": p.n_layers, "n_heads": p.n_heads, "conventions": {
                                   "score": p.readout.metric, "groups": "UD labels as they are; root arcs not scored",
                                   "gradient": "E|dL/dxi| over sentences, divided by its L2 norm within each layer",
                                   "link": "Spearman over heads; interval: bootstrap over sentences"}}
    if kind is ReadoutKind.attachment:
        metrics["conventions"]["attachment"] = (
            "frozen bilinear arc scorer s_ij = (x_i U)·(x_j V) + x_j·c on final-layer word vectors (U, V: D x "
            f"{imp.attachment_rank}); prediction: the best-scoring other word of the sentence; loss: cross-entropy "
            "of the softmax over those words at the gold head; trained on standardised vectors of the training "
            f"sentences (Adam, at most {imp.attachment_epochs} epochs, early stopping on the cross-entropy of a "
            "seeded held-out tenth of them, seeded by the run's seed)")
        metrics["readout_fit"] = p.readout.fit
    if kind is ReadoutKind.mlm:
        metrics["conventions"]["mlm"] = (f"round({imp.mlm_rate} x words) of each sentence (at least one; seeded by "
                                         "the run's seed and the sentence) masked, all their pieces set to the "
                                         "mask token, the same in every pass; loss per masked piece")
    if kind is ReadoutKind.lm:
        metrics["conventions"]["lm"] = ("the model's own frozen causal-LM head, teacher-forced: every word after the "
                                        "first of each sentence, each piece predicted from the piece before it; a "
                                        "word is a hit when all its pieces are the top-1 prediction; loss: the "
                                        "word's summed cross-entropy over its pieces (nats)")
    return metrics


def _ablation_settings(p: _Passes, want_ablation: bool, layer_in: bool) -> tuple[torch.Tensor, list[dict]]:
    """The gate settings of every single-head ablation (and leave-one-layer-in), with their row labels; none
    when only the clean pass is wanted (its score goes to metrics.json)."""
    n_layers, n_heads = p.n_layers, p.n_heads
    flat = torch.arange(n_layers * n_heads)
    one = order_settings([], [0], n_layers, n_heads).expand(n_layers * n_heads, -1, -1).clone()
    one.view(-1, n_layers * n_heads)[flat, flat] = 0
    settings, labels = [one], _labels("ablation", flat // n_heads, flat % n_heads)
    if not want_ablation:
        settings, labels = [one[:0]], []
    if want_ablation and layer_in:
        keep_one = torch.zeros(n_layers, n_layers, n_heads)
        keep_one[torch.arange(n_layers), torch.arange(n_layers)] = 1
        settings.append(keep_one)
        labels += _labels("layer_in", range(n_layers), [None] * n_layers)
    return torch.cat(settings), labels


def _with_ident(df: pd.DataFrame, ident: dict, table: schema.Table) -> pd.DataFrame:
    """The run's identity columns (those the table has) with the rows, in the schema's column order."""
    own = {k: v for k, v in ident.items() if k in table.keys and k not in df.columns}
    df = pd.concat([pd.DataFrame({k: [v] * len(df) for k, v in own.items()}), df.reset_index(drop=True)], axis=1)
    return df[list(table.keys) + list(table.metrics)]


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, imp: ImportanceConfig, heads: HeadsConfig,
        seed: int, out: RunOutput) -> TaskResult:
    """Every enabled importance computation of ``imp``, written through ``out``."""
    kind, method = ReadoutKind(imp.readout), ImportanceMethod(imp.method)
    _check_readout(model, kind, method)
    _check_refit(kind, imp)
    encoder = load_encoder(model, _LM_HEADS.get(kind))
    want_ablation, want_gradient = _wanted(method, kind)
    timer = StageTimer()
    with timer("probe", "the frozen readout"):
        train, corpus = splits(data, imp, extract.cache_dir, seed)
        sizes = _sizes(data, imp, kind, len(train), len(corpus))
        log.info("importance: %s", sizes)
        batches = make_batches(encoder, corpus, imp.batch_size, imp.max_batch_tokens)
        readout, batches, fit = _readout(encoder, kind, imp, train, corpus, batches, extract.pooling, seed)
    mean = (head_means(encoder.model, [b.inputs for b in batches]).to(encoder.device)
            if Ablation(imp.ablation) is Ablation.mean else None)
    p = _Passes(encoder.model, batches, readout, mean, encoder.num_layers, encoder.num_heads, imp.replicas, fit)
    # columns in batch order, the order of every per-sentence array below
    weights = sentence_weights(len(corpus), imp, seed)[:, np.concatenate([b.sentences for b in batches])]
    ident = {"model": model_label(model), "corpus": corpus.name, "split": corpus.split, "readout": kind.value,
             "ablation": Ablation(imp.ablation).value}
    metrics = _metrics(ident, method, kind, imp, train, corpus, p)
    title = f"{model_label(model)} · {corpus.name} {corpus.split}"
    with timer("ablation", "single-head ablations"):
        settings, labels = _ablation_settings(p, want_ablation, imp.layer_in)
        sums = p.evaluate(settings)
    groups = readout.groups
    keep = kept_groups(groups, sums.n, imp.min_count)
    drop_table, drop, drop_samp = drop_rows(sums, groups, keep, labels, readout.metric, weights, imp.ci)
    metrics[f"clean_{readout.metric}"] = float((sums.clean_hits.sum(0) / np.maximum(sums.n.sum(0), 1))[0])
    metrics.update(_against_baselines(metrics[f"clean_{readout.metric}"], readout.metric, train, corpus, imp))
    single = drop[: p.n_layers * p.n_heads] if want_ablation else None
    tables = [drop_table] if want_ablation else []
    if want_gradient:
        with timer("gradient", "gradient importance"):
            tables.append(gradient_rows(p.gradients(torch.ones(p.n_layers, p.n_heads)), weights, imp.ci))
    importance = _importance_table(tables, heads, ident)
    out.table(schema.IMPORTANCE.name, importance)
    heldout = None
    if want_ablation:
        heldout = _heldout(sums, importance, groups, keep, p, imp, heads, seed, readout.metric)
        out.table(schema.IMPORTANCE_HELDOUT.name, _with_ident(heldout, ident, schema.IMPORTANCE_HELDOUT))
        metrics.update(_heldout_metrics(heldout, metrics["conventions"], imp, heads, p))
    stores: list = []
    accuracy, acc_samples = None, None
    if corpus.has_trees and kind is not ReadoutKind.embedding or imp.heads_run:
        with timer("attention_accuracy", "attention accuracy of every head"):
            accuracy, acc_samples = _accuracy(imp, heads, model, corpus, extract, stores, seed, out, ident)
        if want_ablation:
            _link(metrics, out, imp, heads, accuracy, acc_samples, single, drop_samp, groups, keep, p, ident,
                  title)
    if want_ablation and accuracy is not None:
        metrics.update(_headline(heldout, accuracy))
    if imp.pruning:
        with timer("pruning", "pruning curves"):
            prune = _pruning(imp, seed, p, accuracy, want_gradient, keep, groups, weights)
        _write_pruning(prune, metrics, out, imp, ident, title, readout.metric)
    metrics.update(timer.metrics())
    return out.result(metrics, stores, _console(metrics, readout.metric, sizes))


def _accuracy(imp: ImportanceConfig, heads: HeadsConfig, model: ModelConfig, corpus: Corpus, extract: ExtractConfig,
              stores: list, seed: int, out: RunOutput, ident: dict) -> tuple[pd.DataFrame, Any]:
    """Every head's attention accuracy and its resamples; computed here (no ``importance.heads_run``), the heads
    table is kept in the run dir, where the dashboard's scatter reads it."""
    accuracy, samples = attention_accuracy(imp, heads, model, corpus, extract, stores, seed)
    if not imp.heads_run:
        out.table(schema.HEADS.name, _with_ident(accuracy, {**ident, "measure": Measure.attention.value},
                                                 schema.HEADS))
    return accuracy, samples


def _importance_table(tables: list[pd.DataFrame], heads: HeadsConfig, ident: dict) -> pd.DataFrame:
    """The ablation and gradient rows as one ``importance`` table: p-values adjusted, the run's identity, layer and
    head as nullable integers (a layer-in row has no head)."""
    importance = pd.concat(tables, ignore_index=True)
    importance["p"] = importance["p"].astype(float) if "p" in importance else np.nan
    importance["p_adjusted"] = adjust_drops(importance, Multiplicity(heads.multiplicity))
    importance = _with_ident(importance, ident, schema.IMPORTANCE)
    for col in (schema.LAYER, schema.HEAD):
        importance[col] = pd.array(importance[col], dtype="Int64")
    return importance


def _heldout_metrics(heldout: pd.DataFrame, conventions: dict, imp: ImportanceConfig, heads: HeadsConfig,
                     p: "_Passes") -> dict:
    """The held-out costliest heads' headline entries, the adjusted test's power, and what most_important means
    (``conventions`` gains that line)."""
    conventions["most_important"] = (
        "per relation the head whose single ablation costs most on a seeded half of the evaluation sentences, "
        "its drop on the other half (the importance_heldout table)")
    return {**_headline(heldout, None),
            "heads_passing_power": _heads_power(imp.bootstrap, p.n_layers * p.n_heads, heads.alpha)}


def _wanted(method: ImportanceMethod, kind: ReadoutKind) -> tuple[bool, bool]:
    """Whether the run ablates heads and whether it takes gradients (an embedding readout has none)."""
    want_gradient = method in (ImportanceMethod.gradient, ImportanceMethod.both) and kind is not ReadoutKind.embedding
    if method is ImportanceMethod.both and not want_gradient:
        log.info("importance.readout=embedding: no gradient importance (1 − cosine has zero gradient unablated)")
    return method in (ImportanceMethod.ablation, ImportanceMethod.both), want_gradient


def _write_pruning(prune: pd.DataFrame, metrics: dict, out: RunOutput, imp: ImportanceConfig, ident: dict,
                   title: str, metric: str) -> None:
    """The pruning table, its headline (how much can go within 5 points) and the curves of ``all``."""
    prune = _with_ident(prune, ident, schema.PRUNING)
    prune["seed"] = pd.array(prune["seed"], dtype="Int64")
    prune = out.table(schema.PRUNING.name, prune)
    metrics.update(_bend(prune))
    metrics["pruning_refit"] = bool(imp.pruning_refit)  # whether each point's readout was refitted
    if imp.figures:
        out.figure(figures.pruning_plot(prune, schema.ALL, metric, title, out.dir / "figures" / "pruning_all.png"))


def _link(metrics: dict, out: RunOutput, imp: ImportanceConfig, h: HeadsConfig, accuracy: pd.DataFrame,
          acc_samples, single: np.ndarray, drop_samp: np.ndarray, groups, keep, p: _Passes, ident: dict,
          title: str) -> None:
    """The importance_link table (Spearman over heads of importance and attention accuracy, per relation and
    direction, its bootstrap p-value adjusted across the table's rows by ``heads.multiplicity``), its headline
    and scatter figures."""
    link = link_rows(accuracy, single, drop_samp[:, : p.n_layers * p.n_heads], groups, keep, p.n_layers,
                     p.n_heads, imp.ci, acc_samples)
    # the pre-specified primary test: all arcs in importance.primary_direction, rho != 0, two-sided, alone;
    # every other row is exploratory, one-sided (rho > 0) and adjusted together
    primary = ((link["relation"] == schema.ALL) & (link["direction"] == str(imp.primary_direction))).to_numpy()
    link["role"] = np.where(primary, "primary", "exploratory")
    link["p_adjusted"] = np.nan
    link.loc[~primary, "p_adjusted"] = adjust(link.loc[~primary, "p"].to_numpy(float), Multiplicity(h.multiplicity))
    link.loc[primary, "p_adjusted"] = link.loc[primary, "p_two_sided"]
    link["positive"] = ((link["p_adjusted"] < h.alpha) & (link["rho"] > 0)).astype("boolean").mask(
        link["p_adjusted"].isna())
    family = int(link.loc[~primary, "p"].notna().sum())
    resamples = int(drop_samp.shape[0])
    metrics["primary"] = _primary(link[primary], imp, h.alpha)
    metrics["multiplicity"] = {
        "test": "one-sided bootstrap p-value of rho > 0, (1 + #{rho <= 0}) / (1 + resamples)",
        "family": "every relation and direction of importance_link but the primary test (exploratory)",
        "method": str(h.multiplicity), "alpha": h.alpha,
        "positive": int(link.loc[~primary, "positive"].fillna(False).sum()), "tests": family}
    metrics["power"] = _power(resamples, family, h.alpha)
    metrics["conventions"]["link"] += (
        " of importance and attention accuracy together (the same resamples)" if acc_samples is not None
        else " of the importance, attention accuracy held at its full-sample value (importance.heads_run)")
    out.table(schema.IMPORTANCE_LINK.name, link.assign(**ident)[list(schema.IMPORTANCE_LINK.keys)
                                                                + list(schema.IMPORTANCE_LINK.metrics)])
    if imp.figures:
        pts = _points(accuracy, single, groups, keep, p.n_heads)
        for path in figures.link_scatter(pts, link, p.n_layers, title, out.dir / "figures"):
            out.figure(path)


def _points(accuracy: pd.DataFrame, single: np.ndarray, groups, keep, n_heads: int) -> pd.DataFrame:
    names = {groups[g]: g for g in keep}
    t = accuracy[accuracy["relation"].isin(names)].copy()
    t["importance"] = single[t["layer"].to_numpy(int) * n_heads + t["head"].to_numpy(int),
                             t["relation"].map(names).to_numpy(int)]
    return t


def _primary(row: pd.DataFrame, imp: ImportanceConfig, alpha: float) -> dict:
    """The pre-specified primary test's line of metrics.json (empty fields where the run has no such row)."""
    out = {"relation": schema.ALL, "direction": str(imp.primary_direction),
           "test": "Spearman rho over heads of attention accuracy and single-head importance != 0, two-sided "
                   "bootstrap p-value 2 min(1 + #{rho <= 0}, 1 + #{rho >= 0}) / (1 + resamples), not adjusted"}
    if len(row):
        r = row.iloc[0]
        out.update(rho=float(r["rho"]), ci_low=float(r["ci_low"]), ci_high=float(r["ci_high"]),
                   p_two_sided=float(r["p_two_sided"]), rejects=bool(r["p_two_sided"] < alpha))
    return out


def _power(resamples: int, tests: int, alpha: float) -> dict:
    """Whether the bootstrap can reject at all: its smallest p-value against the strictest adjusted threshold of
    the exploratory family (alpha / tests) and the primary test's (alpha)."""
    needed = resamples_needed(tests, alpha)
    out = {"resamples": resamples, "smallest_p": 1 / (1 + resamples) if resamples else None,
           "exploratory_tests": tests, "resamples_needed": needed, "enough": resamples >= needed,
           "primary_enough": resamples >= resamples_needed(1, alpha / 2)}
    if resamples < needed:
        log.warning("importance.bootstrap=%d: the smallest bootstrap p-value, 1/%d, cannot pass %d adjusted tests "
                    "at alpha=%s; %d or more resamples are needed", resamples, resamples + 1, tests, alpha, needed)
    return out


def _heldout(sums, importance: pd.DataFrame, groups, keep, p: _Passes, imp: ImportanceConfig, h: HeadsConfig,
             seed: int, metric: str) -> pd.DataFrame:
    """The importance_heldout rows: per relation the costliest single head chosen on a seeded half of the
    sentences and scored on the other (its interval: ``importance.bootstrap`` resamples of that half), beside
    how many heads' drops pass the test adjusted across heads (``heads.alpha``) on all sentences."""
    lh = p.n_layers * p.n_heads
    single = dataclasses.replace(sums, hits=sums.hits[:lh], loss=sums.loss[:lh])
    split = halves(sums.sentences, seed)
    w = scoring_weights(split[1], sums.sentences, imp.bootstrap, seed + 1)
    one = importance[(importance["method"] == "ablation") & (importance["metric"] == f"{metric}_drop")]
    passing = {str(rel): (int(t["p_adjusted"].notna().sum()), int((t["p_adjusted"] < h.alpha).sum()))
               for rel, t in one.groupby("relation")}
    return heldout_rows(single, groups, keep, p.n_heads, split, w, imp.ci, passing)


def _heads_power(resamples: int, tests: int, alpha: float) -> dict:
    """Whether a head's drop can pass the test adjusted across a relation's ``tests`` heads at all: the smallest
    bootstrap p-value, 1/(1+B), against alpha/tests (a warning when it cannot)."""
    needed = resamples_needed(tests, alpha)
    if resamples < needed:
        log.warning("importance.bootstrap=%d: no head's drop can pass the test adjusted across %d heads at alpha=%s "
                    "(heads_passing is 0 by construction); %d or more resamples are needed", resamples, tests, alpha,
                    needed)
    return {"resamples": resamples, "tests": tests, "resamples_needed": needed, "enough": resamples >= needed}


def _headline(heldout: pd.DataFrame, accuracy: Optional[pd.DataFrame]) -> dict:
    """The most important head per relation, chosen on one half and scored on the other, with its held-out
    drop and (when known) its best attention accuracy."""
    out = {}
    acc = (accuracy.groupby(["relation", "layer", "head"])["accuracy"].max() if accuracy is not None
           else pd.Series(dtype=float))
    for r in heldout.itertuples(index=False):
        rel, layer, head = str(r.relation), int(r.layer), int(r.head)
        out[f"most_important_{rel}"] = f"L{layer}H{head}"
        out[f"most_important_{rel}_drop"] = float(r.score)
        out[f"most_important_{rel}_heads_passing"] = int(r.heads_passing)
        if (rel, layer, head) in acc.index:
            out[f"most_important_{rel}_attention_accuracy"] = float(acc.loc[(rel, layer, head)])
    return out


RANDOM, RANDOM_MEAN = "random", "random_mean"  # the random orders' curves and the name of their mean curve


def _pruning(imp: ImportanceConfig, seed: int, p: _Passes, accuracy: Optional[pd.DataFrame], want_gradient: bool,
             keep, groups, weights: np.ndarray) -> pd.DataFrame:
    """Scores of the pruning curves (every order's settings evaluated together, each readout refitted per
    point with ``importance.pruning_refit``), with intervals over the sentences of ``weights``."""
    n_layers, n_heads = p.n_layers, p.n_heads
    total = n_layers * n_heads
    counts = removed_counts(total, imp.pruning_step)
    orders: list[tuple[str, Optional[int], list[int]]] = []
    if want_gradient:
        def importance_at(gates: torch.Tensor) -> np.ndarray:
            return normalised_gradient(p.gradients(gates))
        orders.append(("gradient", None, gradient_order(importance_at, counts, n_layers, n_heads)))
    if accuracy is not None:
        acc = accuracy[accuracy["relation"] == schema.ALL].groupby(["layer", "head"])["accuracy"].max()
        score = np.full(total, -np.inf)
        score[acc.index.get_level_values(0).to_numpy(int) * n_heads + acc.index.get_level_values(1).to_numpy(int)] = acc
        orders.append(("attention", None, [int(i) for i in np.argsort(score, kind="stable")]))
    order_seeds = range(seed, seed + imp.pruning_seeds)
    for order_seed, order in zip(order_seeds, random_orders(total, order_seeds)):
        orders.append((RANDOM, order_seed, [int(i) for i in order]))
    settings = torch.cat([order_settings(o, counts, n_layers, n_heads) for _, _, o in orders])
    sums = p.evaluate(settings, refit=imp.pruning_refit)
    return pruning_rows([(name, s) for name, s, _ in orders], counts, sums, groups, keep, weights, imp.ci,
                        RANDOM, RANDOM_MEAN)


def _bend(prune: pd.DataFrame) -> dict:
    """Per order, the largest fraction of heads removed with the ``all`` score within 5 points of the
    unablated score; random orders: of the mean curve, and the band of single orders (their smallest and
    largest such fraction), since the mean's fraction need not hold for any one order. Beside them the
    all-heads-ablated floor and the room down to it: a 5-point margin is ``pruning_margin_share_of_room`` of it
    (near 1, staying within 5 points is nearly automatic)."""
    out = {}
    t = prune[prune["relation"] == schema.ALL]
    for order, s in t.groupby("order"):
        if order == RANDOM:
            each = [_within_5_points(o.set_index("fraction_removed")["score"]) for _, o in s.groupby("seed")]
            out["prunable_fraction_random_min"], out["prunable_fraction_random_max"] = min(each), max(each)
            out["prunable_fraction_random_each"] = each
            if (t["order"] == RANDOM_MEAN).any():
                continue
        name = RANDOM if order == RANDOM_MEAN else order
        out[f"prunable_fraction_{name}"] = _within_5_points(s.groupby("fraction_removed")["score"].mean())
    if len(t):
        curve = t.groupby("fraction_removed")["score"]
        clean, floor = float(curve.mean().iloc[0]), float(curve.mean().iloc[-1])
        out.update(pruning_floor=floor, pruning_room=clean - floor,
                   pruning_margin_share_of_room=0.05 / (clean - floor) if clean > floor else None)
    return out


def _within_5_points(curve: pd.Series) -> float:
    """The largest fraction removed before the score first falls more than 5 points below the unablated one."""
    curve = curve.sort_index()
    ok = curve >= curve.iloc[0] - 0.05
    first_bad = (~ok).to_numpy().argmax() if (~ok).any() else len(curve)
    return float(curve.index[max(first_bad - 1, 0)])


def _against_baselines(clean: float, metric: str, train: Corpus, corpus: Corpus, imp: ImportanceConfig) -> dict:
    """The unablated readout beside its trivial baselines (:func:`trivial_baselines`): whether it beats the
    best of them by ``importance.baseline_margin`` (None where the readout has no trivial baseline)."""
    base = trivial_baselines(metric, train, corpus)
    if not base:
        return {"readout_baselines": {}, "readout_margin": None, "readout_beats_baselines": None}
    margin = clean - max(base.values())
    beats = bool(margin >= imp.baseline_margin)
    if not beats:
        log.warning("the unablated %s readout (%s %.3f) does not beat its best trivial baseline by %.2f (%s): "
                    "its drops measure a readout at baseline level", imp.readout, metric, clean,
                    imp.baseline_margin, ", ".join(f"{k} {v:.3f}" for k, v in base.items()))
    return {"readout_baselines": base, "readout_margin": margin, "readout_beats_baselines": beats}


def _sizes(data: DataConfig, imp: ImportanceConfig, kind: ReadoutKind, n_train: int, n_eval: int) -> str:
    """What bounds each set of sentences, for the log and the console: ``data.limit`` the scored ones (every
    ablation, gradient and pruning pass runs over them), ``importance.max_train_sentences`` the readout's."""
    if one_corpus(data, imp):
        scored = f"{n_eval} sentences scored (the last {imp.eval_fraction:g} of the corpus, cut by data.limit)"
    else:
        scored = f"{n_eval} {imp.eval_split} sentences scored (data.limit)"
    if kind not in (ReadoutKind.relation, ReadoutKind.attachment):
        return scored
    source = "other" if one_corpus(data, imp) else imp.train_split
    return f"{scored}, the readout trained on {n_train} {source} sentences (importance.max_train_sentences)"


def _console(metrics: dict, metric: str, sizes: str) -> str:
    base = metrics.get("readout_baselines") or {}
    lines = [f"importance: {metrics['readout']} readout, {metrics['ablation']} ablation; {sizes}",
             f"  unablated {metric} {metrics.get('clean_' + metric, float('nan')):.4f}"
             + (f" (trivial baselines: {', '.join(f'{k} {v:.3f}' for k, v in base.items())}; "
                + ("beats them" if metrics.get("readout_beats_baselines") else "does NOT beat them")
                + " by the margin)" if base else "")]
    if any(k.startswith("most_important_") for k in metrics):
        lines.append("  costliest head per relation, chosen on half the sentences; drop on the other half; heads "
                     "whose drop passes the test adjusted across heads")
    for k, v in metrics.items():
        if k.startswith("most_important_") and isinstance(v, str):
            rel = k[len("most_important_"):]
            acc = metrics.get(f"{k}_attention_accuracy")
            lines.append(f"  {rel:<12} {v:<6} drop {metrics[k + '_drop']:+.4f}  "
                         f"{metrics[k + '_heads_passing']} heads pass"
                         + (f"  attention accuracy {acc:.3f}" if acc is not None else ""))
    for k, v in metrics.items():
        if k.startswith("prunable_fraction_") and not isinstance(v, list):
            lines.append(f"  {k}: {v:.2f}")
    if metrics.get("pruning_floor") is not None:
        lines.append(f"  all heads ablated: {metrics['pruning_floor']:.4f} (unablated minus it: "
                     f"{metrics['pruning_room']:+.4f})")
    return "\n".join(lines)


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract, cfg.importance, cfg.heads, cfg.seed, out)
