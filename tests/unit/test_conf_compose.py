"""Every preset (``conf/experiment``) and every option of every ``conf/`` group composes with Hydra, validates
against the schema (``OmegaConf.to_object`` gives a ``RunConfig``) and holds the values its YAML file sets.

Groups are discovered from the folders of ``conf/`` that hold YAML files (``hydra`` aside), so a new option
is checked as soon as it exists; a key the schema does not know (a typo) fails its composition.
"""

from __future__ import annotations

import dataclasses
import shutil
import typing
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, ListConfig, OmegaConf

from probing.cli import CONF_DIR
from probing.config import RunConfig, register_configs

register_configs()
CONF = Path(CONF_DIR)
MISSING = "???"
GLOBAL = "# @package _global_"
NOT_VALUES = ("defaults", "hydra")  # top-level keys of a _global_ file that are not config values


def groups(conf: Path = CONF) -> list[str]:
    """The config groups: folders of ``conf`` with YAML files, Hydra's own settings left out."""
    return sorted(d.name for d in conf.iterdir() if d.is_dir() and d.name != "hydra" and any(d.glob("*.yaml")))


def group_options(group: str, conf: Path = CONF) -> list[str]:
    return sorted(f.stem for f in (conf / group).glob("*.yaml"))


def all_options(conf: Path = CONF) -> list[tuple[str, str]]:
    return [(g, o) for g in groups(conf) for o in group_options(g, conf)]


def default_groups(conf: Path = CONF) -> set[str]:
    """The groups named in ``config.yaml``'s defaults list (``optional experiment: null`` -> experiment)."""
    entries = yaml.safe_load((conf / "config.yaml").read_text()).get("defaults", [])
    return {k.split()[-1] for e in entries if isinstance(e, dict) for k in e}


def task_groups(conf: Path = CONF) -> dict[str, str]:
    """Groups a task option composes (``probe``: ``probe``, from ``task/probe.yaml``'s ``- /probe: ...``)."""
    out = {}
    for f in (conf / "task").glob("*.yaml"):
        for entry in (yaml.safe_load(f.read_text()) or {}).get("defaults", []):
            if isinstance(entry, dict):
                out.update({k.lstrip("/"): f.stem for k in entry})
    return out


def compose_option(group: str, option: str, conf: Path = CONF) -> DictConfig:
    """The main config with ``group=option`` (with its task for a group a task composes; ``+group=option`` for
    a group no defaults list names)."""
    owner = task_groups(conf).get(group)
    plus = "" if group in default_groups(conf) or owner else "+"
    overrides = ([f"task={owner}"] if owner else []) + [f"{plus}{group}={option}"]
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def read_option(group: str, option: str, conf: Path = CONF) -> tuple[dict, bool]:
    """The option's YAML as written, and whether it targets the root (``@package _global_``)."""
    text = (conf / group / f"{option}.yaml").read_text()
    return yaml.safe_load(text) or {}, GLOBAL in text


def leaves(node: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    """``(key path, value)`` of every non-mapping value of a YAML mapping (lists are values)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, path + (k,))
    else:
        yield path, node


def plain(value: Any) -> Any:
    """A composed value as YAML would write it: enums as their value, OmegaConf lists as lists."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=False, enum_to_str=True)
    return getattr(value, "value", value)


def parent(node: DictConfig, path: tuple) -> DictConfig:
    """The node that holds the key ``path[-1]``."""
    for k in path[:-1]:
        node = node[k]
    return node


def expected_values(group: str, option: str, conf: Path = CONF) -> tuple[list[tuple[tuple, Any]], bool]:
    """What the file sets: ``(key path, value)`` pairs (mandatory ``???`` keys left out), and whether the
    paths start at the root. A preset's ``override /group: option`` entries bring that option's values too,
    except where the preset sets the key itself."""
    data, is_global = read_option(group, option, conf)
    body = {k: v for k, v in data.items() if not (is_global and k in NOT_VALUES)}
    own = [(p, v) for p, v in leaves(body) if v != MISSING]
    out = list(own)
    set_here = {p for p, _ in own}
    for entry in data.get("defaults", []) if is_global else []:
        if isinstance(entry, dict):
            for key, sub in entry.items():
                sub_group = key.split()[-1].lstrip("/")  # "override /data" -> "data"
                if sub_group not in groups(conf) or sub is None:  # hydra/launcher=..., optional nothing
                    continue
                sub_data, sub_global = read_option(sub_group, sub, conf)
                prefix = () if sub_global else (sub_group,)
                sub_data = {k: v for k, v in sub_data.items() if not (sub_global and k in NOT_VALUES)}
                out += [(prefix + p, v) for p, v in leaves(sub_data)
                        if v != MISSING and prefix + p not in set_here]
    return out, is_global


def check_option(group: str, option: str, conf: Path = CONF) -> None:
    """Compose ``group=option``: the result validates against the schema, and every value its YAML file
    sets (interpolations compared unresolved) is what the composed config holds."""
    cfg = compose_option(group, option, conf)
    expected, is_global = expected_values(group, option, conf)
    target = cfg if is_global else cfg[group]
    assert expected, f"{group}/{option}.yaml sets nothing"
    for path, value in expected:
        node, key = parent(target, path), path[-1]
        if isinstance(value, str) and "${" in value:  # compared as written, unresolved
            got = OmegaConf.to_container(node, resolve=False)[key]
        else:
            got = plain(node[key])
        assert got == value, f"{group}={option}: {'.'.join(map(str, path))} is {got!r}, the YAML sets {value!r}"
    # a mandatory key (??? in the YAML) still missing needs a value before the whole tree converts
    for path, value in leaves(read_option(group, option, conf)[0]):
        if value == MISSING and OmegaConf.is_missing(parent(target, path), path[-1]):
            parent(target, path)[path[-1]] = "placeholder"
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, RunConfig), type(obj)
    hints = typing.get_type_hints(RunConfig)
    for f in dataclasses.fields(RunConfig):
        if dataclasses.is_dataclass(hints[f.name]):
            assert isinstance(getattr(obj, f.name), hints[f.name]), f"{group}={option}: {f.name}"


