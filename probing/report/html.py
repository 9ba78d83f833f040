"""Self-contained HTML pages: plotly.js inlined once, figures as divs, images as data URIs (no network)."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any, Iterable

CSS = """
body { font-family: system-ui, -apple-system, Segoe UI, Roboto, sans-serif; margin: 1.2em 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
h3 { font-size: 1.05em; margin-bottom: .3em; }
table { border-collapse: collapse; font-size: .85em; }
th, td { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f3f3f3; cursor: pointer; user-select: none; }
td.l, th.l { text-align: left; }
td.gold { background: #c8ecc8; }
.note { color: #666; font-size: .9em; }
.side { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: flex-start; }
.side > div { flex: 1 1 560px; min-width: 420px; }
code { background: #f5f5f5; padding: 0 3px; }
"""


def escape(text: Any) -> str:
    return html.escape(str(text))


def plotly_js() -> str:
    """The full plotly.js bundle (a few MB) so the page renders with no network."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def figure_div(fig: Any, div_id: str | None = None, css_class: str = "") -> str:
    """A plotly figure as a ``<div>`` that uses the page's inlined plotly.js."""
    body = fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})
    return f'<div class="{css_class}">{body}</div>' if css_class else body


def image_tag(path: Path, alt: str = "", width: str = "100%") -> str:
    """A PNG embedded as a data URI."""
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return f'<img alt="{escape(alt)}" style="max-width:{width}" src="data:image/png;base64,{data}">'


def page(title: str, parts: Iterable[str], plotly: bool = True, script: str = "") -> str:
    """A whole HTML document: CSS, plotly.js inline (when ``plotly``), the body parts, a trailing script."""
    head_js = f"<script>{plotly_js()}</script>" if plotly else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{escape(title)}</title><style>{CSS}</style>{head_js}</head>\n<body>\n"
        + "\n".join(parts)
        + (f"\n<script>{script}</script>" if script else "")
        + "\n</body></html>\n"
    )


def write_page(path: Path, text: str) -> Path:
    """Write atomically (a half-written page never replaces a good one)."""
    from probing.store import atomic_write_bytes

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path
