"""probing-cache: lists the stores with what they hold, removes one by key, refuses one whose lock another process
holds, and prunes by age."""

from __future__ import annotations

import os
import time

import pytest
from filelock import FileLock
from heads_store import build_store, synthetic_corpus

from probing.cli import cache_main


def test_list_remove_refuse_a_locked_store_and_prune(tmp_path, capsys):
    cache = tmp_path / "cache"
    corpus = synthetic_corpus(5)
    a, b = build_store(cache / "planted-a", corpus), build_store(cache / "planted-b", corpus)
    cache_main(["list", "--dir", str(cache)])
    out = capsys.readouterr().out
    assert out.startswith(f"{cache}: 2 stores") and "planted" in out and "5 sentences" in out

    with FileLock(str(a.dir) + ".lock"):  # another process building this store
        with pytest.raises(SystemExit) as err:
            cache_main(["remove", "planted-a", "--dir", str(cache)])
    assert err.value.code == 2 and "in use by another process" in capsys.readouterr().err
    assert a.dir.is_dir()

    cache_main(["remove", "planted-a", "--dir", str(cache)])
    assert not a.dir.exists() and "1 stores removed" in capsys.readouterr().out

    old = time.time() - 10 * 86400
    for f in [b.dir / "manifest.json", b.dir]:
        os.utime(f, (old, old))
    cache_main(["prune", "--days", "30", "--dir", str(cache)])
    assert b.dir.is_dir() and "0 stores removed" in capsys.readouterr().out
    cache_main(["prune", "--days", "5", "--dir", str(cache)])
    assert not b.dir.exists()
    with pytest.raises(SystemExit):
        cache_main(["remove", "nothing-here", "--dir", str(cache)])
    assert "no store with key or name 'nothing-here'" in capsys.readouterr().err


def test_the_parsed_corpora_are_listed_as_such_and_never_pruned_as_a_store(tmp_path, capsys):
    cache = tmp_path / "cache"
    build_store(cache / "planted-a", synthetic_corpus(5))
    (cache / "corpora").mkdir()
    (cache / "corpora" / "en_ewt-ud-dev-0123456789abcdef.pkl").write_bytes(b"x" * 2**20)
    cache_main(["list", "--dir", str(cache)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{cache}: 1 stores") and len(lines) == 3 and "(incomplete)" not in lines[1]
    assert lines[2] == (f"{cache}/corpora: 1 parsed corpora (CoNLL-U files parsed once, again when the file "
                        "changes), 1.0 MiB")
    cache_main(["prune", "--days", "0", "--dir", str(cache)])
    assert "1 stores removed" in capsys.readouterr().out and (cache / "corpora").is_dir()
