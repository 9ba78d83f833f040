"""``probing-report <run or sweep dir> [more dirs] [--out FILE]``: one self-contained HTML dashboard.

The page opens with no network (plotly.js is inlined) and compares heads across runs: a layer x head
heatmap per relation, direction and metric (hover: value, CI, n, baseline), a sortable best-heads table,
probe accuracy per layer with selectivity, attention patterns and the MDS of heads, every figure with
the runs side by side. Tables a run lacks are left out with a note. The page writes how many heatmaps it
rendered into ``#status`` (``data-heatmaps``, beside ``data-expected``) so a headless browser can check it.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from probing.report import figures as F
from probing.report.html import escape, figure_div, image_tag, page, write_page
from probing.report.sources import Source, describe, load_sources

log = logging.getLogger(__name__)

MAX_EMBEDDED_PNG = 400_000  # bytes: larger run figures are linked, not embedded
MAX_FIGURES_PER_SOURCE = 8

EARLY_JS = """
window.__probingErrors = [];
window.addEventListener('error', function (e) { window.__probingErrors.push(String(e.message || e)); });
"""

LATE_JS = """
(function () {
  function sortable(table) {
    table.querySelectorAll('thead th').forEach(function (th, i) {
      th.title = 'click to sort';
      th.addEventListener('click', function () {
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        var asc = th.dataset.dir !== 'asc';
        table.querySelectorAll('thead th').forEach(function (o) { delete o.dataset.dir; });
        th.dataset.dir = asc ? 'asc' : 'desc';
        function key(r) {
          var c = r.cells[i], t = c.dataset.v !== undefined ? c.dataset.v : c.textContent, x = parseFloat(t);
          return isNaN(x) ? t : x;
        }
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var c = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y));
          return asc ? c : -c;
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  }
  document.querySelectorAll('table.sortable').forEach(sortable);
  window.addEventListener('load', function () {
    setTimeout(function () {
      var status = document.getElementById('status');
      var n = document.querySelectorAll('.js-plotly-plot g.hm image').length;
      status.dataset.heatmaps = String(n);
      status.dataset.errors = String(window.__probingErrors.length);
      status.textContent = n + ' of ' + status.dataset.expected + ' heatmaps rendered'
        + (window.__probingErrors.length ? '; script errors: ' + window.__probingErrors.join('; ') : '');
    }, 200);
  });
})();
"""


def html_table(df: pd.DataFrame, sortable: bool = True, digits: int = 3) -> str:
    """A (sortable) HTML table; numbers keep their full value in ``data-v`` for sorting."""
    head = "".join(f"<th class='{'l' if not pd.api.types.is_numeric_dtype(df[c]) else ''}'>{escape(c)}</th>"
                   for c in df.columns)
    rows = []
    for rec in df.itertuples(index=False):
        cells = []
        for v in rec:
            if isinstance(v, (float, np.floating)):
                text = "" if not np.isfinite(v) else (f"{v:.{digits}f}" if not float(v).is_integer() or abs(v) < 1
                                                      else f"{int(v)}")
                cells.append(f"<td data-v='{'' if not np.isfinite(v) else v}'>{text}</td>")
            elif isinstance(v, (int, np.integer)):
                cells.append(f"<td>{int(v)}</td>")
            else:
                cells.append(f"<td class='l'>{escape('' if v is None or v is pd.NA else v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cls = "sortable" if sortable else ""
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _figure_block(title: str, fig: Any, n_heatmaps: int, anchor: Optional[str] = None) -> str:
    aid = f" id='{escape(anchor)}'" if anchor else ""
    return f"<h3{aid}>{escape(title)}</h3><div class='fig' data-heatmaps='{n_heatmaps}'>{figure_div(fig)}</div>"


def _anchor(text: str) -> str:
    return "h-" + "".join(c if c.isalnum() else "-" for c in text)


def _heads_section(sources: Sequence[Source]) -> tuple[list[str], int]:
    figs = F.heads_figures(sources)
    if not figs:
        return ["<h2 id='heads'>Heads</h2><p class='note'>No heads table in these runs "
                "(run <code>probing task=heads</code>).</p>"], 0
    parts = ["<h2 id='heads'>Heads: accuracy of each head per relation</h2>",
             "<p class='note'>A head's prediction for a word is the word it attends to most (special tokens "
             "excluded). Top row: accuracy; bottom row: accuracy minus the best fixed-offset baseline. Hover for "
             "the value, its bootstrap CI, n and the baseline. Rows are layers, columns heads.</p>",
             "<p>" + " · ".join(f"<a href='#{_anchor(t)}'>{escape(t)}</a>" for t, _, _ in figs) + "</p>"]
    parts += [_figure_block(t, fig, n, _anchor(t)) for t, fig, n in figs]
    return parts, sum(n for _, _, n in figs)


def _best_section(sources: Sequence[Source]) -> list[str]:
    best = F.best_heads(sources)
    if not len(best):
        return []
    return ["<h2 id='best'>Best head per relation and direction</h2>",
            "<p class='note'>Click a column to sort. gain = accuracy - the best fixed-offset baseline.</p>",
            html_table(best)]


def _simple_section(title: str, anchor: str, figs: list, note: str, missing: str) -> tuple[list[str], int]:
    if not figs:
        return [f"<h2 id='{anchor}'>{escape(title)}</h2><p class='note'>{missing}</p>"], 0
    parts = [f"<h2 id='{anchor}'>{escape(title)}</h2>", f"<p class='note'>{note}</p>"]
    parts += [_figure_block(t, fig, n) for t, fig, n in figs]
    return parts, sum(n for _, _, n in figs)


def _probe_table(sources: Sequence[Source]) -> str:
    frames = []
    for s in sources:
        if s.probes is None or not len(s.probes):
            continue
        df = s.probes[s.probes["metric"].isin(F.PROBE_HEADLINE)]
        idx = [c for c in ("probe", "layer", "head") if c in df.columns]
        if not len(df) or not idx:
            continue
        wide = df.pivot_table(index=idx, columns="metric", values="value", aggfunc="mean", dropna=False).reset_index()
        wide = wide.dropna(how="all", subset=[c for c in wide.columns if c not in idx])
        wide.insert(0, "source", s.label)
        frames.append(wide)
    if not frames:
        return ""
    df = pd.concat(frames, ignore_index=True)
    return "<h3>Probe scores (one row per job)</h3>" + html_table(df)


def _figures_section(sources: Sequence[Source]) -> list[str]:
    parts = []
    for s in sources:
        pngs = [p for p in s.figures if p.stat().st_size <= MAX_EMBEDDED_PNG][:MAX_FIGURES_PER_SOURCE]
        if not pngs:
            continue
        parts.append(f"<h3>{escape(s.label)}</h3>")
        for p in pngs:
            parts.append(f"<figure><figcaption class='note'>{escape(p.relative_to(s.path))}</figcaption>"
                         f"{image_tag(p, p.stem, '900px')}</figure>")
    return (["<h2 id='figures'>Figures of the runs</h2>"] + parts) if parts else []


def render(sources: Sequence[Source], title: str = "probing dashboard") -> str:
    """The whole page for these sources."""
    heads_parts, n_heads = _heads_section(sources)
    probe_parts, n_probe = _simple_section(
        "Probes", "probes", F.probe_figures(sources),
        "Accuracy of the probe on held-out data, the control task's accuracy (same probe, random labels per word "
        "type) and selectivity = accuracy - control accuracy (Hewitt and Liang 2019).",
        "No probe runs or sweep tables here (run <code>probing task=probe</code> or a sweep and "
        "<code>probing-collect</code>).")
    probe_parts.append(_probe_table(sources))
    pattern_parts, n_pat = _simple_section(
        "Attention patterns", "patterns", F.pattern_figures(sources),
        "Average attention of each head to special tokens, punctuation and neighbouring words, and its entropy.",
        "No attention-pattern table in these runs.")
    tree_parts, n_tree = _simple_section(
        "Trees from single heads", "trees", F.tree_figures(sources),
        "Unlabelled attachment score of the tree decoded from each head's attention (maximum spanning tree), "
        "beside the left- and right-branching baselines (hover).", "No trees table in these runs.")
    mds_parts, _ = _simple_section("Heads in two dimensions", "mds", F.mds_figures(sources),
                                   "Multidimensional scaling of the distances between heads' attention maps.",
                                   "No MDS table in these runs.")
    expected = n_heads + n_probe + n_pat + n_tree
    overview = pd.DataFrame([describe(s) for s in sources])
    notes = [f"<li>{escape(s.label)}: {escape(n)}</li>" for s in sources for n in s.notes]
    parts = [f"<script>{EARLY_JS}</script>",
             f"<h1>{escape(title)}</h1>",
             f"<p class='note'>Written {time.strftime('%Y-%m-%d %H:%M')} by <code>probing-report</code>. "
             f"<span id='status' data-expected='{expected}' data-heatmaps='' data-errors=''>"
             f"{expected} heatmaps expected</span></p>",
             "<p><a href='#heads'>heads</a> · <a href='#best'>best heads</a> · <a href='#probes'>probes</a> · "
             "<a href='#patterns'>patterns</a> · <a href='#trees'>trees</a> · <a href='#mds'>MDS</a> · <a href='#figures'>figures</a></p>",
             "<h2>Runs</h2>", html_table(overview, sortable=False)]
    if notes:
        parts.append("<ul class='note'>" + "".join(notes) + "</ul>")
    parts += heads_parts + _best_section(sources) + probe_parts + pattern_parts + tree_parts + mds_parts
    parts += _figures_section(sources)
    return page(title, parts, script=LATE_JS)


def write_dashboard(run_dirs: Sequence[Path], out_file: Path, title: Optional[str] = None,
                    relations: Optional[Sequence[str]] = None) -> Path:
    """Write the dashboard of ``run_dirs`` (run or sweep dirs) to ``out_file``; returns its path.

    ``relations`` keeps only those relations in the heads heatmaps and the best-heads table (all by default).
    """
    sources = load_sources([Path(p) for p in run_dirs])
    if not sources:
        raise FileNotFoundError("nothing to report: no heads, probe or sweep tables in " +
                                ", ".join(str(p) for p in run_dirs))
    if relations:
        for s in sources:
            if s.heads is not None:
                s.heads = s.heads[s.heads["relation"].isin(list(relations))]
    title = title or "probing: " + " vs ".join(s.label for s in sources[:4])
    return write_page(Path(out_file), render(sources, title))


def default_out(dirs: Sequence[Path]) -> Path:
    """``<dir>/dashboard.html`` for one dir, ``./dashboard.html`` when comparing several."""
    return Path(dirs[0]) / "dashboard.html" if len(dirs) == 1 else Path("dashboard.html")


def main(argv: Optional[Sequence[str]] = None) -> None:
    """The ``probing-report`` command."""
    parser = argparse.ArgumentParser(prog="probing-report", description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="run dirs or sweep dirs (results/<experiment>/...)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the HTML file (default: DIR/dashboard.html for one dir, ./dashboard.html for several)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--relations", default=None,
                        help="comma-separated relations to show in the heads section (default: all)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    relations = [r.strip() for r in args.relations.split(",") if r.strip()] if args.relations else None
    try:
        path = write_dashboard(args.dirs, args.out or default_out(args.dirs), args.title, relations)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(path.resolve())


if __name__ == "__main__":
    main()
