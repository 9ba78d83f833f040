"""Self-contained HTML pages from the jinja2 templates in ``templates/``: CSS, scripts and plotly.js inlined,
figures as divs, images as data URIs (no network)."""

from __future__ import annotations

import base64
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from probing.io import atomic_write_bytes

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")


def plotly_js() -> str:
    """The full plotly.js bundle (a few MB) so the page renders with no network."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def static_text(name: str) -> Markup:
    """A file of ``static/`` (CSS, JS), trusted, to inline into a page."""
    return Markup((STATIC / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The templates' environment; autoescape is on, so trusted HTML (figure divs, images) comes as Markup."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    env.globals.update(static=static_text, plotly_js=lambda: Markup(plotly_js()))
    return env


def render_template(name: str, **context: Any) -> str:
    """Render ``templates/<name>`` with ``context``."""
    return environment().get_template(name).render(**context)


def figure_div(fig: Any, div_id: str | None = None, css_class: str = "") -> Markup:
    """A plotly figure (a figure object, or a figure dict in plotly's JSON form, written as it is) as a
    ``<div>`` that uses the page's inlined plotly.js."""
    import plotly.io as pio

    body = Markup(pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, validate=False,
                              config={"displaylogo": False, "responsive": True}))
    return Markup('<div class="{}">{}</div>').format(css_class, body) if css_class else body


def image_tag(path: Path, alt: str = "", width: str = "100%") -> Markup:
    """A PNG embedded as a data URI."""
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return Markup('<img alt="{}" style="max-width:{}" src="data:image/png;base64,{}">').format(alt, width, data)


def write_page(path: Path, text: str) -> Path:
    """Write atomically (a half-written page never replaces a good one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path
