"""``task=heads``: every per-head analysis of one store, written as tidy tables, figures and headline metrics.

Reads the attention store only (the model runs only if the store has to be built). Tables in the run dir: ``heads`` (accuracy of
every head per relation and direction, with CIs and the best baseline), ``baselines`` (every offset),
``best_heads``, ``patterns`` and ``patterns_layers``, ``head_distances`` and ``head_mds``, ``trees``,
``detectors`` (with ``heads.induction_sequences``, a small store of repeated random word sequences is extracted
for the induction detector);
figures in ``figures/``. The returned dict (``metrics.json``) holds the best head per relation and every
convention the numbers depend on.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any, Optional

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from probing import schema
from probing.config import (
    DataConfig,
    Detector,
    Direction,
    ExtractConfig,
    HeadsConfig,
    LabelSet,
    ModelConfig,
    Multiplicity,
    RunConfig,
)
from probing.corpus import Corpus
from probing.corpus.cache import load_corpus_cached
from probing.errors import ProbingError
from probing.extract import ExtractReport, ensure_store
from probing.figures import heads as heads_figures
from probing.heads.detectors import WORD_DETECTORS, detector_table, induction_corpus, induction_table
from probing.heads.distances import distance_table, mds_embedding
from probing.heads.head_accuracy import accuracy_table
from probing.heads.patterns import layer_means
from probing.heads.rows import rows_convention
from probing.heads.selection import count_part, halves, held_out
from probing.heads.statistics import distances_of, patterns_of, statistics, trees_of
from probing.schema import ALL
from probing.stats.multiplicity import adjust
from probing.store import AttentionStore, StatisticsStore
from probing.tasks.base import RunOutput, StageTimer, TaskResult
from probing.tasks.store_summary import describe_part, describe_store, part_metrics, store_use

log = logging.getLogger(__name__)


def _check(h: HeadsConfig) -> None:
    """The value checks a type cannot express (types and choices are checked when the config composes)."""
    if not h.directions:
        raise ProbingError(f"heads.directions is empty; choose from {[d.value for d in Direction]}")
    if not h.label_sets:
        raise ProbingError(f"heads.label_sets is empty; choose from {[s.value for s in LabelSet]}")
    if 0 in h.offsets or not h.offsets:
        raise ProbingError(f"heads.offsets={list(h.offsets)}: need at least one offset, and 0 is not an offset")
    if h.bootstrap < 0 or not 0 < h.ci < 1:
        raise ProbingError(f"heads.bootstrap must be >= 0 and heads.ci in (0, 1); got {h.bootstrap}, {h.ci}")
    if h.induction_sequences < 0:
        raise ProbingError(f"heads.induction_sequences={h.induction_sequences}: need >= 0 (0: no induction)")


def kv_groups(store: AttentionStore) -> Optional[str]:
    """Which query heads share a key/value head, for a model with grouped-query attention (else None): every
    table reports the query heads, each with a map of its own."""
    h, kv = store.num_heads, store.kv_heads
    if not kv or kv >= h or h % kv or store.num_heads == 1:
        return None
    g = h // kv
    groups = ", ".join(f"{k * g}-{k * g + g - 1}: {k}" for k in range(kv))
    return (f"{h} query heads per layer share {kv} key/value heads (query head h reads key/value head h // {g}; "
            f"query heads {groups}): heads of a group see the same keys and values through their own queries")


def conventions(h: HeadsConfig, store: AttentionStore, seed: int) -> dict:
    """Every choice the numbers depend on, written beside them."""
    return {
        "causal": ("a word attends to itself and its left: each direction is scored over the arcs it can see "
                   "(dep_to_head: head left of its dependent; head_to_dep: head right of it), the baseline over "
                   "the same arcs, reachable_share says how many; no trees") if store.causal else False,
        "measure": store.measure,  # the map scored (probing.config.Measure)
        "measure_rows": f"head accuracy and trees: as stored; patterns and distances: {rows_convention(store)}",
        "pooling": store.manifest.get("inputs", {}).get("pooling"),
        "special_tokens": "scored over words only ([CLS]/[SEP] rows and columns dropped); patterns keep them",
        "directions": {"dep_to_head": "argmax of the dependent's row (where it looks) is its gold head",
                       "head_to_dep": "argmax of the dependent's column (who looks at it most) is its gold head"},
        "diagonal": "zeroed before the argmax",
        "ties": "leftmost word",
        "root": ("not scored: a root word has no arc a direction can see (it counts in neither direction's 'all')"
                 if store.causal else "never predicted: a root word is never correct (it counts in 'all')"),
        "punctuation": "scored as the relation 'punct' and included in 'all'; patterns: words with UPOS in "
                       f"{list(h.punct_upos)}",
        "min_count": h.min_count, "skip_relations": list(h.skip_relations), "offsets": list(h.offsets),
        "baseline": ("per direction, the offset with the highest accuracy over the arcs that direction can see "
                     "(ties: first in offsets); the baselines table names the direction" if store.causal else
                     "the offset with the highest accuracy on the whole data (ties: first in offsets), the same "
                     "for both directions"),
        "label_sets": [str(s) for s in h.label_sets],
        "bootstrap": {"resamples": h.bootstrap, "ci": h.ci, "seed": seed, "unit": "sentence",
                      "interval": "percentile"},
        "best_head": "highest accuracy over directions, layers and heads (ties: first direction, lowest "
                     "layer, then head); layer and head are 0-based",
        "patterns": {"rows": str(h.pattern_rows), "positions": "full sequence, special tokens kept",
                     "entropy": "nats"},
        "distances": {"metric": "Jensen-Shannon distance, base 2, mean over attending words",
                      "sentences": h.distance_sentences, "mds": "metric MDS (SMACOF, scikit-learn's: random init, 4 inits), precomputed, seed"},
        "detectors": {
            "score": "mean over a sentence's queries that have a target of the attention mass on the target, then "
                     "over sentences", "words": "word-level maps (special positions dropped)",
            "null": "the row's mass on words spread uniformly over the keys the query reaches (all words; causal: "
                    "itself and its left), averaged like the score",
            "test": f"one-sided bootstrap p-value of score > null + {h.detector_min_gain} over sentences, (1 + "
                    f"#{{gain <= {h.detector_min_gain}}}) / (1 + resamples), adjusted across the heads of each detector ({h.multiplicity}), passes below "
                    f"alpha={h.alpha}", "duplicate": "earlier words of the same lower-cased form",
            "first": "the first word, from the queries after it", "next": "not reported for a causal model",
            "induction": f"{h.induction_sequences} random sequences of {list(h.induction_words)} distinct words of "
                         "the corpus repeated twice (seed: the run's); query k+i -> key i+1"},
        "trees": {"directed": "Chu-Liu-Edmonds rooted at the gold root, UAS over non-root words",
                  "undirected": "Prim maximum spanning tree of A + A.T, UUAS over gold edges",
                  "right_branching": "head = previous word", "left_branching": "head = next word",
                  "sentences": h.tree_sentences, "punctuation": "included"},
    }


def shown_label(table: pd.DataFrame) -> str:
    """The label set shown in the summary, the figures and the console: ``as_is`` when computed, else the first."""
    labels = set(table["label_set"])
    return LabelSet.as_is.value if LabelSet.as_is.value in labels else str(table["label_set"].iloc[0])


def reachable_share(corpus: Corpus, indices, directions: list[Direction]) -> dict[str, dict[str, float]]:
    """Per direction and relation (``all`` too), the share of arcs a causal model's heads can attend along:
    the head left of its dependent (``dep_to_head``), or right of it (``head_to_dep``); root arcs in neither."""
    rel, left, right = [], [], []
    for i in indices:
        s = corpus[int(i)]
        g = np.asarray(s.heads)
        pos = np.arange(len(g))
        rel += list(s.relations or ("_",) * len(g))
        left.append((g >= 0) & (g < pos))
        right.append(g > pos)
    df = pd.DataFrame({"relation": rel, str(Direction.dep_to_head): np.concatenate(left),
                       str(Direction.head_to_dep): np.concatenate(right)})
    out = {}
    for d in directions:
        per = df.groupby("relation")[str(d)].mean()
        out[str(d)] = {**{r: round(float(v), 4) for r, v in per.items()}, ALL: round(float(df[str(d)].mean()), 4)}
    return out


def _best_metrics(best: pd.DataFrame) -> dict:
    """metrics.json's best heads: per relation for the shown label set (and ``base``), and ``all``'s accuracy."""
    shown = shown_label(best)
    as_is = best[best["label_set"] == shown]
    out: dict[str, Any] = {"best_heads": best_summary(as_is), "best_heads_label_set": shown}
    if LabelSet.base.value in set(best["label_set"]):
        out["best_heads_base"] = best_summary(best[best["label_set"] == LabelSet.base.value])
    out["relations_reported"] = sorted(set(as_is["relation"]) - {ALL})
    if ALL in out["best_heads"]:
        out["all_best_accuracy"] = out["best_heads"][ALL]["accuracy"]
    return out


def _tree_metrics(trees: pd.DataFrame) -> dict:
    """metrics.json's trees: the head with the best UUAS per method, and the branching baselines."""
    top = trees.loc[trees.groupby("method")["uuas"].idxmax()]
    return {"trees_best": {r.method: {"layer": int(r.layer), "head": int(r.head), "direction": r.direction,
                                      "uas": r.uas, "uuas": r.uuas} for r in top.itertuples()},
            "trees_baselines": {c: float(trees[c].iloc[0]) for c in trees.columns
                                if c.startswith(("left_branching", "right_branching"))}}


