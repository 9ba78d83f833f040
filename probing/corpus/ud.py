"""A UD treebank by name (``data=ud data.treebank=en_ewt``): one split's file, from a local folder when it holds
it, else from the download cache, downloaded once from the treebank's GitHub repository at a release tag.

A download goes to a temporary file that is renamed into ``<cache>/<release>/<UD_Folder>/`` only when whole (and,
where this module pins the release's checksums, only when it matches them); its SHA-256 goes into the folder's
``manifest.json`` and is checked on every later read, so a truncated or changed file is refused, by name, instead
of being parsed. A local folder is the user's own copy and is read as it is.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Optional

from filelock import FileLock

from probing.config import Choice
from probing.corpus.conllu_reader import read_conllu
from probing.corpus.sentence import Corpus
from probing.corpus.ud_names import Treebank, treebank
from probing.errors import CorpusError
from probing.io import AtomicFile, write_json
from probing.paths import absolute, user_cache

log = logging.getLogger(__name__)

CACHE_ENV = "PROBING_UD_CACHE"  # the download cache (data.ud_cache); default ~/.cache/probing/ud
DIR_ENV = "UD_DIR"  # a local copy (data.dir in conf/data/ud.yaml)
MANIFEST = "manifest.json"
TIMEOUT_S = 20  # per connection attempt and per read: a missing network fails fast
_RELEASE = re.compile(r"r\d+\.\d+")
_CHUNK = 1 << 20

# SHA-256 of released files, checked at download and at every read. en_ewt r2.16: the files of the release tag
# (their git blob ids are those of the tag's tree).
PINNED: dict[tuple[str, str], dict[str, str]] = {
    ("r2.16", "UD_English-EWT"): {
        "en_ewt-ud-train.conllu": "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
        "en_ewt-ud-dev.conllu": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
        "en_ewt-ud-test.conllu": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
    },
}


class Split(Choice):
    """The splits a UD treebank may have (many lack train or dev)."""

    train = "train"
    dev = "dev"
    test = "test"


def cache_root(configured: Optional[str]) -> Path:
    """The download cache: ``data.ud_cache``, else ``$PROBING_UD_CACHE``, else the user's cache dir
    (``$XDG_CACHE_HOME`` or ``~/.cache``) ``/probing/ud``."""
    return user_cache(configured, CACHE_ENV, "ud")


def read_treebank(cfg: Any, split: str) -> Corpus:
    """One split of the treebank a ``data=ud`` config names, as a corpus named by the treebank's code."""
    path = treebank_file(cfg, split)
    return read_conllu(path, split=split, strict=cfg.strict, name=treebank(cfg.treebank).code)


def treebank_file(cfg: Any, split: str) -> Path:
    """The file of one split: from ``data.dir`` when it holds it, else from the cache (checksum verified),
    else downloaded into the cache first. Any failure is one :class:`CorpusError` line."""
    tb = treebank(str(cfg.treebank))
    if split not in Split.__members__:
        raise CorpusError(f"data.split={split!r}: a UD treebank has splits train, dev and test")
    release = str(cfg.ud_release)
    if not _RELEASE.fullmatch(release):
        raise CorpusError(f"data.ud_release={release!r}: a UD release tag is r<major>.<minor> (r2.16)")
    local = local_file(cfg.dir, tb, split)
    if local is not None:
        return local
    folder = cache_root(cfg.ud_cache) / release / tb.folder
    name = tb.file(split)
    if (folder / name).is_file():
        return verified(folder, name, PINNED.get((release, tb.folder), {}).get(name))
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):  # jobs of a sweep starting together download once
        if not (folder / name).is_file():
            url = f"{str(cfg.ud_url).rstrip('/')}/{tb.folder}/{release}/{name}"
            try:
                fetch(url, folder, name, PINNED.get((release, tb.folder), {}).get(name))
            except CorpusError as e:
                raise CorpusError(f"{e}; {_local_hint(cfg.dir, tb, split)}") from None
    return verified(folder, name, PINNED.get((release, tb.folder), {}).get(name))


def local_file(directory: Optional[str], tb: Treebank, split: str) -> Optional[Path]:
    """The split's file in a local folder: the treebank's own folder, or a folder of release folders (an
    unpacked UD release, ``<dir>/UD_English-EWT/``); None when there is no folder or it lacks the file."""
    if not directory:
        return None
    base = Path(absolute(str(directory)))
    found = next((p for p in (base / tb.file(split), base / tb.folder / tb.file(split)) if p.is_file()), None)
    if found is None:
        log.info("data.dir=%s holds no %s; trying the download cache", directory, tb.file(split))
    return found


def _local_hint(directory: Optional[str], tb: Treebank, split: str) -> str:
    if directory:
        return f"and data.dir={directory} holds no {tb.file(split)} (nor {tb.folder}/{tb.file(split)})"
    return f"no local copy either: set data.dir (or {DIR_ENV}) to a folder that holds {tb.file(split)}"


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def read_manifest(folder: Path) -> dict:
    """The cache folder's ``{file: {"sha256", "bytes", "url"}}``; empty when there is none yet."""
    path = folder / MANIFEST
    if not path.is_file():
        return {}
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
        assert isinstance(files, dict)
        return files
    except (ValueError, KeyError, TypeError, AssertionError) as e:
        raise CorpusError(f"{path}: not a readable manifest ({type(e).__name__}); delete {folder} to download "
                          "the treebank again") from None


def verified(folder: Path, name: str, pinned: Optional[str]) -> Path:
    """The cached file, after checking its SHA-256 against the manifest (and the pinned one, where pinned)."""
    path = folder / name
    recorded = read_manifest(folder).get(name, {}).get("sha256")
    if recorded is None:
        raise CorpusError(f"{path}: no checksum for it in {folder / MANIFEST} (not written by a download); "
                          "delete it to download it again")
    expected = pinned or recorded
    got = sha256_of(path)
    if got != expected:
        raise CorpusError(f"{path}: SHA-256 {got[:12]}... is not the {expected[:12]}... of the download: the "
                          "file is truncated or was changed; delete it to download it again")
    return path


def fetch(url: str, folder: Path, name: str, pinned: Optional[str]) -> None:
    """Download ``url`` into ``folder/name`` whole or not at all, and record its SHA-256 in the manifest."""
    log.info("downloading %s", url)
    out = AtomicFile(folder / name)
    try:
        digest, size = _stream(url, out)
        if pinned and digest != pinned:
            raise CorpusError(f"{url}: SHA-256 {digest[:12]}... is not the pinned {pinned[:12]}...; nothing kept")
    except BaseException:
        out.discard()
        raise
    out.commit()
    files = read_manifest(folder)
    files[name] = {"sha256": digest, "bytes": size, "url": url}
    write_json(folder / MANIFEST, {"files": files})


def _stream(url: str, out: AtomicFile) -> tuple[str, int]:
    """Copy the response body to ``out``; returns (SHA-256, bytes). Network failures are one line naming URL."""
    h, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            expected = response.headers.get("Content-Length")
            for chunk in iter(lambda: response.read(_CHUNK), b""):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
    except urllib.error.HTTPError as e:
        why = " (the treebank may lack this split, or the release tag)" if e.code == 404 else ""
        raise CorpusError(f"{url}: HTTP {e.code} {e.reason}{why}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        reason = getattr(e, "reason", None) or e
        raise CorpusError(f"{url}: download failed ({reason})") from None
    if expected is not None and int(expected) != size:
        raise CorpusError(f"{url}: download cut short ({size} of {expected} bytes)")
    return h.hexdigest(), size
