"""``probing-report <run or sweep dir> [more dirs] [--out FILE]``: one self-contained HTML dashboard.

The page opens with no network (plotly.js is inlined) and compares heads across runs: a layer x head
heatmap per relation, direction and metric (hover: value, CI, n, baseline), a sortable best-heads table,
probe accuracy per layer with selectivity, attention patterns and the MDS of heads, every figure with
the runs side by side. Tables a run lacks are left out with a note. The page writes how many heatmaps it
rendered into ``#status`` (``data-heatmaps``, beside ``data-expected``) so a headless browser can check it.
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
from probing.report import dashboard_figures, dashboard_importance, dashboard_probes
from probing.report.html import figure_div, image_tag, render_template, write_page
from probing.report.sources import Source, describe, is_finished, is_run_dir, load_sources

log = logging.getLogger(__name__)

MAX_EMBEDDED_PNG = 400_000  # bytes: larger run figures are linked, not embedded
MAX_FIGURES_PER_SOURCE = 8


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


def _anchor(text: str) -> str:
    return "h-" + "".join(c if c.isalnum() else "-" for c in text)


def _blocks(figs: Sequence[dashboard_figures.Fig], anchors: bool = False) -> tuple[list[Block], int]:
    """The figures as page blocks, and how many heatmaps they draw together."""
    blocks = [Block(t, figure_div(fig), n, _anchor(t) if anchors else None) for t, fig, n in figs]
    return blocks, sum(b.heatmaps for b in blocks)


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


def _run_figures(sources: Sequence[Source]) -> list[tuple[str, list[tuple[str, Markup]]]]:
    """Per source with small enough PNGs: its label and (caption, embedded image) pairs."""
    out = []
    for s in sources:
        pngs = [p for p in s.figures if p.stat().st_size <= MAX_EMBEDDED_PNG][:MAX_FIGURES_PER_SOURCE]
        if pngs:
            out.append((s.label, [(str(p.relative_to(s.path)), image_tag(p, p.stem, "900px")) for p in pngs]))
    return out


def render(sources: Sequence[Source], title: str = "probing dashboard") -> str:
    """The whole page for these sources."""
    heads, n_heads = _blocks(dashboard_figures.heads_figures(sources), anchors=True)
    probes, n_probe = _blocks(dashboard_figures.probe_figures(sources))
    vectors, n_vec = _blocks(dashboard_probes.layer_figures(sources) + dashboard_probes.head_figures(sources))
    importance, n_imp = _blocks(dashboard_importance.relation_figures(sources)
                                + dashboard_importance.method_figures(sources)
                                + dashboard_importance.pruning_figures(sources), anchors=True)
    link = dashboard_importance.link_table(sources)
    patterns, n_pat = _blocks(dashboard_figures.pattern_figures(sources))
    trees, n_tree = _blocks(dashboard_figures.tree_figures(sources))
    mds, _ = _blocks(dashboard_figures.mds_figures(sources))  # scatter plots: no heatmaps to count
    best = dashboard_figures.best_heads(sources)
    return render_template(
        "dashboard.html.j2", title=title, written=time.strftime("%Y-%m-%d %H:%M"),
        expected=n_heads + n_probe + n_vec + n_imp + n_pat + n_tree,
        runs=table_data(pd.DataFrame([describe(s) for s in sources])),
        notes=[(s.label, n) for s in sources for n in s.notes],
        heads=heads, best=table_data(best) if len(best) else None, probes=probes,
        probe_table=_probe_table(sources), vectors=vectors, importance=importance,
        link=table_data(link) if len(link) else None, patterns=patterns, trees=trees, mds=mds,
        run_figures=_run_figures(sources))


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
                                (f" (unfinished runs left out: {', '.join(unfinished)})" if unfinished else ""))
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
