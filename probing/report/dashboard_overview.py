"""The dashboard's first screen: per source (a run, or one measure of it) the best head of each relation, its
held-out choice where the run made one (chosen on other sentences, scored on these) and else the in-sample
maximum, labelled as such; the best job of each probe; and which of the runs' own relation figures the page
embeds (the relations with most arcs first), saying which it leaves out and why.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np
import pandas as pd

from probing import schema
from probing.config import LabelSet
from probing.report.dashboard_figures import anchor, heads_title

MAX_RELATIONS = 20  # rows of the overview grid: it fits one screen; the best-heads table below has them all
ARROWS = {"dep_to_head": "dep→head", "head_to_dep": "head→dep"}


class Column(NamedTuple):
    """A source of the overview grid and what its cells show (held-out choice or in-sample best)."""

    label: str
    basis: str


class Cell(NamedTuple):
    """One source's best head for one relation: ``head`` as layer-head (0-based) with its direction."""

    head: str
    accuracy: str
    mark: str  # ✓ / ✗: the held-out gain over the best positional baseline is / is not significant
    title: str  # the hover text: intervals, gain, the in-sample maximum
    in_sample: bool


class Row(NamedTuple):
    """A relation of the overview grid, the anchor of its heatmaps, its arcs, a cell per source."""

    relation: str
    anchor: str
    n: str
    cells: list[Optional[Cell]]


def shown_label_set(heads: pd.DataFrame) -> str:
    """The label set the overview reads: UD labels as they are where the table has them."""
    if "label_set" not in heads.columns:
        return LabelSet.as_is.value
    sets = [str(v) for v in heads["label_set"].dropna().unique()]
    return LabelSet.as_is.value if LabelSet.as_is.value in sets or not sets else sets[0]


def arcs_per_relation(heads: pd.DataFrame) -> pd.Series:
    """The number of arcs of each relation of a heads table (its largest ``n``)."""
    return heads.groupby("relation")["n"].max() if "n" in heads.columns else heads.groupby("relation").size()


def heads_overview(sources: Sequence[Any]) -> Optional[dict]:
    """The relation x source grid of best heads (``columns``, ``rows``), ``all`` first then the relations with
    most arcs; ``left_out``: the relations past :data:`MAX_RELATIONS`, fewest arcs last; ``held_out``,
    ``in_sample``: whether any cell shows that kind of figure (the legend explains those). None: no heads tables."""
    per = [(s, *_source_cells(s)) for s in sources if s.heads is not None and len(s.heads)]
    if not per:
        return None
    never = sorted(set.intersection(*(set(cells[1]) for _, cells, _, _ in per)))
    arcs: dict[str, float] = {}
    for _, (cells, _), label_set, n in per:
        for rel, v in n.items():
            if str(rel) not in never:
                arcs[str(rel)] = max(arcs.get(str(rel), 0.0), float(v))
    order = sorted(arcs, key=lambda r: (r != schema.ALL, -arcs[r], r))
    rows = []
    for rel in order[:MAX_RELATIONS]:
        label_set = next((ls for _, (cells, _), ls, _ in per if rel in cells), per[0][2])
        rows.append(Row(rel, anchor(heads_title(rel, label_set)), f"{int(arcs[rel]):,}",
                        [cells.get(rel) for _, (cells, _), _, _ in per]))
    columns = [Column(s.label, _basis(cells.values())) for s, (cells, _), _, _ in per]
    kinds = {c.in_sample for _, (cells, _), _, _ in per for c in cells.values()}
    relations = [r for r in order if r != schema.ALL]
    return {"columns": columns, "rows": rows, "left_out": order[MAX_RELATIONS:], "held_out": False in kinds,
            "in_sample": True in kinds, "relations": len(relations),
            "shown": sum(r.relation != schema.ALL for r in rows), "has_all": schema.ALL in arcs, "never": never}


def _basis(cells: Any) -> str:
    kinds = {c.in_sample for c in cells}
    if not kinds:
        return "no relation scored"
    if kinds == {False}:
        return "held-out choice"
    return "in-sample best" if kinds == {True} else "held-out choice (in-sample where marked)"


def never_predicted(heads: pd.DataFrame) -> list[str]:
    """The relations no head ever gets right in either direction (accuracy 0 everywhere): ``root``, whose
    head (ROOT) is never predicted by definition, and any relation like it. Their best head is meaningless."""
    best = pd.to_numeric(heads["accuracy"], errors="coerce").groupby(heads["relation"].astype(str)).max()
    return sorted(str(r) for r in best.index[best.fillna(0).to_numpy() <= 0] if r != schema.ALL)


