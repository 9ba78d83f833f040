"""A hub model that does not load is one line that tells what to do, and never to set what is already set."""

from __future__ import annotations

import pytest

from probing.config import ModelConfig
from probing.encoder import Encoder, hub_hint
from probing.errors import ModelLoadError

OTHERS = "run the bundled model=minilm, or a checkpoint folder with model=local model.name_or_path=DIR"


def test_offline_the_line_does_not_ask_for_hf_hub_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError) as err:
        Encoder.load(ModelConfig(name="none", name_or_path="nobody-here/no-such-model"))
    line = str(err.value)
    assert line.startswith("could not load model 'nobody-here/no-such-model' (HF_HUB_OFFLINE=1 is set: only cached "
                           "or local models load): ")
    assert line.endswith(f"; load it once with the network (HF_HUB_OFFLINE unset) to cache it, or {OTHERS}")
    assert "set HF_HUB_OFFLINE=1" not in line and "\n" not in line


def test_online_the_line_names_hf_hub_offline(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert hub_hint() == f"set HF_HUB_OFFLINE=1 to use cached models only, or {OTHERS}"
