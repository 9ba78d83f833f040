"""``probing-report <run or sweep dir> [more dirs] [--out FILE]``: one self-contained HTML dashboard.

The page opens with no network (plotly.js is inlined) and compares heads across runs. It starts with an
overview that fits one screen (an importance run's costliest head per relation first, the best head per relation
for every source, the best job per probe, links to the sections; relations counted alike everywhere: as-is labels
besides ``all``), then the sections, collapsible: a layer x head heatmap per relation, direction and metric
(hover: value, CI, n, baseline), a sortable best-heads table, probe accuracy per layer with selectivity,
attention patterns and the MDS of heads, every figure with the runs side by side. What the runs lack is named
in one line instead of a section. The page writes how many heatmaps it rendered into ``#status``
(``data-heatmaps``, beside ``data-expected``) so a headless browser can check it.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import numpy as np
import pandas as pd
from markupsafe import Markup

from probing import schema
from probing.config import LabelSet
from probing.report import (
    dashboard_detectors,
    dashboard_figures,
    dashboard_importance,
    dashboard_importance_overview,
    dashboard_overview,
    dashboard_patching,
    dashboard_probes,
    plotly_json,
)
from probing.report.html import figure_div, image_tag, render_template, write_page
from probing.report.sources import Source, describe, is_finished, is_run_dir, load_sources

log = logging.getLogger(__name__)

MAX_EMBEDDED_PNG = 400_000  # bytes: larger run figures are named, not embedded
MAX_RELATION_FIGURES = 8  # per source: the runs' own PNGs of the relations with most arcs (all are interactive)
MAX_OPEN_FIGURES = 4  # a page with more figures opens with its sections closed, under the overview
# The sections under the overview, in page order: anchor and name.
SECTIONS = (("runs", "runs"), ("heads", "heads per relation"), ("best", "best-heads table"), ("probes", "probes"),
            ("vectors", "probes on representations"), ("importance", "importance"),
            ("patching", "patching"),
            ("patterns", "attention patterns"), ("types", "head types"), ("trees", "trees from single heads"),
            ("mds", "heads in two dimensions"), ("figures", "figures of the runs"))


class Column(NamedTuple):
    """A table header."""

    name: str
    cls: str  # 'l' (left-aligned) for text columns


class Cell(NamedTuple):
    """A table cell, its text already formatted."""

    text: str
    v: Optional[str]  # data-v: the full number the sortable table sorts by (None: not a float cell)
    cls: str


class Block(NamedTuple):
    """A figure of the page: its title, its div, how many heatmaps it draws, its anchor (or None)."""

    title: str
    div: Markup
    heatmaps: int
    anchor: Optional[str] = None


def _cell(v: Any, digits: int) -> Cell:
    if isinstance(v, (float, np.floating)):
        if not np.isfinite(v):
            return Cell("", "", "")
        text = f"{v:.{digits}f}" if not float(v).is_integer() or abs(v) < 1 else f"{int(v)}"
        return Cell(text, f"{v}", "")
    if isinstance(v, (int, np.integer)):
        return Cell(str(int(v)), None, "")
    return Cell(str("" if v is None or v is pd.NA else v), None, "l")


def table_data(df: pd.DataFrame, digits: int = 3) -> dict:
    """``df`` as the ``columns`` and ``rows`` of cells that the templates' ``sortable_table`` macro renders."""
    columns = [Column(str(c), "" if pd.api.types.is_numeric_dtype(df[c]) else "l") for c in df.columns]
    rows = [[_cell(v, digits) for v in rec] for rec in df.itertuples(index=False)]
    return {"columns": columns, "rows": rows}


def html_table(df: pd.DataFrame, sortable: bool = True, digits: int = 3) -> str:
    """A (sortable) HTML table; numbers keep their full value in ``data-v`` for sorting."""
    return render_template("table.html.j2", table=table_data(df, digits), sortable=sortable)


def _blocks(figs: Sequence[dashboard_figures.Fig], anchors: bool = False) -> list[Block]:
    """The figures as page blocks; a heatmap whose values lie along one layer or head axis is drawn as a line
    (and no longer counted as a heatmap)."""
    blocks = []
    for t, fig, n in figs:
        n -= plotly_json.lines_for_flat_heatmaps(fig)
        blocks.append(Block(t, figure_div(fig), n, dashboard_figures.anchor(t) if anchors else None))
    return blocks


