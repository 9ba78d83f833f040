"""Shared fixtures: a tiny random BERT saved to a temp dir, the UD English EWT folder, quiet trackers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
# UD English EWT for the tests that read it (the ``ewt_dir`` fixture; they skip without it): $UD_EWT_DIR, else a
# shared/data/ud_english_ewt folder beside the checkout
EWT_DIR = Path(os.environ.get("UD_EWT_DIR") or REPO.parent / "shared" / "data" / "ud_english_ewt")

TINY_VOCAB = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "the", "cat", "sat", "on", "mat", "i", "am", "going",
    "to", "deposit", "my", "money", "at", "bank", "a", "dog", "saw", "un", "##bel", "##ie", "##va", "##bly",
    "happy", "##ly", "happ", "##ily", "run", "##ning", "big", "red", "house",
]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A 2-layer, 4-head random BERT with a WordPiece vocab, saved like a hub checkpoint."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    d = tmp_path_factory.mktemp("tiny_bert")
    (d / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    # transformers 5.x: BertTokenizerFast(vocab_file=...) ignores the file; from_pretrained(dir) reads it.
    tok = BertTokenizerFast.from_pretrained(str(d), do_lower_case=True)
    tok.save_pretrained(str(d))
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(TINY_VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    model = BertModel(cfg)
    model.eval()
    model.save_pretrained(str(d))
    return d


def load(name_or_path: str, name: str):
    """An encoder as the pipeline loads it, from a ModelConfig (the config's defaults: cpu when no GPU)."""
    from probing.config import ModelConfig
    from probing.encoder import Encoder

    return Encoder.load(ModelConfig(name=name, name_or_path=name_or_path))


@pytest.fixture(scope="session")
def tiny_encoder(tiny_model_dir):
    return load(str(tiny_model_dir), "tiny")


@pytest.fixture(scope="session")
def minilm_encoder():
    return load("bundled:minilm", "minilm")


@pytest.fixture
def ewt_dir() -> Path:
    """The EWT folder, or a skip saying how to get it (README: "The full test suite")."""
    if not (EWT_DIR / "en_ewt-ud-dev.conllu").is_file():
        pytest.skip(f"UD English EWT not found at {EWT_DIR}: set UD_EWT_DIR to a folder holding "
                    "en_ewt-ud-{train,dev,test}.conllu (https://github.com/UniversalDependencies/UD_English-EWT)")
    return EWT_DIR
