"""The first screen of a ``task=importance`` run: per relation the head whose ablation costs the readout most
(its score drop with the bootstrap interval), the unablated score and the floor with every head ablated (the
pruning curves' last point; absent with ``importance.pruning=false``), each relation linked to its figure in
the importance section; and how many relations the run kept (``importance.min_count`` arcs) against the
relations its attention-accuracy table has.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Sequence

import numpy as np
import pandas as pd

from probing import schema
from probing.config import LabelSet
from probing.report.dashboard_figures import anchor
from probing.report.dashboard_importance import ABLATION, drop_metric, importance_title, with_importance


class Row(NamedTuple):
    """A relation of one importance run: its costliest head and the score it falls to without any head."""

    relation: str
    anchor: str  # the relation's figure in the importance section
    n: str
    head: str  # layer-head, counted from 0
    drop: str  # the readout's score drop when that head alone is ablated, with its interval
    clean: str  # the unablated score ('' where not known)
    floor: str  # the score with every head ablated ('' where not measured)


class Run(NamedTuple):
    """One importance source: its label, the readout's drop metric, its rows and what the rows count."""

    label: str
    metric: str
    rows: list[Row]
    kept: str  # a sentence: how many relations the run kept and why the other tables have more or fewer
    held_out: bool = False  # the head was chosen on one half of the sentences and its drop is the other half's

    @property
    def has_floor(self) -> bool:
        """Whether the run measured the score with every head ablated (it drew pruning curves)."""
        return any(r.floor for r in self.rows)


def importance_overview(sources: Sequence[Any]) -> list[Run]:
    """One :class:`Run` per importance source with single-head ablations (``all`` first, most arcs next)."""
    out = []
    for s in with_importance(sources):
        drop = drop_metric(s.importance)
        if drop is None:
            continue
        abl = s.importance[(s.importance["method"] == ABLATION) & (s.importance["metric"] == drop)
                           & s.importance["head"].notna()]
        if not len(abl):
            continue
        held = s.importance_heldout
        held_out = held is not None and len(held) > 0
        # the costliest head chosen on other sentences than its drop is scored on, where the run has it
        top = held.copy() if held_out else abl.loc[abl.groupby("relation")["score"].idxmax().to_numpy()]
        top = top.sort_values(["n", "relation"], ascending=[False, True], kind="stable")
        top = top.sort_values("relation", key=lambda c: c != schema.ALL, kind="stable")
        ends = _ends(s.pruning)
        clean_all = s.metrics.get(f"clean_{drop[: -len('_drop')]}")
        rows = [_row(s.label, r, ends, clean_all) for r in top.to_dict("records")]
        out.append(Run(s.label, drop, rows, kept_sentence(s, [str(r) for r in top["relation"]]), held_out))
    return out


def _ends(prune: Optional[pd.DataFrame]) -> pd.DataFrame:
    """Per relation the pruning curves' first and last points: the unablated score (``clean``) and the score
    with every head removed (``floor``), the same for every order."""
    if prune is None or not len(prune):
        return pd.DataFrame(columns=["clean", "floor"])
    frac = pd.to_numeric(prune["fraction_removed"], errors="coerce")
    g = prune.assign(fraction_removed=frac).groupby("relation")
    first = prune[frac == g["fraction_removed"].transform("min")].groupby("relation")["score"].mean()
    last = prune[(frac >= 1.0)].groupby("relation")["score"].mean()
    return pd.DataFrame({"clean": first, "floor": last})


def _num(v: Any) -> str:
    return f"{float(v):.3f}" if v is not None and pd.notna(v) else ""


def _row(label: str, r: dict, ends: pd.DataFrame, clean_all: Any) -> Row:
    rel = str(r["relation"])
    lo, hi = r.get("ci_low"), r.get("ci_high")
    ci = f" [{lo:+.3f}, {hi:+.3f}]" if pd.notna(lo) and pd.notna(hi) else ""
    clean = ends["clean"].get(rel, np.nan) if rel in ends.index else np.nan
    if pd.isna(clean) and rel == schema.ALL:
        clean = clean_all
    floor = ends["floor"].get(rel, np.nan) if rel in ends.index else np.nan
    n = r.get("n")
    return Row(rel, anchor(importance_title(label, rel)), "" if n is None or pd.isna(n) else f"{int(n):,}",
               f"{int(r['layer'])}-{int(r['head'])}", f"{r['score']:+.3f}{ci}", _num(clean), _num(floor))


def kept_sentence(src: Any, kept: Sequence[str]) -> str:
    """How many relations an importance run scored (those with at least ``importance.min_count`` arcs) beside
    how many its attention-accuracy table has (every relation with an arc)."""
    rels = [r for r in kept if r != schema.ALL]
    min_count = (src.config.get("importance") or {}).get("min_count")
    bound = f"at least importance.min_count={min_count} arcs" if min_count is not None else "enough arcs"
    text = f"{len(rels)} relation{'s' * (len(rels) != 1)} with {bound}, and all arcs"
    heads = src.linked_heads
    if heads is not None and len(heads) and "relation" in heads.columns:
        if "label_set" in heads.columns:
            heads = heads[heads["label_set"].astype(str) == LabelSet.as_is.value]
        others = sorted(set(heads["relation"].astype(str)) - set(kept) - {schema.ALL})
        if others:
            text += (f"; the attention-accuracy table below has {len(others)} more relation"
                     f"{'s' * (len(others) != 1)} under that bound, not ablated")
    return text + "."
