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


def test_ud_ewt_path_is_relative_and_overridable(monkeypatch):
    cfg = make(["data=ud_ewt", "data.split=test"])
    assert not Path(cfg.data.dir).is_absolute() and cfg.data.split == "test"
    monkeypatch.setenv("UD_EWT_DIR", "/elsewhere")
    assert make(["data=ud_ewt"]).data.dir == "/elsewhere"