def _probe_table(sources: Sequence[Source]) -> Optional[dict]:
    frames = []
    for s in sources:
        if s.probes is None or not len(s.probes):
            continue
        df = s.probes[s.probes["metric"].isin(schema.PROBE_SHOWN)]
        idx = [c for c in ("probe", "layer", "head") if c in df.columns]
        if not len(df) or not idx:
            continue
        wide = df.pivot_table(index=idx, columns="metric", values="value", aggfunc="mean", dropna=False).reset_index()
        wide = wide.dropna(how="all", subset=[c for c in wide.columns if c not in idx])
        wide.insert(0, "source", s.label)
        frames.append(wide)
    return table_data(pd.concat(frames, ignore_index=True)) if frames else None


def _run_figures(sources: Sequence[Source]) -> list[tuple[str, list[tuple[str, Markup]], str]]:
    """Per source with figures small enough to embed: its label, (caption, embedded image) pairs, and the
    sentence saying which it leaves out."""
    return [(f.label, [(str(p.relative_to(s.path)), image_tag(p, p.stem, "900px")) for p in f.images], f.note)
            for s in sources
            for f in dashboard_overview.run_figures([s], MAX_EMBEDDED_PNG, MAX_RELATION_FIGURES)]


def _figures(sources: Sequence[Source]) -> dict[str, list[Block]]:
    """Every plotly figure of the page by section."""
    return {
        "heads": _blocks(dashboard_figures.heads_figures(sources), anchors=True),
        "probes": _blocks(dashboard_figures.probe_figures(sources)),
        "vectors": _blocks(dashboard_probes.layer_figures(sources) + dashboard_probes.head_figures(sources)),
        "importance": _blocks(dashboard_importance.relation_figures(sources)
                              + dashboard_importance.method_figures(sources)
                              + dashboard_importance.pruning_figures(sources), anchors=True),
        "patching": _blocks(dashboard_patching.atlas_figures(sources) + dashboard_patching.effect_figures(sources)),
        "patterns": _blocks(dashboard_figures.pattern_figures(sources)),
        "types": _blocks(dashboard_detectors.type_figures(sources)),
        "trees": _blocks(dashboard_figures.tree_figures(sources)),
        "mds": _blocks(dashboard_figures.mds_figures(sources))}


def _navigation(parts: dict[str, Any]) -> tuple[list[tuple[str, str, str]], list[str]]:
    """The sections the page holds as (anchor, name, what it holds in plain words), and the names of those
    these runs have nothing for (one line on the page instead of an empty section each)."""
    shown, absent = [], []
    for anchor, name in SECTIONS:
        got = parts.get(anchor)
        if not got:
            absent.append(name)
            continue
        shown.append((anchor, name, _holds(anchor, got)))
    return shown, absent


def _runs_table(sources: Sequence[Source]) -> pd.DataFrame:
    """A row per source; counts as whole numbers, columns no source fills left out."""
    df = pd.DataFrame([describe(s) for s in sources]).dropna(axis=1, how="all")
    return df.astype({c: "Int64" for c in ("sentences", "relations", "jobs") if c in df.columns})


def _holds(anchor: str, got: Any) -> str:
    """What a section holds, in words: sources, relations (besides ``all``, as the runs table and the
    overview count them), figures, or a table."""
    if anchor == "runs":
        n = len(got["rows"])
        return f"{n} source{'s' * (n != 1)}"
    if anchor in ("best", "figures"):
        return {"best": "every relation and direction", "figures": "the PNG files of the runs"}[anchor]
    if isinstance(got, dict):
        return "a table"
    if anchor == "heads":
        return heads_count([b.title for b in got])
    n = len(got)
    return f"{n} figure{'s' * (n != 1)}"


def relations_text(n: int, with_all: bool) -> str:
    """``N relations and all arcs``: how every place of the page counts relations (``all`` never among them)."""
    return f"{n} relation{'s' * (n != 1)}" + (" and all arcs" if with_all else "")


def heads_count(titles: Sequence[str]) -> str:
    """What the heads section holds, from its figures' titles (``relation (label set)``): the as-is relations
    besides ``all``, and the figures of other label sets (base labels that merge subtypes) on their own."""
    parts = [t.rsplit(" (", 1) for t in titles]
    as_is = {rel for rel, ls in parts if ls.rstrip(")") == LabelSet.as_is.value}
    other = sum(ls.rstrip(")") != LabelSet.as_is.value for _, ls in parts)
    text = relations_text(len(as_is - {schema.ALL}), schema.ALL in as_is)
    return text + (f", {other} more figure{'s' * (other != 1)} of base labels" if other else "")


