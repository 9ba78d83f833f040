"""Open a report page in headless Chromium: the DOM after its scripts ran, its console messages, a screenshot.

Used by the browser tests and to make the README's screenshots::

    python tests/browser.py results/x/dashboard.html docs/img/dashboard.png --crop 0:1000 --width 1300

The page is loaded from disk with networking off, as a reader would open it offline.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0")
# Chromium logs the page's console messages to stderr as `INFO:CONSOLE(line)] "message", source: URL (line)`
CONSOLE = re.compile(r':CONSOLE[:(]\d*\)?\] "(.*)", source: (\S*)')


def find_chromium() -> Optional[str]:
    """The path of a Chromium/Chrome binary, or None."""
    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


@dataclass
class Rendered:
    """What the browser made of a page: the serialised DOM and the console messages of the page itself."""

    dom: str
    console: list[str]
    stderr: str

    def status(self) -> dict[str, str]:
        """The ``data-*`` attributes of the page's ``#status`` element (the dashboard's heatmap count)."""
        span = re.search(r'<span id="status"([^>]*)>', self.dom)
        return dict(re.findall(r'data-([a-z]+)="([^"]*)"', span.group(1))) if span else {}


def render(page: Path, screenshot: Optional[Path] = None, width: int = 1300, height: int = 1600,
           budget_ms: int = 30_000, timeout_s: int = 300) -> Rendered:
    """Load ``page`` in headless Chromium, let its scripts run for up to ``budget_ms`` of virtual time, and
    return its DOM and console messages (and write a ``width`` x ``height`` screenshot when asked)."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("headless Chromium not found (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="probing-chromium-") as profile:
        extra = ["--dump-dom"]
        if screenshot is not None:
            extra += [f"--screenshot={Path(screenshot).resolve()}", f"--window-size={width},{height}"]
        got = subprocess.run([binary, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                              *extra, Path(page).resolve().as_uri()], capture_output=True, text=True,
                             timeout=timeout_s)
    if got.returncode != 0:
        raise RuntimeError(f"chromium failed ({got.returncode}): {got.stderr[-1000:]}")
    console = [m.group(1) for m in CONSOLE.finditer(got.stderr) if m.group(2).startswith("file:")]
    return Rendered(got.stdout, console, got.stderr)


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Screenshot a page; ``--crop Y0:Y1`` keeps a band of a tall page, ``--scale`` shrinks the image."""
    ap = argparse.ArgumentParser(prog="python tests/browser.py", description=main.__doc__)
    ap.add_argument("page", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--width", type=int, default=1300)
    ap.add_argument("--height", type=int, default=1600, help="window height (make it tall to crop further down)")
    ap.add_argument("--crop", default=None, help="Y0:Y1 pixel rows to keep")
    ap.add_argument("--scale", type=float, default=1.0)
    args = ap.parse_args(argv)
    got = render(args.page, args.out, args.width, args.height)
    if args.crop or args.scale != 1.0:
        from PIL import Image

        im = Image.open(args.out)
        if args.crop:
            y0, y1 = (int(v) for v in args.crop.split(":"))
            im = im.crop((0, y0, im.width, min(y1, im.height)))
        if args.scale != 1.0:
            im = im.resize((round(im.width * args.scale), round(im.height * args.scale)), Image.LANCZOS)
        im.save(args.out, optimize=True)
    st = got.status()
    print(f"{args.out}: {args.out.stat().st_size // 1024} KiB; console messages: {len(got.console)}"
          + (f"; {st.get('heatmaps')} of {st.get('expected')} heatmaps rendered" if st else ""))


if __name__ == "__main__":
    main()