def _source_cells(src: Any) -> tuple[tuple[dict[str, Cell], list[str]], str, pd.Series]:
    """A source's cell per relation with the relations it leaves out (:func:`never_predicted`), the label
    set they come from and its arcs per relation."""
    df = src.heads
    label_set = shown_label_set(df)
    if "label_set" in df.columns:
        df = df[df["label_set"].astype(str) == label_set]
    never = never_predicted(df)
    best = schema.best_heads(df[~df["relation"].astype(str).isin(never)], per=("relation",))
    held = _held_out(src, label_set)
    cells = {}
    for r in best.to_dict("records"):
        rel = str(r["relation"])
        cells[rel] = _held_cell(held[rel], r) if rel in held else _in_sample_cell(r)
    return (cells, never), label_set, arcs_per_relation(df)


def _held_out(src: Any, label_set: str) -> dict[str, dict]:
    """The run's best_heads rows with a held-out figure, by relation (label set ``label_set``, the source's
    measure where the table has several)."""
    chosen = src.best
    if chosen is None or "held_out_accuracy" not in chosen.columns:
        return {}
    chosen = chosen[chosen["held_out_accuracy"].notna() & (chosen["label_set"].astype(str) == label_set)]
    if src.measure and "measure" in chosen.columns:
        chosen = chosen[chosen["measure"].astype(str) == str(src.measure)]
    return {str(r["relation"]): r for r in chosen.to_dict("records")}


def _interval(lo: Any, hi: Any) -> str:
    return f" [{lo:.3f}, {hi:.3f}]" if pd.notna(lo) and pd.notna(hi) else ""


def _truth(v: Any) -> Optional[bool]:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    return str(v).strip().lower() in ("true", "1", "yes")


def _held_cell(h: dict, best: dict) -> Cell:
    """The held-out choice: the head(s) chosen on other sentences (one per fold when cross-fitted), its
    accuracy on these sentences and whether its gain beats the baseline after multiplicity control."""
    picks = re.findall(r"(\d+-\d+) (\w+)", str(h.get("held_out_heads") or ""))
    heads = list(dict.fromkeys(p[0] for p in picks)) or [f"{int(best['layer'])}-{int(best['head'])}"]
    dirs = list(dict.fromkeys(ARROWS.get(p[1], p[1]) for p in picks)) or [ARROWS.get(str(best["direction"]), "")]
    beats = _truth(h.get("beats_baseline"))
    title = (f"held-out accuracy {h['held_out_accuracy']:.3f}{_interval(h.get('held_out_ci_low'), h.get('held_out_ci_high'))}"
             f"; gain over the best positional baseline {h.get('held_out_gain', np.nan):.3f}"
             f"{_interval(h.get('held_out_gain_ci_low'), h.get('held_out_gain_ci_high'))}"
             + (f"; adjusted p {h['p_adjusted']:.3g}" if pd.notna(h.get("p_adjusted")) else "")
             + f"; in-sample best {int(best['layer'])}-{int(best['head'])} at {best['accuracy']:.3f}")
    return Cell(f"{', '.join(heads)} ({', '.join(dirs)})", f"{h['held_out_accuracy']:.3f}",
                {True: "✓", False: "✗", None: ""}[beats], title, False)


def _in_sample_cell(r: dict) -> Cell:
    """The most accurate head on the sentences it is scored on (biased upward by that choice)."""
    base = r.get("baseline_accuracy", np.nan)
    gain = f"; gain over the best positional baseline {r['accuracy'] - base:.3f}" if pd.notna(base) else ""
    title = f"in-sample best: accuracy {r['accuracy']:.3f}{_interval(r.get('ci_low'), r.get('ci_high'))}{gain}"
    return Cell(f"{int(r['layer'])}-{int(r['head'])} ({ARROWS.get(str(r['direction']), r['direction'])})",
                f"{r['accuracy']:.3f}", "", title, True)