def best_summary(best: pd.DataFrame) -> dict:
    """``{relation: {...}}`` for metrics.json."""
    out = {}
    for _, r in best.iterrows():
        out[r["relation"]] = {
            "direction": r["direction"], "layer": int(r["layer"]), "head": int(r["head"]), "n": int(r["n"]),
            "accuracy": float(r["accuracy"]), "ci_low": r["ci_low"], "ci_high": r["ci_high"],
            "baseline_offset": int(r["baseline_offset"]), "baseline_accuracy": float(r["baseline_accuracy"]),
            "gain_ci_low": r["gain_ci_low"], "gain_ci_high": r["gain_ci_high"],
            "beats_baseline": _beats(r),
        }
        if pd.notna(r.get("held_out_accuracy", np.nan)):
            out[r["relation"]]["held_out"] = {
                k.removeprefix("held_out_"): (float(r[k]) if isinstance(r[k], (float, np.floating)) else r[k])
                for k in schema.HELD_OUT}
    return out


def _beats(r) -> Optional[bool]:
    """Whether a relation's best head beats its baseline: the adjusted held-out test where there is one, else
    the in-sample gain's interval clear of 0 (None: no intervals)."""
    if pd.notna(r.get("beats_baseline", np.nan)):
        return bool(r["beats_baseline"])
    return bool(r["gain_ci_low"] > 0) if pd.notna(r["gain_ci_low"]) else None


