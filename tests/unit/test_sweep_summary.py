"""The end of a multirun: its dir, the failed jobs (alike ones on one line), and the command that shows it,
which depends on what the finished jobs ran; a probe's one line prints counts as counts."""

from __future__ import annotations

import json

from omegaconf import OmegaConf

from probing.cli import SweepSummary, job_line
from probing.probes.data import ProbeResult
from probing.tasks.probe import across_seeds, headline


def sweep_dir(tmp_path, jobs: dict[int, str | None]):
    """Job dirs named like Hydra's: a task name writes that task's ``metrics.json``, None a ``failed.txt``."""
    for num, task in jobs.items():
        job = tmp_path / str(num)
        (job / ".hydra").mkdir(parents=True)
        if task is None:
            (job / "failed.txt").write_text(f"/nope{num % 2}.conllu: no such CoNLL-U file\n")
        else:
            (job / "metrics.json").write_text(json.dumps({"task": task}))
    return OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}, "job": {"name": "cli"}}})


def summary(capsys, config) -> tuple[list[str], int]:
    code = 0
    try:
        SweepSummary().on_multirun_end(config)
    except SystemExit as e:
        code = e.code
    return capsys.readouterr().out.splitlines(), code


def test_a_measure_sweep_suggests_the_report(tmp_path, capsys):
    lines, code = summary(capsys, sweep_dir(tmp_path, {0: "heads", 1: "heads"}))
    assert lines == [f"sweep: {tmp_path} (2 jobs, 0 failed)", f"next: probing-report {tmp_path}"] and code == 0


def test_a_probe_sweep_is_collected_then_reported(tmp_path, capsys):
    lines, code = summary(capsys, sweep_dir(tmp_path, {0: "probe", 1: "probe", 2: None}))
    assert lines == [f"sweep: {tmp_path} (3 jobs, 1 failed)", "  job 2: /nope0.conllu: no such CoNLL-U file",
                     f"next: probing-collect {tmp_path} && probing-report {tmp_path}"] and code == 2


def test_a_sweep_whose_jobs_all_failed_suggests_nothing_to_collect(tmp_path, capsys):
    lines, code = summary(capsys, sweep_dir(tmp_path, {k: None for k in range(12)}))
    assert lines == [f"sweep: {tmp_path} (12 jobs, 12 failed)",
                     "  jobs 0, 2, 4, 6, 8, 10: /nope0.conllu: no such CoNLL-U file",
                     "  jobs 1, 3, 5, 7, 9, 11: /nope1.conllu: no such CoNLL-U file",
                     f"next: nothing to collect (no job finished; each job's log: {tmp_path}/<job>/cli.log)"]
    assert code == 2


def test_failed_jobs_in_a_row_are_a_range(tmp_path, capsys):
    config = sweep_dir(tmp_path, {0: "extract", 1: None, 2: "extract", 3: None, 4: None, 5: None})
    for k in (3, 4, 5):
        (tmp_path / str(k) / "failed.txt").write_text("model.device=cuda: no CUDA device\n")
    lines, _ = summary(capsys, config)
    assert lines[1:] == ["  job 1: /nope1.conllu: no such CoNLL-U file", "  jobs 3-5: model.device=cuda: no CUDA device",
                         f"next: probing-collect {tmp_path}"]


def test_a_job_is_one_line_on_the_console():
    assert job_line("probe=arc ...: uas=0.4000") == "probe=arc ...: uas=0.4000"
    assert job_line("best head per relation:\nrelation n\n all 830") == "finished"
    assert job_line(None) == "finished"


def test_counts_print_as_counts_and_scores_with_their_sd():
    line = headline("probe=relation (dev; mean of 3 seeds, ± sd)",
                    {"accuracy": 0.34259, "n_train": 522, "n_classes": 19, "converged": True, "selectivity": -0.0062},
                    {"accuracy": 0.0, "n_train": 0.0, "selectivity": 0.0695})
    assert line == ("probe=relation (dev; mean of 3 seeds, ± sd): accuracy=0.3426 ± 0.0000, n_train=522, "
                    "n_classes=19, selectivity=-0.0062 ± 0.0695")


def test_a_count_the_seeds_agree_on_stays_a_count():
    runs = [ProbeResult({"accuracy": a, "n_train": 522, "epochs": e}) for a, e in ((0.5, 10), (0.7, 13))]
    result, spread = across_seeds(runs, [0, 1], 0.95)
    assert result.metrics == {"accuracy": 0.6, "n_train": 522, "epochs": 11.5}
    assert type(result.metrics["n_train"]) is int and spread["sd"]["n_train"] == 0.0