def _importance_holds(runs: Sequence[dashboard_importance_overview.Run], figures: str) -> str:
    """The importance section in words: the relations ablated (as the overview counts them) and its figures."""
    rels = {r.relation for run in runs for r in run.rows}
    if not rels:
        return figures
    return f"{relations_text(len(rels - {schema.ALL}), schema.ALL in rels)} ablated; {figures}"


def render(sources: Sequence[Source], title: str = "probing dashboard") -> str:
    """The whole page for these sources: the overview first, then a section (collapsible) per kind of figure."""
    figs = _figures(sources)
    best = dashboard_figures.best_heads(sources)
    link = dashboard_importance.link_table(sources)
    types = dashboard_detectors.type_table(sources)
    atlas = dashboard_patching.atlas_table(sources)
    probe_best = dashboard_overview.probe_overview(sources)
    tables = {"best": table_data(best) if len(best) else None, "probe_table": _probe_table(sources),
              "link": table_data(link) if len(link) else None,
              "types_table": table_data(types) if len(types) else None,
              "atlas_table": table_data(atlas) if len(atlas) else None}
    run_figures = _run_figures(sources)
    runs = table_data(_runs_table(sources))
    parts = {"runs": runs, **figs, "best": tables["best"], "figures": run_figures,
             "probes": figs["probes"] or tables["probe_table"], "importance": figs["importance"] or tables["link"]}
    nav, absent = _navigation(parts)
    importance_overview = dashboard_importance_overview.importance_overview(sources)
    nav = [(a, name, _importance_holds(importance_overview, what) if a == "importance" else what)
           for a, name, what in nav]
    n_figures = sum(len(b) for b in figs.values())
    only_importance = bool(importance_overview) and all(s.importance is not None for s in sources)
    return render_template(
        "dashboard.html.j2", title=title, written=time.strftime("%Y-%m-%d %H:%M"),
        expected=sum(b.heatmaps for blocks in figs.values() for b in blocks),
        overview=dashboard_overview.heads_overview(sources),
        probe_overview=table_data(probe_best) if len(probe_best) else None,
        importance_overview=importance_overview,
        nav=nav, absent=absent, open=n_figures <= MAX_OPEN_FIGURES,
        open_importance=only_importance or n_figures <= MAX_OPEN_FIGURES,
        runs=runs,
        notes=[(s.label, n) for s in sources for n in s.notes], **figs, **tables, run_figures=run_figures)


def write_dashboard(run_dirs: Sequence[Path], out_file: Path, title: Optional[str] = None,
                    relations: Optional[Sequence[str]] = None) -> Path:
    """Write the dashboard of ``run_dirs`` (run or sweep dirs) to ``out_file``; returns its path.

    ``relations`` keeps only those relations in the heads heatmaps and the best-heads table (all by default).
    """
    sources = load_sources([Path(p) for p in run_dirs])
    if not sources:
        unfinished = [str(p) for p in run_dirs if not is_finished(Path(p)) and is_run_dir(Path(p))]
        raise FileNotFoundError("nothing to report: no heads, probe, importance or sweep tables in " +
                                ", ".join(str(p) for p in run_dirs) +
                                (f" (unfinished or failed runs left out: {', '.join(unfinished)})" if unfinished else ""))
    if relations:
        for s in sources:
            if s.heads is not None:
                s.heads = s.heads[s.heads["relation"].isin(list(relations))]
    title = title or "probing: " + " vs ".join(s.label for s in sources[:4])
    return write_page(Path(out_file), render(sources, title))


def default_out(dirs: Sequence[Path]) -> Path:
    """``<dir>/dashboard.html`` for one dir; for several, a new file in the results folder
    (``$PROBING_RESULTS_DIR``, default ``results/``), never the current directory."""
    if len(dirs) == 1:
        return Path(dirs[0]) / "dashboard.html"
    results = Path(os.environ.get("PROBING_RESULTS_DIR", "results"))
    return results / f"dashboard_{time.strftime('%Y-%m-%d_%H-%M-%S')}.html"