def best_table_text(best: pd.DataFrame) -> str:
    """The console table: best head per relation against its baseline."""
    if best.empty:
        return "(no relation reached min_count)"
    b = best.copy()
    b["order"] = (b["relation"] != ALL).astype(int)
    b = b.sort_values(["order", "n"], ascending=[True, False])

    def ci(lo, hi):
        return "" if pd.isna(lo) else f"[{lo:.3f}, {hi:.3f}]"

    held = "held_out_accuracy" in b.columns and b["held_out_accuracy"].notna().any()
    rows = []
    for r in b.itertuples():
        row = {"relation": r.relation, "n": int(r.n)}
        if held:  # the held-out figure first: the in-sample maximum is biased upward by the choice
            row.update({"held-out head": "" if pd.isna(r.held_out_accuracy) else r.held_out_heads,
                        "held out": "" if pd.isna(r.held_out_accuracy) else f"{r.held_out_accuracy:.3f}",
                        "held-out CI": ci(r.held_out_ci_low, r.held_out_ci_high),
                        "held-out gain CI": ci(r.held_out_gain_ci_low, r.held_out_gain_ci_high)})
        row.update({"in-sample head" if held else "best head": f"{int(r.layer)}-{int(r.head)}", "direction": r.direction,
                    "in-sample max" if held else "accuracy": f"{r.accuracy:.3f}", "95% CI": ci(r.ci_low, r.ci_high),
                    "baseline": f"{r.baseline_accuracy:.3f} ({int(r.baseline_offset):+d})",
                    "gain CI": ci(r.gain_ci_low, r.gain_ci_high),
                    "beats": {True: "yes", False: "no", None: ""}[_beats(r._asdict())]})
        rows.append(row)
    return pd.DataFrame(rows).to_string(index=False)


