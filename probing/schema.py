"""The results schema: every table a run writes, its key and metric columns, each probe's headline metric,
and the one :func:`best_heads` rule.

Writers (the tasks, the sweep collector) and readers (the dashboard, the wandb tracker, ``probing-collect``)
name tables and columns through this module only. A new kind of result is one :class:`Table` entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from probing.config import ProbeKind

# ---- columns -------------------------------------------------------------------------------------------
RUN_KEYS = ("model", "corpus", "split", "measure")  # every per-run table starts with these (measure: the map read)
LAYER, HEAD = "layer", "head"
# columns renamed since run dirs were first written: old name -> name today (results.read_table renames them)
RENAMED_COLUMNS = {"diff": "gain", "diff_ci_low": "gain_ci_low", "diff_ci_high": "gain_ci_high",
                   "heads": "head_set"}
ALL = "all"  # the relation that pools every arc (and the heads label of a probe over every head)
# attention-pattern metrics, in table order (``patterns`` is wide: one column each)
PATTERN_METRICS = ("cls", "sep", "sink", "punct", "next", "prev", "self", "entropy", "uniform_entropy")


@dataclass(frozen=True)
class Table:
    """A table of a run dir: ``name.csv`` + ``name.parquet``, one row per ``keys`` value, ``metrics`` measured."""

    name: str
    keys: tuple[str, ...]
    metrics: tuple[str, ...]
    doc: str


def _t(name: str, keys: Sequence[str], metrics: Sequence[str], doc: str) -> Table:
    return Table(name, tuple(keys), tuple(metrics), doc)


_HEAD_ACC = ("n", "correct", "accuracy", "ci_low", "ci_high")
HEADS = _t("heads", RUN_KEYS + ("label_set", "relation", "direction", LAYER, HEAD),
           _HEAD_ACC + ("baseline_offset", "baseline_accuracy", "gain", "gain_ci_low", "gain_ci_high"),
           "accuracy of every head per relation and direction, with its bootstrap CI and the best offset baseline")
BASELINES = _t("baselines", RUN_KEYS + ("label_set", "relation", "direction", "offset"), _HEAD_ACC + ("best",),
               "accuracy of every fixed offset (head = word + offset) per relation, over the arcs a direction "
               "scores (both: every arc, an encoder's)")
# the held-out figures: the head and offset chosen on other sentences (heads.select_split, or cross-fitting)
HELD_OUT = ("held_out_n", "held_out_accuracy", "held_out_ci_low", "held_out_ci_high", "held_out_baseline_accuracy",
            "held_out_gain", "held_out_gain_ci_low", "held_out_gain_ci_high", "held_out_heads", "held_out_p",
            "p_adjusted", "beats_baseline")
BEST_HEADS = _t("best_heads", HEADS.keys, HEADS.metrics + HELD_OUT,
                "the best head per label set and relation: in-sample maximum, and held out")
PATTERNS = _t("patterns", RUN_KEYS + (LAYER, HEAD), PATTERN_METRICS + ("rows",),
              "mean attention of each head to special tokens, the first position (sink), punctuation and "
              "neighbours; row entropy")
PATTERNS_LAYERS = _t("patterns_layers", RUN_KEYS + (LAYER,), PATTERN_METRICS, "patterns averaged per layer")
HEAD_DISTANCES = _t("head_distances", RUN_KEYS + ("layer_a", "head_a", "layer_b", "head_b"), ("js_distance",),
                    "Jensen-Shannon distance between every two heads")
HEAD_MDS = _t("head_mds", RUN_KEYS + (LAYER, HEAD), ("x", "y"), "2-D metric MDS of the head distances")
TREES = _t("trees", RUN_KEYS + ("method", "direction", LAYER, HEAD), ("uas", "uuas"),
           "spanning trees decoded from single heads, beside branching baselines")
DETECTORS = _t("detectors", RUN_KEYS + ("detector", LAYER, HEAD),
               ("score", "null", "ci_low", "ci_high", "p", "p_adjusted", "passes", "n_sentences", "n_queries"),
               "head detectors: each head's mean attention mass on the detector's target (previous, next word, "
               "itself, the first word, punctuation, earlier copies of its word, the induction target) beside its "
               "null (that mass spread uniformly over the keys the query can reach), the score's bootstrap "
               "interval over sentences, the one-sided bootstrap p-value of score - null > heads.detector_min_gain, "
               "adjusted across the heads of each detector (heads.multiplicity); passes: p_adjusted < heads.alpha")
PROBE_IDENT = ("model", "corpus", "train_split", "eval_split", "features", "measure", "probe", LAYER, HEAD,
               "head_set")
PROBE_SCORES = _t("probe_scores", PROBE_IDENT + ("metric",),
                  ("value", "sd", "ci_low", "ci_high", "n_seeds", "sentences_ci_low", "sentences_ci_high"),
                  "a probe run's headline numbers, long: the mean over its seeds, their sd and a t interval; "
                  "sentences_ci_*: a bootstrap interval of that mean over eval sentences (the structural probes' scores; "
                  "every probe's margin over its best trivial baseline)")
RELATION_F1 = _t("relation_f1", PROBE_IDENT + ("relation", "probe"), ("support", "precision", "recall", "f1"),
                 "relation probe: per-relation scores")
CONFUSION = _t("confusion", PROBE_IDENT + ("gold", "predicted"), ("count",), "relation probe: confusion counts")
RELATION_WEIGHTS = _t("relation_weights", PROBE_IDENT + ("relation", "feature"), ("weight",),
                      "relation probe: coefficients")
ARC_WEIGHTS = _t("arc_weights", PROBE_IDENT + ("feature",), ("weight",), "arc probe: coefficients")
ARC_UAS_BY_RELATION = _t("arc_uas_by_relation", PROBE_IDENT + ("relation",), ("n", "uas"),
                         "arc probe: UAS per relation")
EDGE_WEIGHTS = _t("edge_weights", PROBE_IDENT + ("feature",), ("weight",), "edge probe: coefficients")
MDL_BLOCKS = _t("mdl_blocks", PROBE_IDENT + ("labels", "block"),
                ("start", "end", "train_items", "validation_items", "epochs", "bits", "new_type_items",
                 "new_type_bits"),
                "relation / edge probe with probe.mdl: the online code's blocks (labels task or control): the "
                "items a block's probe trained on and those of the transmitted prefix that stopped it, the epoch "
                "whose weights coded the block; relation: the block's arcs whose dependent word type no earlier "
                "arc had, and their bits")
STRUCTURAL_BY_LENGTH = _t("structural_by_length", PROBE_IDENT + ("metric", "length"), ("value",),
                          "distance / depth probe: DSpr / NSpr per sentence length (the headline averages 5-50)")
INSPECT = _t("inspect", ("measure", "sentence", "sentence_id", LAYER, HEAD, "query"),
             ("choice_position", "choice_weight", "word_choice", "is_gold"), "task=inspect: every head's choices")
INSPECT_PAIR = _t("inspect_pair", ("measure", "sentence", "sentence_id", LAYER, HEAD),
                  ("rank", "weight_ab", "weight_ba", "link", "rank_b_in_a", "rank_a_in_b", "positional_ab",
                   "positional_ba", "excess", "rank_excess"),
                  "task=inspect inspect.pair=a,b: every head ranked by the weight linking words a and b (link: the "
                  "larger of a->b and b->a; rank_b_in_a: b's rank among a's targets, 1 = most attended), beside the "
                  "head's mean weight at the same offsets over the sentence (positional_ab, positional_ba) and the "
                  "rank of the link's excess over it")
IMPORTANCE_KEYS = ("model", "corpus", "split", "readout", "ablation")
IMPORTANCE = _t("importance", IMPORTANCE_KEYS + ("method", "metric", "relation", LAYER, HEAD),
                ("n", "score", "ci_low", "ci_high", "p", "p_adjusted"),
                "task=importance: each head's (method=ablation) or each kept layer's (method=layer_in, head empty) "
                "score drop and loss change when ablated, and gradient importance (method=gradient); p: one-sided "
                "bootstrap p-value of a drop (loss change) above 0, p_adjusted: across the heads (the layers) of one "
                "relation and metric (heads.multiplicity)")
IMPORTANCE_HELDOUT = _t("importance_heldout", IMPORTANCE_KEYS + ("relation",),
                        (LAYER, HEAD, "chosen_drop", "n", "score", "ci_low", "ci_high", "heads_tested",
                         "heads_passing"),
                        "task=importance: per relation the head whose single ablation costs most on a seeded half of "
                        "the evaluation sentences (chosen_drop: its drop there) and its drop on the other half "
                        "(score, n arcs, interval over that half's sentences); heads_passing: heads whose drop has "
                        "p_adjusted < heads.alpha on all sentences (adjusted across the heads_tested)")
PRUNING = _t("pruning", IMPORTANCE_KEYS + ("order", "seed", "fraction_removed", "relation"),
             ("heads_removed", "score", "ci_low", "ci_high", "unablated", "floor", "share_to_floor"),
             "task=importance: the readout's score as heads are removed in gradient, attention or random order "
             "(random_mean: the random orders' mean curve), its interval over evaluation sentences (the random mean "
             "resampled jointly across orders), the unablated score, the all-heads-ablated floor and the share of "
             "the room between them lost, (unablated - score) / (unablated - floor)")
IMPORTANCE_LINK = _t("importance_link", IMPORTANCE_KEYS + ("relation", "direction"),
                     ("n_heads", "rho", "ci_low", "ci_high", "ci_resampled", "role", "p", "p_two_sided",
                      "p_adjusted", "positive"),
                     "task=importance: Spearman over heads between attention accuracy and ablation importance; "
                     "ci_resampled: what the bootstrap over sentences resamples (importance+attention when "
                     "attention accuracy is computed on the same sentences, importance when it comes from "
                     "importance.heads_run and is held fixed); role: primary (all arcs in "
                     "importance.primary_direction, pre-specified) or exploratory; p: one-sided bootstrap p-value of "
                     "rho > 0, p_two_sided of rho != 0; p_adjusted: the primary row's p_two_sided alone, the "
                     "exploratory rows' p adjusted across them (heads.multiplicity); positive: p_adjusted < "
                     "heads.alpha and rho > 0")
SWEEP = _t("sweep", ("job", "task", "probe", "model", "data", "measure", LAYER, HEAD, "metric"), ("value",),
           "probing-collect: one row per job and headline metric")
FAILED_JOBS = _t("failed_jobs", ("job", "job_dir"), (), "probing-collect: jobs without metrics.json, and why")


PATCHING_KEYS = ("model", "pairs", "readout")
_EFFECT = ("n_pairs", "effect", "effect_ci_low", "effect_ci_high", "p", "p_adjusted")
PATCHING = _t("patching", PATCHING_KEYS + ("position", LAYER, HEAD), _EFFECT + ("effect_seed_sd", "attribution"),
              "task=patching: each head's output copied from the corrupt side of the pairs into the clean side at a "
              "position (all pieces, or one named word of each pair that has it: n_pairs); effect: (mean patched - "
              "mean clean) / (mean corrupt - mean clean) of the readout's metric, 0 clean, 1 corrupt, averaged over "
              "readout seeds (effect_seed_sd their sd); interval and two-sided p-value by resampling pairs, adjusted "
              "across the heads of a position (patching.multiplicity); attribution: the same ratio of gradient x "
              "(corrupt - clean) estimates")
PATCHING_PAIRS = _t("patching_pairs", PATCHING_KEYS + ("position", "pair", "readout_seed", LAYER, HEAD),
                    ("kind", "patched", "clean", "corrupt"),
                    "task=patching: every pair's readout metric with each head patched at each position the pair has, "
                    "beside its clean and corrupt metrics (the per-pair numbers behind patching, for analyses by kind)")
PATCHING_RESIDUAL = _t("patching_residual", PATCHING_KEYS + ("position", LAYER), _EFFECT,
                       "task=patching: each layer's input (the residual stream) patched at a position, as patching")
PATCHING_TOP = _t("patching_top", PATCHING_KEYS + ("rank",),
                  (LAYER, HEAD, "chosen_effect") + _EFFECT + ("direct_effect", "direct_ci_low", "direct_ci_high",
                                                               "indirect_effect"),
                  "task=patching: the top heads by effect at every piece on a seeded half of the pairs (chosen_effect) "
                  "and their effect on the other half, p-values adjusted across them; direct_effect: the same patch "
                  "reaching the readout by the residual stream alone, every later block frozen at its clean output "
                  "(path patching; post-LN norms linearised at their clean statistics), indirect_effect: the rest")
PATCHING_ATLAS = _t("patching_atlas", PATCHING_KEYS + ("relation", LAYER, HEAD),
                    ("n_pairs", "attention_accuracy", "attention_ci_low", "attention_ci_high", "offset_baseline",
                     "points", "effect", "effect_ci_low", "effect_ci_high", "p_adjusted", "p_matters", "matters",
                     "quadrant"),
                    "task=patching: per relation of the target -> cue arcs (no arc: a reflexive's antecedent), on "
                    "the scored half of the pairs, how often each head's largest attention from the target goes to "
                    "the cue (the pairs' own arcs, whole clean sentences) beside the offset baseline chosen on the "
                    "other half (points: the difference's interval above 0), and its effect at every "
                    "piece (p_adjusted: of effect != 0; p_matters: the one-sided test of effect > patching.min_effect, "
                    "adjusted across heads; matters: p_matters < patching.alpha)")

# ---- probes --------------------------------------------------------------------------------------------
# The metric each probe reports as its headline (``metrics.json`` -> ``objective``, the dashboard's score).
PROBE_HEADLINE: dict[ProbeKind, str] = {ProbeKind.relation: "accuracy", ProbeKind.arc: "uas",
                                        ProbeKind.edge: "roc_auc", ProbeKind.distance: "uuas",
                                        ProbeKind.depth: "root_accuracy"}
# What the dashboard shows of a probe, headline first.
PROBE_SHOWN = tuple(PROBE_HEADLINE.values()) + ("control_accuracy", "selectivity", "las", "f1", "macro_f1",
                                                 "dspr", "nspr", "codelength_bits", "compression")

# ---- metrics.json --------------------------------------------------------------------------------------
METRICS_FILE, RUN_META_FILE = "metrics.json", "run_meta.json"
FAILED_FILE = "failed.txt"  # a multirun job's one-line error, in its run dir
# Numeric entries of metrics.json that describe a run rather than measure it (not in the sweep table;
# probe_seconds: older runs' probe time, stage_seconds today).
RUN_DESCRIPTORS = frozenset({LAYER, HEAD, "n_heads", "seconds", "probe_seconds", "best_offset", "n_iter", "rank",
                             "epochs", "best_epoch"})


def is_count(metric: str) -> bool:
    """Sizes (``n_train``, ``eval_sentences``...) are kept in tables but are not scores (no heatmap)."""
    return metric.startswith("n_") or metric.endswith("_sentences")


def metric_items(metrics: dict) -> list[tuple[str, float]]:
    """The numeric measurements of a ``metrics.json`` (booleans, texts and run descriptors left out)."""
    return [(k, float(v)) for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in RUN_DESCRIPTORS]


# ---- the best head -------------------------------------------------------------------------------------
BEST_PER = ("label_set", "relation")  # metrics.json and best_heads.csv: the best over directions too


def best_heads(table: pd.DataFrame, per: Sequence[str] = BEST_PER) -> pd.DataFrame:
    """The row of the most accurate head for each value of ``per`` (rows without a finite accuracy are
    ignored). Ties go to the first row in table order: the first direction, then the lowest layer and head,
    as the heads table is written."""
    if table.empty:
        return table
    acc = pd.to_numeric(table["accuracy"], errors="coerce")
    table = table[np.isfinite(acc.to_numpy(dtype=float))]
    if table.empty:
        return table
    first = table.groupby(list(per), sort=False)["accuracy"].idxmax()  # first maximum
    return table.loc[first.to_numpy()].reset_index(drop=True)
