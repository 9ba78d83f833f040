"""Compose a run's config from command-line overrides, the way ``probing`` does, with every mistake as one line.

Hydra's own messages for a mistyped key (``extract.polling=first``: "to append use +extract.polling"), a wrong
group option (``task=head``: a 14-line listing) or a setting of another task are long and suggest nothing. The
command line and the Python API compose here first: a mistake becomes a :class:`~probing.errors.ProbingError`
naming the override and the nearest valid name.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import inspect
import io
import re
import sys
import textwrap
import tokenize
import typing
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from probing.config import (
    OPTIONAL_SECTIONS,
    TASK_SECTIONS,
    RunConfig,
    TaskName,
    register_configs,
    section_type,
    unknown_keys,
)
from probing.errors import ProbingError

CONF_PATH = Path(__file__).resolve().parent.parent / "conf"
CONF_DIR = str(CONF_PATH)  # Hydra takes a string
# Groups of Hydra's own that the command line may select (hydra/launcher=joblib ...), left to Hydra.
_HYDRA_PREFIX = "hydra"
# ``text="..."`` is short for ``data=text data.text="..."`` (task=inspect's one sentence).
SHORTHAND_TEXT = "text"
# ``inspect.pair=cat,sat`` (a sweep to Hydra) is the list ``inspect.pair=[cat,sat]``.
PAIR_KEY = "inspect.pair"


def groups(conf_dir: Path = CONF_PATH) -> dict[str, list[str]]:
    """``{group: [option, ...]}`` of the config folder (``task: [extract, heads, ...]``)."""
    return {d.name: sorted(p.stem for p in d.glob("*.yaml")) for d in sorted(conf_dir.iterdir())
            if d.is_dir() and d.name != _HYDRA_PREFIX}


def schema_keys(kind: type = RunConfig, prefix: str = "") -> list[str]:
    """Every settable dotted key of a dataclass schema (``extract.pooling``, ``probe.regimen.lr``, ...)."""
    out = []
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        sub = section_type(hints[f.name])
        if dataclasses.is_dataclass(sub):
            out += schema_keys(sub, f"{prefix}{f.name}.")
        else:
            out.append(prefix + f.name)
    return out


def nearest(name: str, candidates: Iterable[str]) -> Optional[str]:
    """The closest candidate to ``name``, by the whole dotted name, else by its last part (``polling`` ->
    ``extract.pooling``); None when nothing is close."""
    candidates = list(candidates)
    head, _, leaf = name.rpartition(".")
    same_leaf = [c for c in candidates if c.rsplit(".", 1)[-1] == leaf and c.startswith(head + ".")]
    if head and len(same_leaf) == 1:  # probe.C -> probe.linear.C: the key moved into a section
        return same_leaf[0]
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5)
    if close:
        return close[0]
    leaf = name.rsplit(".", 1)[-1]
    by_leaf = {c.rsplit(".", 1)[-1]: c for c in reversed(candidates)}
    close = difflib.get_close_matches(leaf, list(by_leaf), n=1, cutoff=0.7)
    return by_leaf[close[0]] if close else None


def _hint(name: str, candidates: Iterable[str], form: str = "{}") -> str:
    best = nearest(name, candidates)
    return f"; did you mean {form.format(best)}?" if best else ""


def readers(section: str) -> list[str]:
    """The tasks that read an optional section (``heads``: heads, importance)."""
    return [t.value for t, sections in TASK_SECTIONS.items() if section in sections]


def _pair_list(value: str) -> str:
    """``cat,sat`` -> ``[cat,sat]``, each word quoted when Hydra would not read it bare (``It's``)."""
    return "[" + ",".join(w if re.fullmatch(r"[\w.\-]+", w) else repr(w) for w in value.split(",")) + "]"


def expand_shorthand(overrides: Sequence[str]) -> list[str]:
    """``text=...`` -> ``data=text``, ``data.text=...``; ``inspect.pair=a,b`` -> ``inspect.pair=[a,b]``; other
    overrides as given."""
    out: list[str] = []
    for o in overrides:
        key, _, value = o.partition("=")
        if key == SHORTHAND_TEXT:
            if any(x.split("=", 1)[0] == "data" for x in overrides):
                raise ProbingError("text=... is short for data=text data.text=...: leave out data= (or give "
                                   "data=text data.text=... yourself)")
            out += ["data=text", f"data.text={value}"]
        elif key == PAIR_KEY and value and value[:1] not in "[\"'":
            out.append(f"{key}={_pair_list(value)}")
        else:
            out.append(o)
    return out


def _first_values(overrides: Sequence[str]) -> list[str]:
    """The overrides with each sweep replaced by its first value (enough to check names and types)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out = []
    for o in OverridesParser.create().parse_overrides(list(overrides)):
        if not o.is_sweep_override():
            out.append(o.input_line)
            continue
        first = next(iter(o.sweep_string_iterator()), None)
        if first is not None:
            quoted = first if re.fullmatch(r"[\w.\-/:]*", first) else repr(first)
            out.append(f"{o.get_key_element()}={quoted}")
    return out


def _key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _section_error(key: str, task: str) -> Optional[str]:
    """Why ``key`` cannot be set in a ``task`` run: it belongs to another task's section."""
    section = key.split(".", 1)[0]
    if section in OPTIONAL_SECTIONS and section not in TASK_SECTIONS[TaskName(task)]:
        return (f"{key}: {section}.* settings are read by task={' or task='.join(readers(section))}, "
                f"not by task={task}")
    return None


def _unset_section(key: str, overrides: Sequence[str]) -> Optional[str]:
    """Why ``key`` cannot be set: a section on its path is None in this run (``probe.regimen`` for a relation
    probe); the group options whose YAML composes that section are named."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            cfg = compose("config", overrides=[o for o in overrides if _key_of(o) != key])
    except Exception:  # noqa: BLE001 - another override is wrong too: the caller reports the first error
        return None
    finally:
        GlobalHydra.instance().clear()
    parts = key.split(".")
    node = cfg
    for k in range(len(parts) - 1):
        node = node.get(parts[k]) if hasattr(node, "get") else None
        if node is None:
            section = ".".join(parts[:k + 1])
            group, leaf = parts[0], parts[k]
            options = [o for o in groups().get(group, [])
                       if re.search(rf"^{leaf}:", (CONF_PATH / group / f"{o}.yaml").read_text(), re.M)]
            where = f" (it comes with {' or '.join(f'{group}={o}' for o in options)})" if options and k == 1 else ""
            return f"{key}: {section} is not part of this run's config{where}"
    return None


def _translate(err: Exception, overrides: Sequence[str], task: Optional[str]) -> str:
    """Hydra's composition error as one line naming the override and the nearest valid name."""
    text = str(err)
    found = re.search(r"Could not find '([^']+)/([^']+)'", text)
    if found:
        group, option = found.groups()
        options = groups().get(group, [])
        return (f"{group}={option}: no such option (choose from {', '.join(options)})"
                + _hint(option, options, f"{group}={{}}"))
    found = re.search(r"Could not override '([^']+)'\.\s*No match in the defaults list", text)
    if found:
        group = found.group(1)
        owners = [t for t in groups()["task"] if f"/{group}:" in (CONF_PATH / "task" / f"{t}.yaml").read_text()]
        if owners:
            return f"{group}=...: the {group} group belongs to task={owners[0]} (add task={owners[0]})"
        return f"{group}=...: no such config group" + _hint(group, groups(), "{}=...")
    found = re.search(r"Could not (?:override|append to config)[^']*'([^']+)'", text)
    if found:
        key = found.group(1)
        if task and _section_error(key, task):
            return _section_error(key, task)
        return _unknown_key(key, next((o.split("=", 1)[1] for o in overrides if _key_of(o) == key and "=" in o), ""))
    found = re.search(r"Error merging override (\S+)", text)
    if found:
        cause = str(err.__cause__ or "").strip().splitlines()
        key = _key_of(found.group(1))
        section_dict = cause and "Cannot assign" in cause[0] and "DictConfig" in cause[0]
        if section_dict:
            return f"{found.group(1)}: {key} is a group of settings ({', '.join(_children(key))})"
        return f"{found.group(1)}: {cause[0] if cause else text.splitlines()[0]}"
    return text.strip().splitlines()[0]


def _unknown_key(key: str, value: str) -> str:
    """The line for a key the schema lacks: the nearest key, or the group a top-level name mistypes (``datta=ud``
    is ``data=ud``, not a key of the data group)."""
    group = _nearest_group(key)
    if group:
        return f"unknown config key {key!r}; did you mean {group}={value if value in groups()[group] else '...'}?"
    return f"unknown config key {key!r}" + _hint(key, schema_keys())


def _nearest_group(name: str) -> Optional[str]:
    """The config group a top-level name is closest to, when it is closer to one than to a top-level key
    (``datta`` -> ``data``; ``sed`` -> None, the key ``seed``)."""
    if "." in name:
        return None
    top = [k for k in schema_keys() if "." not in k]
    close = difflib.get_close_matches(name, list(groups()) + top, n=1, cutoff=0.7)
    return close[0] if close and close[0] in groups() else None


def _children(key: str) -> list[str]:
    return [k for k in schema_keys() if k.startswith(key + ".")]


def compose_run(overrides: Sequence[str] = ()) -> DictConfig:
    """The run's config from ``conf/`` and ``overrides`` (as on the command line; sweeps checked by their first
    value), validated against the schema; a mistake is a one-line :class:`ProbingError`."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import OverrideParseException

    register_configs()
    try:
        overrides = _first_values(expand_shorthand(overrides))
    except OverrideParseException as err:
        raise ProbingError(str(err).strip().splitlines()[0] + " (quote a value with special characters: "
                           "key='value')") from None
    mine = [o for o in overrides if not _key_of(o).startswith(_HYDRA_PREFIX)]

    def attempt(ovs: Sequence[str]) -> DictConfig:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return compose("config", overrides=list(ovs))

    try:
        cfg = attempt(mine)
    except Exception as err:  # noqa: BLE001 - Hydra raises several kinds; each becomes one line
        scoped = [o for o in mine if _key_of(o).split(".", 1)[0] in OPTIONAL_SECTIONS and "." in _key_of(o)]
        task = None
        try:
            task = str(attempt([o for o in mine if o not in scoped]).task.name)
        except Exception:  # noqa: BLE001 - the error of the full composition is the one reported
            pass
        if task:
            for o in scoped:
                problem = _section_error(_key_of(o), task) or _unset_section(_key_of(o), mine)
                if problem:
                    raise ProbingError(problem) from None
        raise ProbingError(_translate(err, mine, task)) from None
    finally:
        GlobalHydra.instance().clear()
    check_composed(cfg)
    return cfg


def run_dir(cfg: Any) -> Path:
    """A new run dir for ``cfg``, named as the command line names one (``conf/config.yaml``'s hydra.run.dir):
    ``$PROBING_RESULTS_DIR/<experiment_name>/<task>/<time to the microsecond>``."""
    import os
    from datetime import datetime

    root = Path(os.environ.get("PROBING_RESULTS_DIR", "results"))
    return root / str(cfg.experiment_name) / str(cfg.task.name) / datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")


def check_composed(cfg: Any) -> None:
    """A composed config's keys against the schema (``+key=...`` adds keys Hydra does not check) and its task:
    a section the task does not read (set by an experiment preset, say) is refused, naming it."""
    unknown = unknown_keys(cfg)
    if unknown:
        key, _ = unknown[0]
        raise ProbingError(_unknown_key(key, str(OmegaConf.select(cfg, key, default=""))))
    task = TaskName(str(cfg.task.name))
    extra = [s for s in OPTIONAL_SECTIONS if cfg.get(s) is not None and s not in TASK_SECTIONS[task]]
    if extra:
        raise ProbingError(f"{extra[0]}.* settings are read by task={' or task='.join(readers(extra[0]))}, "
                           f"not by task={task.value}")


# Examples printed by ``probing --help``; a test composes every one of them.
HELP_EXAMPLES = (
    ("", "MiniLM on the built-in grammar, every head scored"),
    ("task=heads data=ud_ewt data.split=dev", "UD English EWT (data.dir or UD_EWT_DIR)"),
    ("task=heads data=ud data.treebank=de_gsd", "any UD treebank by name, downloaded once"),
    ("experiment=clark_ud_ewt", "Clark et al. (2019) on EWT"),
    ("task=probe probe=arc data.n_sentences=500", "Clark's attention-only parser on the grammar"),
    ("-m experiment=layer_sweep", "one probe job per layer (one extraction)"),
    ('task=inspect text="The cat sat on the mat."', "one sentence, every head"),
    ("task=importance data.n_sentences=300", "which heads does MiniLM need, per relation?"),
)
HELP_ENVIRONMENT = (
    ("PROBING_RESULTS_DIR", "where run dirs go (default: results)"),
    ("PROBING_CACHE_DIR", "stores and parsed treebanks (default: results/cache)"),
    ("UD_EWT_DIR", "the folder with en_ewt-ud-{train,dev,test}.conllu"),
    ("UD_DIR", "data=ud: a local copy (the treebank's folder, or an unpacked UD release)"),
    ("PROBING_UD_CACHE", "data=ud: where downloaded treebanks go (default: ~/.cache/probing/ud)"),
    ("HF_HUB_OFFLINE=1", "models from the local cache only (the bundled MiniLM needs no network)"),
)


@functools.lru_cache(maxsize=None)
def _comments(module: str) -> dict[tuple[str, str], str]:
    """``{(class, field): text}``: the comment on each dataclass field's line, else the comment lines right
    above it, in the source of ``module`` (the schema's own words, so ``--help`` cannot drift from them)."""
    src = inspect.getsource(sys.modules[module])
    lines = src.splitlines()
    comments = {tok.start[0]: tok.string.lstrip("#").strip()
                for tok in tokenize.generate_tokens(io.StringIO(src).readline) if tok.type == tokenize.COMMENT}
    out = {}
    for cls in (n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ClassDef)):
        for st in cls.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            above, k = [], st.lineno - 1
            while k in comments and lines[k - 1].lstrip().startswith("#"):
                above.insert(0, comments[k])
                k -= 1
            text = comments.get(st.end_lineno) or " ".join(above)
            if text:
                out[cls.name, st.target.id] = text
    return out


def field_doc(kind: type, name: str) -> str:
    """What a field of a config dataclass means, from its comment (inherited fields: the defining class's)."""
    for k in kind.__mro__:
        text = _comments(k.__module__).get((k.__name__, name)) if dataclasses.is_dataclass(k) else None
        if text:
            return text
    return ""


def _one_line(text: str, width: int = 100) -> str:
    """A comment's first clause (up to a ``;`` or a sentence's end outside brackets), cut at a word to
    ``width`` characters."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch in "([{") - (ch in ")]}")
        if depth == 0 and text[i:i + 2] in ("; ", ". ") and not re.search(r"\b(al|e\.g|i\.e|vs)$", text[:i]):
            text = text[:i]
            break
    text = text.rstrip(".")
    return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + " ..."


def _default(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "???"
    if isinstance(value, list):
        return "[" + ",".join(str(getattr(v, "value", v)) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else str(getattr(value, "value", value))


def _section_lines(kind: type, prefix: str) -> list[str]:
    hints = typing.get_type_hints(kind)
    lines = []
    for f in dataclasses.fields(kind):
        sub = section_type(hints[f.name])
        if dataclasses.is_dataclass(sub):
            lines += _section_lines(sub, f"{prefix}{f.name}.")
        else:
            lines.append(_key_line(kind, f, prefix, sub))
    return lines


def _key_line(kind: type, f: dataclasses.Field, prefix: str, hint: Any) -> str:
    """``    extract.pooling=mean_sum  (mean_sum|first)  how word pieces become words ...``"""
    doc = _one_line(field_doc(kind, f.name))
    return f"    {prefix}{f.name}={_default(f)}  ({_type_name(hint)})" + (f"  {doc}" if doc else "")


def _type_name(hint: Any) -> str:
    """``int``, ``mean_sum|first`` for an enum, ``list of attention|norm|...`` for a list."""
    if typing.get_origin(hint) in (list, typing.List):
        return "list of " + _type_name(section_type(typing.get_args(hint)[0]))
    choices = getattr(hint, "__members__", None)
    return "|".join(choices) if choices else getattr(hint, "__name__", str(hint))


def help_text() -> str:
    """``probing --help``, generated from the schema and ``conf/`` so it cannot drift from them."""
    from probing.config import TASK_SUMMARY

    lines = ["probing: what do the attention heads of transformer models do?", "",
             "Usage: probing [KEY=VALUE ...]   (one run)      probing -m [KEY=V1,V2 ...]   (a sweep)", "",
             "Tasks (task=NAME):"]
    for t in TaskName:
        wrapped = textwrap.wrap(TASK_SUMMARY[t], 96)
        lines += [f"  {t.value:<11} {wrapped[0]}"] + [f"  {'':<11} {w}" for w in wrapped[1:]]
    lines += ["", "Examples:"] + [f"  probing {cmd:<46} {what}" for cmd, what in HELP_EXAMPLES]
    lines += ["  probing-collect SWEEP_DIR                              merge a sweep's jobs into one table",
              "  probing-report RUN_DIR [RUN_DIR ...]                   one HTML dashboard comparing runs"]
    lines += ["", "Config groups (GROUP=OPTION):"]
    lines += [f"  {g}: {', '.join(opts)}" for g, opts in groups().items()]
    lines += ["", "Settings every run reads (KEY=DEFAULT  (type or choices)  what it means):"]
    hints = typing.get_type_hints(RunConfig)
    for f in dataclasses.fields(RunConfig):
        if f.name in OPTIONAL_SECTIONS:
            continue
        sub = section_type(hints[f.name])
        lines += (_section_lines(sub, f"{f.name}.") if dataclasses.is_dataclass(sub)
                  else [_key_line(RunConfig, f, "", sub)])
    for section in OPTIONAL_SECTIONS:
        lines += ["", f"Settings of task={' and task='.join(readers(section))} ({section}.*):"]
        lines += _section_lines(section_type(hints[section]), f"{section}.")
    lines += ["", "Environment:"] + [f"  {k:<21} {v}" for k, v in HELP_ENVIRONMENT]
    lines += ["", "A mistyped key or option fails with the nearest valid name. The whole config of a run: probing "
              "[overrides] --cfg job; Hydra's own options: --hydra-help."]
    return "\n".join(lines)