def probe_overview(sources: Sequence[Any]) -> pd.DataFrame:
    """Per source and probe kind: the job with the best headline score (UAS, accuracy...), where it probed,
    how many it was compared with, and its selectivity."""
    rows = []
    for s in sources:
        if s.probes is None or not len(s.probes) or not {"metric", "value"} <= set(s.probes.columns):
            continue
        df = s.probes.assign(layer=pd.to_numeric(s.probes.get("layer"), errors="coerce"),
                             head=pd.to_numeric(s.probes.get("head"), errors="coerce"),
                             value=pd.to_numeric(s.probes["value"], errors="coerce"))
        kinds = df["probe"].astype(str) if "probe" in df.columns else pd.Series("relation", index=df.index)
        for kind, part in df.groupby(kinds, sort=False):
            row = _best_job(part, str(kind))
            if row:
                rows.append({"source": s.label, "probe": kind, **row})
    return pd.DataFrame(rows)


def _best_job(df: pd.DataFrame, kind: str) -> Optional[dict]:
    headline = next((m for k, m in schema.PROBE_HEADLINE.items() if k.value == kind), "accuracy")
    jobs = df.groupby(["layer", "head"], dropna=False)
    score = df[df["metric"] == headline].groupby(["layer", "head"], dropna=False)["value"].mean().dropna()
    if not len(score):
        return None
    layer, head = score.idxmax()
    sel = df[(df["metric"] == "selectivity") & _at(df, layer, head)]["value"]
    where = ("all layers" if pd.isna(layer) else f"layer {int(layer)}") + ("" if pd.isna(head) else f", head {int(head)}")
    return {"best at": where, "of": f"{jobs.ngroups} {'jobs' if jobs.ngroups > 1 else 'job'}", "score": headline,
            "value": float(score.max()), "selectivity": float(sel.mean()) if len(sel) else np.nan}


def _at(df: pd.DataFrame, layer: Any, head: Any) -> pd.Series:
    """The rows of the job at ``layer`` and ``head`` (NaN: the job did not set it)."""
    return _same(df["layer"], layer) & _same(df["head"], head)


def _same(col: pd.Series, v: Any) -> pd.Series:
    return col.isna() if pd.isna(v) else col == v


class RunFigures(NamedTuple):
    """A source's own PNG figures the page embeds, and a sentence on those it leaves out (or '')."""

    label: str
    images: list[Path]
    note: str


def relation_of_figure(path: Path, names: dict[str, str]) -> Optional[str]:
    """The relation a run's figure is drawn for (``heads_<relation>.png``, ``importance_<relation>.png``, the
    relation's name made file-safe), or None for a figure of the whole model."""
    m = re.match(r"(?:heads|importance)_(.+)$", path.stem)
    return names.get(m.group(1)) if m else None


def _file_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def run_figures(sources: Sequence[Any], max_bytes: int, max_relations: int) -> list[RunFigures]:
    """Per source: its relation figures for the ``max_relations`` relations with most arcs, then its other
    figures; what is left out (fewer arcs, or a file over ``max_bytes``) is named in the note."""
    out = []
    for s in sources:
        arcs = _arcs_of(s)
        names = {_file_safe(r): r for r in arcs.index}
        small = [p for p in s.figures if p.stat().st_size <= max_bytes]
        large = [p.name for p in s.figures if p.stat().st_size > max_bytes]
        per_rel = {relation_of_figure(p, names): p for p in small if relation_of_figure(p, names)}
        ranked = sorted(per_rel, key=lambda r: (r != schema.ALL, -float(arcs[r]), r))
        shown, dropped = ranked[:max_relations], ranked[max_relations:]
        others = [p for p in small if p not in per_rel.values()]
        images = [per_rel[r] for r in shown] + others
        if not images:
            continue
        notes = []
        if dropped:
            notes.append(f"{len(shown)} of {len(ranked)} relations shown (the {len(dropped)} with fewest arcs left "
                         f"out: {', '.join(dropped)}); the interactive heatmaps above have every relation.")
        if large:
            notes.append(f"Too large to embed (over {max_bytes // 1000} kB), in the run dir: {', '.join(large)}.")
        out.append(RunFigures(s.label, images, " ".join(notes)))
    return out


def _arcs_of(src: Any) -> pd.Series:
    """Arcs per relation of a source's heads table (its overview label set), else of its importance table."""
    for table in (src.heads, src.importance):
        if table is not None and len(table) and "relation" in table.columns:
            if "label_set" in table.columns:
                table = table[table["label_set"].astype(str) == shown_label_set(table)]
            return arcs_per_relation(table)
    return pd.Series(dtype=float)
