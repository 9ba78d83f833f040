"""``data=ud``: a UD treebank by name, downloaded once from a (here local) server into a checksummed cache,
or read from a local copy; every failure is one line naming the file, the URL or the key to set."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from pathlib import Path

import pytest

from probing.compose import compose_run
from probing.config import DataConfig, DataKind
from probing.corpus import load_corpus
from probing.corpus.cache import load_corpus_cached
from probing.corpus.ud import DIR_ENV, MANIFEST, PINNED, sha256_of, treebank_file
from probing.corpus.ud_names import KNOWN, TREEBANKS, folder_code, treebank
from probing.errors import CorpusError

RELEASE = "r2.16"
SENTENCE = ("# sent_id = {split}-{n}\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
            "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_\n\n")


def treebank_text(split: str) -> str:
    return "".join(SENTENCE.format(split=split, n=n) for n in (1, 2))


def write_treebank(folder: Path, code: str, splits=("train", "dev", "test")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split in splits:
        (folder / f"{code}-ud-{split}.conllu").write_text(treebank_text(split))
    return folder


class Server:
    """A static file server on 127.0.0.1 (a free port) in a thread, counting the requests it answers."""

    def __init__(self, root: Path):
        self.requests: list[str] = []
        seen = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.path)
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=root))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


@pytest.fixture
def server(tmp_path):
    """UD_German-GSD at r2.16 (no dev split) and UD_English-EWT at r2.16 (not the released files)."""
    root = tmp_path / "github"
    write_treebank(root / "UD_German-GSD" / RELEASE, "de_gsd", splits=("train", "test"))
    write_treebank(root / "UD_English-EWT" / RELEASE, "en_ewt")
    s = Server(root)
    yield s
    if s.thread.is_alive():
        s.stop()


def data(tmp_path, url: str, name: str = "de_gsd", **kw) -> DataConfig:
    return DataConfig(kind=DataKind.ud, treebank=name, ud_url=url, ud_cache=str(tmp_path / "cache"), **kw)


def one_line(err: pytest.ExceptionInfo) -> str:
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_first_read_downloads_and_records_checksums_second_read_stays_offline(tmp_path, server):
    cfg = data(tmp_path, server.url, split="test")
    corpus = load_corpus(cfg)
    assert (corpus.name, corpus.split, len(corpus)) == ("de_gsd", "test", 2)
    folder = tmp_path / "cache" / RELEASE / "UD_German-GSD"
    path = folder / "de_gsd-ud-test.conllu"
    assert server.requests == [f"/UD_German-GSD/{RELEASE}/de_gsd-ud-test.conllu"]
    recorded = json.loads((folder / MANIFEST).read_text())["files"]["de_gsd-ud-test.conllu"]
    assert recorded["sha256"] == sha256_of(path) and recorded["bytes"] == path.stat().st_size
    assert recorded["url"] == f"{server.url}/UD_German-GSD/{RELEASE}/de_gsd-ud-test.conllu"
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    server.stop()
    assert load_corpus(cfg).fingerprint() == corpus.fingerprint()
    assert load_corpus_cached(cfg, "test", str(tmp_path / "corpora")).fingerprint() == corpus.fingerprint()
    assert len(server.requests) == 1


def test_a_corrupted_cached_file_is_one_line_naming_it(tmp_path, server):
    cfg = data(tmp_path, server.url, split="train")
    path = treebank_file(cfg, "train")
    path.write_text(path.read_text()[:-30])  # truncated
    with pytest.raises(CorpusError) as err:
        load_corpus(cfg)
    assert one_line(err).startswith(f"{path}: SHA-256 ") and "truncated or was changed" in str(err.value)
    with pytest.raises(CorpusError, match="truncated or was changed"):
        load_corpus_cached(cfg, "train", str(tmp_path / "corpora"))


def test_no_server_and_no_local_copy_names_the_url_and_the_key(tmp_path, server):
    server.stop()
    with pytest.raises(CorpusError) as err:
        load_corpus(data(tmp_path, server.url, split="test"))
    url = f"{server.url}/UD_German-GSD/{RELEASE}/de_gsd-ud-test.conllu"
    assert one_line(err).startswith(f"{url}: download failed (")
    assert f"set data.dir (or {DIR_ENV}) to a folder that holds de_gsd-ud-test.conllu" in str(err.value)
    assert not any((tmp_path / "cache" / RELEASE / "UD_German-GSD").iterdir())  # nothing half-written


def test_a_missing_split_is_one_line(tmp_path, server):
    with pytest.raises(CorpusError) as err:
        load_corpus(data(tmp_path, server.url, split="dev"))
    assert "de_gsd-ud-dev.conllu: HTTP 404" in one_line(err) and "lack this split" in str(err.value)
    with pytest.raises(CorpusError, match="data.split='validation': a UD treebank has splits train, dev and test"):
        load_corpus(data(tmp_path, server.url, split="validation"))


def test_a_folder_name_and_a_code_give_the_same_treebank(tmp_path, server):
    by_code = load_corpus(data(tmp_path, server.url, "de_gsd", split="train"))
    by_folder = load_corpus(data(tmp_path, server.url, "UD_German-GSD", split="train"))
    assert (by_code.name, by_code.fingerprint()) == (by_folder.name, by_folder.fingerprint())
    assert len(server.requests) == 1  # one cache for both names
    assert treebank("UD_German-GSD") == treebank("de_gsd") == treebank("DE_GSD")
    assert treebank("UD_Welsh-CCG").code == "cy_ccg"  # a folder not in the table gives its own code


def test_unknown_names_say_what_to_give(tmp_path):
    with pytest.raises(CorpusError) as err:
        treebank("xx_nothing")
    assert one_line(err).startswith("data.treebank='xx_nothing' is not in the table of common UD treebanks: give "
                                    "its release folder name instead")
    with pytest.raises(CorpusError, match="language 'Klingon' is not in the table of UD language codes"):
        treebank("UD_Klingon-KTB")
    with pytest.raises(CorpusError, match=r"data.ud_release='latest': a UD release tag is r<major>.<minor>"):
        treebank_file(data(tmp_path, "http://127.0.0.1:9", ud_release="latest"), "dev")


def test_every_table_entry_round_trips():
    assert len(KNOWN) == len(TREEBANKS)
    assert all(treebank(code).folder == folder and folder_code(folder) == code for code, folder in KNOWN.items())
    assert KNOWN["en_ewt"] == "UD_English-EWT" and KNOWN["no_bokmaal"] == "UD_Norwegian-Bokmaal"


def test_a_local_copy_is_read_without_the_network(tmp_path):
    own = write_treebank(tmp_path / "mine", "de_gsd", splits=("dev",))
    release = write_treebank(tmp_path / "ud-treebanks" / "UD_German-GSD", "de_gsd", splits=("dev",)).parent
    dead = "http://127.0.0.1:9"
    for directory in (own, release):
        cfg = data(tmp_path, dead, dir=str(directory), split="dev")
        assert treebank_file(cfg, "dev").parent in (own, release / "UD_German-GSD")
        assert len(load_corpus(cfg)) == 2
    with pytest.raises(CorpusError) as err:
        load_corpus(data(tmp_path, dead, dir=str(own), split="test"))
    assert f"and data.dir={own} holds no de_gsd-ud-test.conllu" in one_line(err)


def test_a_download_that_differs_from_the_pinned_checksums_is_not_kept(tmp_path, server):
    with pytest.raises(CorpusError) as err:
        load_corpus(data(tmp_path, server.url, "en_ewt", split="dev"))
    assert "en_ewt-ud-dev.conllu: SHA-256 " in one_line(err) and "is not the pinned" in str(err.value)
    assert not any((tmp_path / "cache" / RELEASE / "UD_English-EWT").iterdir())


def test_the_shared_ewt_copy_is_the_pinned_release(ewt_dir):
    pinned = PINNED[(RELEASE, "UD_English-EWT")]
    assert {name: sha256_of(ewt_dir / name) for name in pinned} == pinned


def test_data_ud_composes_by_code_and_by_folder():
    cfg = compose_run(["data=ud", "data.treebank=en_ewt"])
    assert (cfg.data.kind.value, cfg.data.treebank, cfg.data.name, cfg.data.ud_release) == ("ud", "en_ewt",
                                                                                            "en_ewt", RELEASE)
    cfg = compose_run(["task=probe", "data=ud", "data.treebank=UD_German-GSD", "data.ud_cache=/tmp/ud"])
    assert (cfg.data.name, cfg.data.ud_cache) == ("UD_German-GSD", "/tmp/ud")