OPTIONS = all_options()


def test_groups_discovered():
    assert {"model", "data", "task", "probe", "logger", "experiment"} <= set(groups()) <= (default_groups()
                                                                                         | set(task_groups()))
    assert ("experiment", "quickstart") in OPTIONS and ("model", "minilm") in OPTIONS


@pytest.mark.parametrize("group,option", OPTIONS, ids=[f"{g}={o}" for g, o in OPTIONS])
def test_option_composes_and_validates(group, option):
    check_option(group, option)


def mandatory_keys_filled(conf: Path = CONF) -> list[str]:
    """The ``???`` keys of group options that composition does not leave missing: merged over a schema
    default, a ``???`` keeps the default, so the "required" key silently has a value."""
    filled = []
    for group, option in all_options(conf):
        data, is_global = read_option(group, option, conf)
        paths = [p for p, v in leaves(data) if v == MISSING]
        if paths:
            cfg = compose_option(group, option, conf)
            target = cfg if is_global else cfg[group]
            filled += [f"{group}={option}: {'.'.join(map(str, p))}" for p in paths
                       if not OmegaConf.is_missing(parent(target, p), p[-1])]
    return filled


def test_a_mandatory_key_stays_missing():
    assert mandatory_keys_filled() == []


@pytest.fixture
def conf_copy(tmp_path) -> Path:
    dst = tmp_path / "conf"
    shutil.copytree(CONF, dst)
    return dst


def test_a_typo_in_a_new_option_fails_naming_the_key(conf_copy):
    (conf_copy / "model" / "typo.yaml").write_text("name: typo\nname_or_pth: /somewhere\n")
    assert ("model", "typo") in all_options(conf_copy)
    with pytest.raises(ConfigCompositionException) as e:
        check_option("model", "typo", conf_copy)
    assert "name_or_pth" in str(e.value) + str(e.value.__cause__)


def test_a_typo_in_a_new_preset_fails_naming_the_key(conf_copy):
    (conf_copy / "experiment" / "typo.yaml").write_text(
        f"{GLOBAL}\nexperiment_name: typo\nheads:\n  min_cuont: 5\n")
    with pytest.raises(ConfigCompositionException) as e:
        check_option("experiment", "typo", conf_copy)
    assert "min_cuont" in str(e.value) + str(e.value.__cause__)


def test_a_new_group_is_discovered_and_checked(conf_copy):
    # a folder of options for an existing schema node, under a new group name, is found and checked
    (conf_copy / "extract").mkdir()
    (conf_copy / "extract" / "fast.yaml").write_text("batch_size: 64\npooling: first\n")
    assert ("extract", "fast") in all_options(conf_copy)
    check_option("extract", "fast", conf_copy)
    (conf_copy / "extract" / "fast.yaml").write_text("batch_size: 64\npoolnig: first\n")
    with pytest.raises(ConfigCompositionException) as e:
        check_option("extract", "fast", conf_copy)
    assert "poolnig" in str(e.value) + str(e.value.__cause__)


def test_a_value_that_lands_elsewhere_is_caught(conf_copy):
    # composes and validates, but the value goes to another node: only the comparison with the YAML sees it
    (conf_copy / "logger" / "quiet.yaml").write_text("# @package model\nname: quiet\n")
    assert compose_option("logger", "quiet", conf_copy).model.name == "quiet"
    with pytest.raises(AssertionError, match="logger=quiet: name is 'none', the YAML sets 'quiet'"):
        check_option("logger", "quiet", conf_copy)


def test_a_mandatory_key_over_a_schema_default_is_caught(conf_copy):
    # ModelConfig.name_or_path defaults to the bundled MiniLM: "???" here would compose to that
    (conf_copy / "model" / "needs_path.yaml").write_text("name: needs_path\nname_or_path: ???\n")
    new = set(mandatory_keys_filled(conf_copy)) - set(mandatory_keys_filled(CONF))
    assert new == {"model=needs_path: name_or_path"}
