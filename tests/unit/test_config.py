"""Configs: every preset composes against the schema; typos and wrong types fail naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from test_conf_compose import check_option, group_options

from probing.cli import CONF_DIR
from probing.config import register_configs

register_configs()
CONF = Path(CONF_DIR)


def make(overrides: list[str]):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def test_defaults():
    cfg = make([])
    assert cfg.model.name == "minilm" and cfg.data.kind.value == "grammar" and cfg.task.name.value == "heads"
    assert cfg.extract.pooling.value == "mean_sum" and cfg.extract.store_dtype == "float16"
    assert cfg.logger.name == "none"


@pytest.mark.parametrize("group", ["model", "data", "task", "probe", "logger"])
def test_every_group_option_composes(group):
    # each option validates against the schema (to_object gives a RunConfig) and holds what its YAML sets;
    # test_conf_compose.py checks the same per option, for every group it discovers
    options = group_options(group)
    assert options, group
    for option in options:
        check_option(group, option)


def test_every_experiment_composes():
    presets = sorted((CONF / "experiment").glob("*.yaml"))
    assert presets
    for f in presets:
        cfg = make([f"experiment={f.stem}"])
        assert cfg.experiment_name == f.stem, f.name


def test_unknown_key_fails_naming_it():
    with pytest.raises(ConfigCompositionException) as e:
        make(["data.spilt=dev"])
    assert "data.spilt" in str(e.value.__cause__ or e.value) or "spilt" in str(e.value)


def test_wrong_type_fails_naming_it():
    with pytest.raises(ConfigCompositionException) as e:
        make(["extract.batch_size=many"])
    text = str(e.value) + str(e.value.__cause__)
    assert "extract.batch_size" in text


def test_bad_enum_value_fails():
    with pytest.raises(ConfigCompositionException) as e:
        make(["extract.pooling=max"])
    assert "pooling" in str(e.value) + str(e.value.__cause__)


def test_ud_ewt_has_no_default_folder_and_takes_the_variable(monkeypatch):
    monkeypatch.delenv("UD_EWT_DIR", raising=False)
    cfg = make(["data=ud_ewt", "data.split=test"])
    assert cfg.data.dir is None and cfg.data.split == "test"
    monkeypatch.setenv("UD_EWT_DIR", "/elsewhere")
    assert make(["data=ud_ewt"]).data.dir == "/elsewhere"


def test_no_data_preset_defaults_to_a_folder_outside_the_repository(monkeypatch):
    for var in ("UD_EWT_DIR", "UD_DIR"):
        monkeypatch.delenv(var, raising=False)
    for option in sorted(p.stem for p in (CONF / "data").glob("*.yaml")):
        data = make([f"data={option}"]).data
        assert not data.dir and not data.path, option


@pytest.mark.parametrize("option, message", [
    ("ud_ewt", "data=ud_ewt needs data.dir (or UD_EWT_DIR). Universal Dependencies English EWT is at "
               "https://github.com/UniversalDependencies/UD_English-EWT (files en_ewt-ud-{train,dev,test}.conllu); "
               "point data.dir at the folder that holds them"),
    ("conllu", "data=conllu needs data.path=FILE.conllu"),
])
def test_a_missing_data_path_is_one_line_naming_the_key(monkeypatch, option, message):
    from probing.corpus import CorpusError, load_corpus

    monkeypatch.delenv("UD_EWT_DIR", raising=False)
    with pytest.raises(CorpusError) as err:
        load_corpus(make([f"data={option}"]).data)
    assert str(err.value) == message
