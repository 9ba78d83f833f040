"""``task=heads``: every per-head analysis of one store, written as tidy tables, figures and headline metrics.

Reads the attention store only (the model runs only if the store has to be built). Tables in the run dir: ``heads`` (accuracy of
every head per relation and direction, with CIs and the best baseline), ``baselines`` (every offset),
``best_heads``, ``patterns`` and ``patterns_layers``, ``head_distances`` and ``head_mds``, ``trees``;
figures in ``figures/``. The returned dict (``metrics.json``) holds the best head per relation and every
convention the numbers depend on.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import numpy as np
import pandas as pd

from probing import schema
from probing.config import DataConfig, Direction, ExtractConfig, HeadsConfig, LabelSet, ModelConfig, RunConfig
from probing.corpus import Corpus
from probing.corpus.cache import load_corpus_cached
from probing.errors import ProbingError
from probing.extract import ensure_store
from probing.figures import heads as heads_figures
from probing.heads.distances import distance_table, head_distances, mds_embedding
from probing.heads.head_accuracy import accuracy_table, count_relations
from probing.heads.patterns import attention_patterns, layer_means
from probing.heads.rows import rows_convention
from probing.heads.trees import tree_scores
from probing.schema import ALL
from probing.store import AttentionStore
from probing.tasks.base import RunOutput, StageTimer, TaskResult
from probing.tasks.store_summary import describe_store, store_use

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
        "root": "never predicted: a root word is never correct (it counts in 'all')",
        "punctuation": "scored as the relation 'punct' and included in 'all'; patterns: words with UPOS in "
                       f"{list(h.punct_upos)}",
        "min_count": h.min_count, "skip_relations": list(h.skip_relations), "offsets": list(h.offsets),
        "baseline": "the offset with the highest accuracy on the whole data (ties: first in offsets), the same "
                    "for both directions",
        "label_sets": [str(s) for s in h.label_sets],
        "bootstrap": {"resamples": h.bootstrap, "ci": h.ci, "seed": seed, "unit": "sentence",
                      "interval": "percentile"},
        "best_head": "highest accuracy over directions, layers and heads (ties: first direction, lowest "
                     "layer, then head); layer and head are 0-based",
        "patterns": {"rows": str(h.pattern_rows), "positions": "full sequence, special tokens kept",
                     "entropy": "nats"},
        "distances": {"metric": "Jensen-Shannon distance, base 2, mean over attending words",
                      "sentences": h.distance_sentences, "mds": "metric MDS (SMACOF, scikit-learn's: random init, 4 inits), precomputed, seed"},
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


def _first(indices, limit):
    return indices if limit is None else indices[:limit]


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
            "beats_baseline": bool(r["gain_ci_low"] > 0) if pd.notna(r["gain_ci_low"]) else None,
        }
    return out


def best_table_text(best: pd.DataFrame) -> str:
    """The console table: best head per relation against its baseline."""
    if best.empty:
        return "(no relation reached min_count)"
    b = best.copy()
    b["order"] = (b["relation"] != ALL).astype(int)
    b = b.sort_values(["order", "n"], ascending=[True, False])

    def ci(lo, hi):
        return "" if pd.isna(lo) else f"[{lo:.3f}, {hi:.3f}]"

    rows = [{"relation": r.relation, "n": int(r.n), "best head": f"{int(r.layer)}-{int(r.head)}",
             "direction": r.direction, "accuracy": f"{r.accuracy:.3f}", "95% CI": ci(r.ci_low, r.ci_high),
             "baseline": f"{r.baseline_accuracy:.3f} ({int(r.baseline_offset):+d})",
             "gain CI": ci(r.gain_ci_low, r.gain_ci_high),
             "beats": "" if pd.isna(r.gain_ci_low) else ("yes" if r.gain_ci_low > 0 else "no")}
            for r in b.itertuples()]
    return pd.DataFrame(rows).to_string(index=False)


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, heads: HeadsConfig, seed: int,
        out: RunOutput) -> TaskResult:
    """Build (or reuse) the store of ``data`` and run every enabled analysis of ``heads`` on it."""
    _check(heads)
    corpus = load_corpus_cached(data, None, extract.cache_dir)
    report = ensure_store(model, corpus, extract, heads.measure)
    log.info(describe_store(report, corpus))
    result = analyse(corpus, report.store, heads, seed, out)
    result.stores.append(store_use(report, corpus))
    return result


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract, cfg.heads, cfg.seed, out)


def analyse(corpus: Corpus, store: AttentionStore, h: HeadsConfig, seed: int, out: RunOutput) -> TaskResult:
    """Every enabled analysis of ``h`` on ``store`` (built from ``corpus``), written through ``out``."""
    _check(h)
    a = _Analysis(corpus, store, h, seed, out)
    best, heads_table = a.relations() if corpus.has_trees else (pd.DataFrame(), pd.DataFrame())
    if not corpus.has_trees:
        log.warning("%s has no gold trees: relation accuracy and trees are skipped", corpus.name)
    patterns = a.patterns() if h.patterns else None
    mds = a.distances() if h.distances else None
    if h.trees and corpus.has_trees and store.causal:
        log.info("trees: not decoded for a causal model (a head's row sees only the words on its left)")
    elif h.trees and corpus.has_trees:
        a.trees()
    if h.figures:
        a.figures(heads_table, patterns, mds)
    a.metrics.update(a.timer.metrics())
    a.metrics["conventions"] = conventions(h, store, seed)
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

    def relations(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The heads, baselines and best_heads tables; returns best_heads and heads."""
        h, store = self.h, self.store
        with self.timer("relations", f"relation accuracy of {store.num_layers * store.num_heads} heads over "
                                     f"{len(self.idx)} sentences ({h.bootstrap} bootstrap resamples)"):
            # a causal model's heads are scored per direction over the arcs they can see
            groups = [[d] for d in self.directions] if store.causal else [self.directions]
            tables = [t for group in groups for t in self._accuracy(group)]
            heads_table = self.save(schema.HEADS, pd.concat([t_[0] for t_ in tables], ignore_index=True))
            self.save(schema.BASELINES, pd.concat([t_[1] for t_ in tables], ignore_index=True))
            best = self.save(schema.BEST_HEADS, schema.best_heads(heads_table.drop(columns=list(self.ident))))
        self.metrics.update(_best_metrics(best))
        if store.causal:
            self.metrics["reachable_share"] = reachable_share(self.corpus, self.idx, self.directions)
        return best, heads_table

    def _accuracy(self, directions: list[Direction]) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
        """The heads and baselines tables of each label set over ``directions`` (one direction's reachable
        arcs for a causal model; every arc otherwise, its baselines marked ``both``)."""
        h, store = self.h, self.store
        offsets = [int(o) for o in h.offsets]
        counts = count_relations(store, self.corpus, self.idx, directions, offsets, list(h.label_sets),
                                 h.bootstrap, self.seed, h.chunk_words, h.block_mb, reachable=store.causal)
        out = []
        for ls in counts:
            heads, base = accuracy_table(counts[ls], directions, offsets, store.num_layers, store.num_heads,
                                         h.min_count, h.ci, list(h.skip_relations))
            if len(base):
                base.insert(2, "direction", str(directions[0]) if store.causal else "both")
            out.append((heads, base))
        return out

    def patterns(self) -> pd.DataFrame:
        with self.timer("patterns", "attention patterns"):
            patterns = self.save(schema.PATTERNS, attention_patterns(self.store, self.corpus, self.idx,
                                                                     list(self.h.punct_upos), self.h.pattern_rows))
            layers = self.save(schema.PATTERNS_LAYERS, layer_means(patterns))
            self.metrics["patterns_layer_mean"] = {m: layers[m].round(4).tolist() for m in schema.PATTERN_METRICS}
        return patterns

    def distances(self) -> pd.DataFrame:
        h, store = self.h, self.store
        with self.timer("distances", f"Jensen-Shannon distances between heads ({h.distance_sentences} sentences)"):
            dist, n_rows = head_distances(store, _first(self.idx, h.distance_sentences))
            self.save(schema.HEAD_DISTANCES, distance_table(dist, store.num_heads))
            mds = self.save(schema.HEAD_MDS, mds_embedding(dist, store.num_heads, self.seed))
            self.metrics["distance_rows"] = n_rows
        return mds

    def trees(self) -> None:
        with self.timer("trees", f"spanning trees from single heads ({self.h.tree_sentences} sentences)"):
            trees = tree_scores(self.store, self.corpus, _first(self.idx, self.h.tree_sentences), self.directions)
            if not trees.empty:
                trees = self.save(schema.TREES, trees)
                self.metrics.update(_tree_metrics(trees))

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
                + best_table_text(shown))
