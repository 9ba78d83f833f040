"""The config mirrors the tasks: ``task=X`` composes X's settings and nothing else; every mistake on the command
line is one line with the nearest valid name; ``probing --help`` is generated from the schema."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from probing.compose import HELP_EXAMPLES, compose_run, help_text, schema_keys
from probing.config import OPTIONAL_SECTIONS, TASK_SECTIONS, TaskName
from probing.errors import ProbingError

ROOT = Path(__file__).resolve().parents[2]
EVERY_RUN = {"experiment_name", "seed", "model", "data", "task", "extract", "logger"}


@pytest.mark.parametrize("task", [t.value for t in TaskName])
def test_a_task_composes_its_own_settings_and_nothing_else(task):
    cfg = compose_run([f"task={task}"])
    present = {k for k in cfg if cfg[k] is not None}
    assert present == EVERY_RUN | set(TASK_SECTIONS[TaskName(task)])
    # what a run's .hydra/config.yaml would hold: no section of another task, not even as null
    saved = OmegaConf.to_container(cfg)
    assert {k for k, v in saved.items() if v is not None} == present


def test_a_heads_run_holds_heads_model_data_extract_logger_and_report():
    cfg = compose_run([])
    assert {k for k in cfg if cfg[k] is not None} - {"experiment_name", "seed", "task"} == {
        "heads", "model", "data", "extract", "logger", "report"}
    assert cfg.heads.min_count == 100 and cfg.report.enabled is True


def test_the_probe_group_comes_with_task_probe():
    assert compose_run(["task=probe"]).probe.kind.value == "relation"
    assert compose_run(["task=probe", "probe=arc"]).probe.kind.value == "arc"
    assert compose_run(["experiment=layer_sweep", "probe=distance"]).probe.kind.value == "distance"


@pytest.mark.parametrize("overrides,message", [
    (["extract.polling=first"], "unknown config key 'extract.polling'; did you mean extract.pooling?"),
    (["+extract.polling=first"], "unknown config key 'extract.polling'; did you mean extract.pooling?"),
    (["polling=first"], "unknown config key 'polling'; did you mean extract.pooling?"),
    (["datta=ud"], "unknown config key 'datta'; did you mean data=ud?"),  # a group mistyped, not data.dir
    (["+modle=gpt2"], "unknown config key 'modle'; did you mean model=gpt2?"),
    (["datta=nowhere"], "unknown config key 'datta'; did you mean data=...?"),
    (["sed=1"], "unknown config key 'sed'; did you mean seed?"),  # a top-level key closer than any group
    (["task=probe", "probe=distance", "probe.regimen.lrr=0.1"], "unknown config key 'probe.regimen.lrr'; did "
                                                                 "you mean probe.regimen.lr?"),
    (["task=probe", "probe.C=0.5"], "unknown config key 'probe.C'; did you mean probe.linear.C?"),
    (["task=probe", "probe.regimen.lr=0.1"], "probe.regimen.lr: probe.regimen is not part of this run's config (it "
                                             "comes with probe=depth or probe=distance)"),
    (["task=head"], "task=head: no such option (choose from extract, heads, importance, inspect, merge, patching, probe); "
                    "did you mean task=heads?"),
    (["logger=wandb_offline"], "logger=wandb_offline: no such option (choose from none, wandb); did you mean "
                               "logger=wandb?"),
    (["task=probe", "probe=arx"], "probe=arx: no such option (choose from arc, depth, distance, edge, relation); "
                                  "did you mean probe=arc?"),
    (["probe=arc"], "probe=...: the probe group belongs to task=probe (add task=probe)"),
    (["task=probe", "heads.min_count=3"], "heads.min_count: heads.* settings are read by task=heads or "
                                          "task=importance or task=merge, not by task=probe"),
    (["experiment=quickstart", "task=probe"], "heads.* settings are read by task=heads or task=importance or "
                                              "task=merge, not by task=probe"),
    (["extract.batch_size=many"], "extract.batch_size=many: Value 'many' of type 'str' could not be converted "
                                  "to Integer"),
    (["text=A cat.", "data=grammar"], "text=... is short for data=text data.text=...: leave out data= (or give "
                                      "data=text data.text=... yourself)"),
])
def test_mistakes_are_one_line_with_the_nearest_name(overrides, message):
    with pytest.raises(ProbingError) as err:
        compose_run(overrides)
    assert str(err.value) == message and "\n" not in str(err.value)


def test_sweeps_are_checked_by_their_first_value():
    cfg = compose_run(["task=probe", "probe.layer=range(0,6)", "probe.head=0,1"])
    assert (cfg.probe.layer, cfg.probe.head) == (0, 0)
    with pytest.raises(ProbingError, match="did you mean probe.layer"):
        compose_run(["task=probe", "probe.layr=range(0,6)"])


def test_text_is_short_for_raw_text_data():
    cfg = compose_run(["task=inspect", "text=The cat sat on the mat."])
    assert (cfg.data.kind.value, cfg.data.text) == ("text", "The cat sat on the mat.")


def test_every_help_example_composes_and_help_lists_every_key():
    for command, _ in HELP_EXAMPLES:
        args = [a.strip('"') for a in re.findall(r'(?:[^\s"]+"[^"]*"|[^\s"]+)', command) if a != "-m"]
        args = [a.replace('="', "=") for a in args]
        compose_run(args)
    text = help_text()
    for key in schema_keys():
        assert f" {key}=" in text, key
    for section in OPTIONAL_SECTIONS:
        assert f"({section}.*)" in text


def test_help_says_what_every_key_means_in_one_line_from_the_schema_comments():
    lines = help_text().splitlines()
    for key in schema_keys():
        (line,) = [ln for ln in lines if ln.startswith(f"    {key}=")]
        meaning = re.fullmatch(r"    \S+=.*?  \(.+?\)  (.+)", line)
        assert meaning and len(meaning.group(1)) <= 104, line  # a field without a comment has no meaning here
    # the field's own comment, its first clause (brackets kept whole, "et al." not a sentence's end)
    assert "    extract.pooling=mean_sum  (mean_sum|first)  how word pieces become words: mean_sum (rows averaged, " \
           "columns summed) or first (the first piece)" in lines
    assert "    model.revision=null  (str)  the hub revision to load (a branch, tag or commit; null: the default " \
           "branch)" in lines
    assert "    importance.method=both  (ablation|gradient|both)  ablation (each head in turn), gradient (Michel et " \
           "al. 2019) or both" in lines
    # an inherited field: the comment of the class that defines it; a comment block above a field; a long one cut
    assert "    probe.ci=0.95  (float)  the level of every interval (0.95: 95%)" in lines
    assert "    data.path=null  (str)  conllu: one file" in lines
    assert "    extract.keep_maps=true  (bool)  false: task=heads keeps, instead of each measure's maps, what it needs " \
           "of them (every head's pick ..." in lines


def test_the_command_line_prints_one_line_and_exits_2():
    got = subprocess.run([sys.executable, "-m", "probing.cli", "task=head"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr.strip().splitlines() == ["error: task=head: no such option (choose from extract, heads, "
                                               "importance, inspect, merge, patching, probe); did you mean task=heads?"]
    shown = subprocess.run([sys.executable, "-m", "probing.cli", "--help"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert shown.returncode == 0 and shown.stdout.strip() == help_text()


def readme_commands(path: Path = ROOT / "README.md") -> list[list[str]]:
    """The ``probing`` command lines of a Markdown file's code blocks, as argument lists (comments dropped,
    continued lines joined, Hydra's flags left out)."""
    import shlex

    commands, block, pending = [], False, ""
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            block = not block
            continue
        if not block:
            continue
        line = pending + line
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        words = shlex.split(re.sub(r"<[^>]*>", "X", line), comments=True)  # placeholders: <time> ...
        if words and words[0] == "probing":
            commands.append([w for w in words[1:] if not w.startswith("-")])
    return commands


def test_every_command_of_the_readme_and_the_docs_composes():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    commands = [c for page in pages for c in readme_commands(page)]
    assert len(readme_commands()) >= 6 and len(commands) >= 30
    for args in commands:
        try:
            compose_run(args)
        except ProbingError as e:
            raise AssertionError(f"probing {' '.join(args)}: {e}") from None