def console_legend(best: pd.DataFrame, h: HeadsConfig) -> str:
    """What the console table's columns mean, below it."""
    held = "held_out_accuracy" in best.columns and best["held_out_accuracy"].notna().any()
    where = (f"on {h.select_split} and scored on this split" if h.select_split else
             "on each half of the sentences and scored on the other (two folds)")
    lines = []
    if held:
        lines.append(f"held-out head: the head chosen {where}, as layer-head direction (the baseline offset "
                     "chosen with it), one per fold; held out: its accuracy there")
    lines.append("baseline: the best fixed offset's accuracy (offset: head = word + offset); gain CI: accuracy "
                 f"minus baseline, {h.ci:.0%} bootstrap interval over sentences")
    if held:
        lines.append(f"beats: the held-out gain's p-value, adjusted across relations ({h.multiplicity}), "
                     f"below {h.alpha}")
    return "\n".join(lines)


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, heads: HeadsConfig, seed: int,
        out: RunOutput) -> TaskResult:
    """Build (or reuse) the store of ``data`` and run every enabled analysis of ``heads`` on it."""
    _check(heads)
    corpus = load_corpus_cached(data, None, extract.cache_dir)
    report = ensure_store(model, corpus, extract, heads.measure, partial=True, statistics=statistics(corpus, heads))
    sel = other = None
    if heads.held_out and heads.select_split is not None and corpus.has_trees:
        if heads.select_split == data.split:
            raise ProbingError(f"heads.select_split={heads.select_split} is the split scored (data.split): choose "
                               "the best heads on another split, or leave it unset to cross-fit")
        other = load_corpus_cached(data, heads.select_split, extract.cache_dir)
        sel = ensure_store(model, other, extract, heads.measure, partial=True, statistics=statistics(other, heads))
    if not report.complete or (sel is not None and not sel.complete):
        # one part of a multirun over extract.partition: the analysis waits for the whole store
        part = part_metrics(*((report, corpus) if not report.complete else (sel, other)), extract)
        part["complete"] = False
        return TaskResult(part, console=describe_part(part))
    log.info(describe_store(report, corpus))
    select, used = None, [store_use(report, corpus)]
    if sel is not None:
        select = (other, sel.store)
        used.append(store_use(sel, other))
    induction = None
    if heads.detectors and heads.induction_sequences > 0:
        repeated = induction_corpus(corpus, heads.induction_sequences, list(heads.induction_words), seed)
        built = _induction_store(model, repeated, extract, heads)
        induction = (repeated, built.store)
        used.append(store_use(built, repeated))
    result = analyse(corpus, report.store, heads, seed, out, select, induction)
    result.stores.extend(used)
    return result


def _induction_store(model: ModelConfig, corpus: Corpus, extract: ExtractConfig, h: HeadsConfig) -> ExtractReport:
    """The maps of the induction sequences: ``heads.measure`` alone, kept (they are few), in one part."""
    settings = dict(measures=[h.measure], representations=[], keep_maps=True, partitions=1, partition=None)
    if OmegaConf.is_config(extract):
        small = extract.copy()
        for k, v in settings.items():
            small[k] = v
    else:
        small = dataclasses.replace(extract, **settings)
    return ensure_store(model, corpus, small, h.measure)


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract, cfg.heads, cfg.seed, out)


def analyse(corpus: Corpus, store: AttentionStore, h: HeadsConfig, seed: int, out: RunOutput,
            select: Optional[tuple[Corpus, AttentionStore]] = None,
            induction: Optional[tuple[Corpus, AttentionStore]] = None) -> TaskResult:
    """Every enabled analysis of ``h`` on ``store`` (built from ``corpus``), written through ``out``; ``select``:
    the corpus and store the best heads are chosen on (``heads.select_split``; None: cross-fitting);
    ``induction``: the repeated random sequences and their store, for the induction detector (None: none)."""
    _check(h)
    a = _Analysis(corpus, store, h, seed, out)
    best, heads_table = a.relations(select) if corpus.has_trees else (pd.DataFrame(), pd.DataFrame())
    if not corpus.has_trees:
        log.warning("%s has no gold trees: relation accuracy and trees are skipped", corpus.name)
    patterns = a.patterns() if h.patterns else None
    mds = a.distances() if h.distances else None
    if h.trees and corpus.has_trees and store.causal:
        log.info("trees: not decoded for a causal model (a head's row sees only the words on its left)")
    elif h.trees and corpus.has_trees:
        a.trees()
    if h.detectors:
        a.detectors(induction)
    if h.figures:
        a.figures(heads_table, patterns, mds)
    a.metrics.update(a.timer.metrics())
    a.metrics["conventions"] = conventions(h, store, seed)
    groups = kv_groups(store)
    if groups:
        a.metrics["key_value_heads"] = groups
    return out.result(a.metrics, console=a.console(best))


class _Analysis:
    """The analyses of one store, each a stage: its tables go out with the run's identity columns, its
    headline numbers into ``metrics``."""

    def __init__(self, corpus: Corpus, store: AttentionStore, h: HeadsConfig, seed: int, out: RunOutput):
        self.corpus, self.store, self.h, self.seed, self.out = corpus, store, h, seed, out
        self.ident = {"model": store.manifest.get("model_name", "?"), "corpus": corpus.name, "split": corpus.split,
                      "measure": store.measure}
        self.title = f"{self.ident['model']} · {self.ident['corpus']} {self.ident['split']}"
        self.idx = store.indices
        self.directions = list(h.directions)
        self.metrics: dict[str, Any] = {**self.ident, "sentences": int(len(self.idx)),
                                        "n_layers": store.num_layers, "n_heads": store.num_heads}
        self.timer = StageTimer()

    def save(self, table: schema.Table, df: pd.DataFrame) -> pd.DataFrame:
        df = df.drop(columns=[c for c in self.ident if c in df.columns]).reset_index(drop=True)
        df = pd.concat([pd.DataFrame({k: [v] * len(df) for k, v in self.ident.items()}), df], axis=1)
        return self.out.table(table.name, df)

    def relations(self, select: Optional[tuple[Corpus, AttentionStore]]) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The heads, baselines and best_heads tables (the best head held out: chosen on ``select``'s sentences,
        or cross-fitted over this store's halves); returns best_heads and heads."""
        h, store = self.h, self.store
        with self.timer("relations", f"relation accuracy of {store.num_layers * store.num_heads} heads over "
                                     f"{len(self.idx)} sentences ({h.bootstrap} bootstrap resamples)"):
            full = self._part(store, self.corpus, self.idx, self.seed)
            tables = [self._tables(ls, group, counts) for ls, part in full.items() for group, counts in part.groups]
            heads_table = self.save(schema.HEADS, pd.concat([t_[0] for t_ in tables], ignore_index=True))
            self.save(schema.BASELINES, pd.concat([t_[1] for t_ in tables], ignore_index=True))
            best = schema.best_heads(heads_table.drop(columns=list(self.ident)))
        if h.held_out and not best.empty:
            with self.timer("held_out", "held-out selection of the best heads"):
                best = best.merge(self._held_out(best, full, select, heads_table), on=["label_set", "relation"],
                                  how="left")
                best = self._decide(best)
        columns = schema.BEST_HEADS.keys + schema.BEST_HEADS.metrics
        best = self.save(schema.BEST_HEADS, best[[c for c in columns if c in best.columns]])
        self.metrics.update(_best_metrics(best))
        if store.causal:
            self.metrics["reachable_share"] = reachable_share(self.corpus, self.idx, self.directions)
        return best, heads_table

    def _part(self, store: AttentionStore, corpus: Corpus, indices: np.ndarray, seed: int) -> dict:
        h = self.h
        return count_part(store, corpus, indices, self.directions, [int(o) for o in h.offsets], list(h.label_sets),
                          h.bootstrap, seed, h.chunk_words, h.block_mb)

    def _tables(self, label_set: LabelSet, directions: list[Direction], counts) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The heads and baselines tables of one label set over ``directions`` (one direction's reachable arcs
        for a causal model; every arc otherwise, its baselines marked ``both``)."""
        h, store = self.h, self.store
        heads, base = accuracy_table(counts, directions, [int(o) for o in h.offsets], store.num_layers,
                                     store.num_heads, h.min_count, h.ci, list(h.skip_relations))
        if len(base):
            base.insert(2, "direction", str(directions[0]) if store.causal else "both")
        return heads, base

    def _decide(self, best: pd.DataFrame) -> pd.DataFrame:
        """``beats_baseline`` per relation: the held-out gain's bootstrap p-value adjusted across the relations
        of each label set (``heads.multiplicity``) below ``heads.alpha``."""
        h = self.h
        best = best.copy()
        best["p_adjusted"] = np.nan
        for ls, rows in best.groupby("label_set").groups.items():
            best.loc[rows, "p_adjusted"] = adjust(best.loc[rows, "held_out_p"].to_numpy(float),
                                                  Multiplicity(h.multiplicity))
        best["beats_baseline"] = (best["p_adjusted"] < h.alpha).astype("boolean").mask(best["p_adjusted"].isna())
        self.metrics["multiplicity"] = {
            "test": "one-sided bootstrap p-value of the held-out gain over the best offset, (1 + #{gain <= 0}) / "
                    "(1 + resamples)", "family": "the relations reported for one label set",
            "method": str(h.multiplicity), "alpha": h.alpha}
        return best

    def _held_out(self, best: pd.DataFrame, full: dict, select: Optional[tuple[Corpus, AttentionStore]],
                  heads_table: pd.DataFrame) -> pd.DataFrame:
        """Per label set and relation of ``best``: the held-out accuracy and gain of the head chosen elsewhere."""
        h, store = self.h, self.store
        if select is not None:
            corpus, sel_store = select
            folds = {ls: [(p, full[ls])] for ls, p in self._part(sel_store, corpus, sel_store.indices,
                                                                 self.seed).items()}
            how = f"chosen on {corpus.name} {corpus.split} ({len(sel_store.indices)} sentences), scored here"
        else:
            a, b = halves(self.idx)
            pa, pb = self._part(store, self.corpus, a, self.seed), self._part(store, self.corpus, b, self.seed + 1)
            folds = {ls: [(pa[ls], pb[ls]), (pb[ls], pa[ls])] for ls in pa}
            how = "two-fold cross-fitting: chosen on one half of the sentences, scored on the other, both ways"
        out = []
        for ls, fold in folds.items():
            rels = best.loc[best["label_set"] == str(ls), "relation"].tolist()
            # the choice ranges over the directions the heads table kept (min_count arcs): for a causal model a
            # direction that sees a handful of a relation's arcs would otherwise win by chance
            shown = heads_table[heads_table["label_set"] == str(ls)]
            kept = {str(r): set(g.astype(str)) for r, g in shown.groupby("relation")["direction"]}
            t = held_out(rels, fold, store.num_layers * store.num_heads, store.num_heads,
                         [int(o) for o in h.offsets], h.ci, kept)
            out.append(t.assign(label_set=str(ls)))
        self.metrics["held_out_selection"] = how
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["label_set", "relation"])

    def patterns(self) -> pd.DataFrame:
        with self.timer("patterns", "attention patterns"):
            patterns = self.save(schema.PATTERNS, patterns_of(self.store, self.corpus, self.h))
            layers = self.save(schema.PATTERNS_LAYERS, layer_means(patterns))
            self.metrics["patterns_layer_mean"] = {m: layers[m].round(4).tolist() for m in schema.PATTERN_METRICS}
        return patterns

    def distances(self) -> pd.DataFrame:
        h, store = self.h, self.store
        with self.timer("distances", f"Jensen-Shannon distances between heads ({h.distance_sentences} sentences)"):
            dist, n_rows = distances_of(store, h)
            self.save(schema.HEAD_DISTANCES, distance_table(dist, store.num_heads))
            mds = self.save(schema.HEAD_MDS, mds_embedding(dist, store.num_heads, self.seed))
            self.metrics["distance_rows"] = n_rows
        return mds

    def trees(self) -> None:
        with self.timer("trees", f"spanning trees from single heads ({self.h.tree_sentences} sentences)"):
            trees = trees_of(self.store, self.corpus, self.h, self.directions)
            if not trees.empty:
                trees = self.save(schema.TREES, trees)
                self.metrics.update(_tree_metrics(trees))

    def detectors(self, induction: Optional[tuple[Corpus, AttentionStore]]) -> None:
        """The detectors table: the word detectors on this store's maps (none where only statistics were kept),
        and induction on its own sequences."""
        h, store = self.h, self.store
        with self.timer("detectors", "head detectors"):
            frames = []
            if isinstance(store, StatisticsStore):
                log.info("detectors: extract.keep_maps=false keeps no maps to score the word detectors on; "
                         "only induction is scored")
            else:
                frames.append(detector_table(store, self.corpus, WORD_DETECTORS, list(h.punct_upos), h.bootstrap,
                                             h.ci, self.seed, Multiplicity(h.multiplicity), h.alpha, h.detector_min_gain, h.block_mb))
            if induction is not None:
                frames.append(induction_table(induction[1], induction[0], h.bootstrap, h.ci, self.seed,
                                              Multiplicity(h.multiplicity), h.alpha, h.detector_min_gain,
                                              h.block_mb))
            if not frames:
                return
            table = self.save(schema.DETECTORS, pd.concat(frames, ignore_index=True))
            passing = table[table["passes"].fillna(False).astype(bool)]
            self.metrics["detector_heads"] = {str(d): int((passing["detector"] == str(d)).sum())
                                              for d in Detector if (table["detector"] == str(d)).any()}

    def figures(self, heads_table: pd.DataFrame, patterns: Optional[pd.DataFrame], mds: Optional[pd.DataFrame]
                ) -> None:
        fig_dir, out = self.out.dir / "figures", self.out
        with self.timer("figures", "figures"):
            fig_dir.mkdir(parents=True, exist_ok=True)
            if not heads_table.empty:
                sub = heads_table[heads_table["label_set"] == shown_label(heads_table)]
                for path in heads_figures.relation_heatmaps(sub, [str(d) for d in self.directions], self.title,
                                                            fig_dir):
                    out.figure(path)
            if patterns is not None:
                out.figure(heads_figures.pattern_plot(patterns, self.title, fig_dir / "patterns.png"))
            if mds is not None:
                out.figure(heads_figures.mds_plot(mds, self.title, fig_dir / "mds.png"))

    def console(self, best: pd.DataFrame) -> str:
        """The summary printed last, after the paths of the results and the dashboard."""
        if not self.corpus.has_trees:
            return f"{self.title}: no gold trees, so no best heads; patterns and head distances are in {self.out.dir}"
        label = None if best.empty else shown_label(best)
        shown = best[best["label_set"] == label] if label else best
        return (f"best head per relation ({self.title}, label set {label or '-'}; layer-head 0-based):\n"
                + best_table_text(shown) + "\n" + console_legend(shown, self.h))
