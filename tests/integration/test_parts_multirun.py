"""The documented sequence: a joblib multirun over ``extract.partition`` extracts a corpus in four parts, the last
part to finish merges the store and runs the analysis; its tables equal those of one process, file for file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cache_dirs import store_dir

from probing.store import AttentionStore

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["heads", "baselines", "best_heads", "patterns", "patterns_layers", "head_distances", "head_mds", "trees"]


def run(args, env, cwd=ROOT):
    got = subprocess.run([sys.executable, "-m", "probing.cli", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=600)
    assert got.returncode == 0, (got.stdout + got.stderr)[-3000:]
    return got.stdout + got.stderr


@pytest.mark.slow
def test_four_parts_on_joblib_equal_one_process(tiny_model_dir, ewt_dir, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    common = ["task=heads", "model=local", f"model.name_or_path={tiny_model_dir}", "model.name=tiny", "data=conllu",
              f"data.path={ewt_dir / 'en_ewt-ud-dev.conllu'}", "data.limit=70", "extract.block_sentences=10",
              "extract.progress=false", "heads.bootstrap=50", "heads.min_count=5", "heads.figures=false",
              "report.enabled=false"]
    one = tmp_path / "one"
    run([*common, f"extract.cache_dir={tmp_path / 'cache1'}", f"hydra.run.dir={one}"], env)
    sweep = tmp_path / "sweep"
    out = run(["-m", *common, f"extract.cache_dir={tmp_path / 'cache4'}", "extract.partitions=4",
               "extract.partition=range(4)", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
               f"hydra.sweep.dir={sweep}"], env)
    assert "sweep:" in out
    analysed = [d for d in sorted(sweep.iterdir()) if (d / "heads.csv").is_file()]
    assert len(analysed) == 1, "the last part to finish runs the analysis, the others say which parts are left"
    for table in TABLES:
        a, b = (one / f"{table}.csv").read_bytes(), (analysed[0] / f"{table}.csv").read_bytes()
        assert a == b, f"{table}.csv differs"
    stores = [AttentionStore(store_dir(tmp_path / c)) for c in ("cache1", "cache4")]
    for i in stores[0].indices:
        assert stores[0].maps(i).tobytes() == stores[1].maps(i).tobytes()
    # the same command again reuses the merged store in every job
    again = tmp_path / "again"
    run(["-m", *common, f"extract.cache_dir={tmp_path / 'cache4'}", "extract.partitions=4",
         "extract.partition=range(4)", f"hydra.sweep.dir={again}"], env)
    assert all((d / "heads.csv").is_file() for d in again.iterdir() if d.is_dir() and d.name.isdigit())


@pytest.mark.slow
def test_keep_maps_false_tables_equal_stored_map_tables_in_one_process_and_in_parts(tiny_model_dir, ewt_dir,
                                                                                     tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    common = ["task=heads", "model=local", f"model.name_or_path={tiny_model_dir}", "model.name=tiny", "data=conllu",
              f"data.path={ewt_dir / 'en_ewt-ud-dev.conllu'}", "data.limit=60", "extract.block_sentences=10",
              "extract.progress=false", "heads.bootstrap=50", "heads.min_count=5", "heads.figures=false",
              "report.enabled=false", "heads.distance_sentences=25", "heads.tree_sentences=35"]
    maps, kept = tmp_path / "maps", tmp_path / "kept"
    run([*common, f"extract.cache_dir={tmp_path / 'c1'}", f"hydra.run.dir={maps}"], env)
    run([*common, f"extract.cache_dir={tmp_path / 'c2'}", "extract.keep_maps=false", f"hydra.run.dir={kept}"], env)
    sweep = tmp_path / "sweep"
    run(["-m", *common, f"extract.cache_dir={tmp_path / 'c3'}", "extract.keep_maps=false", "extract.partitions=3",
         "extract.partition=range(3)", f"hydra.sweep.dir={sweep}"], env)
    parts = [d for d in sorted(sweep.iterdir()) if (d / "heads.csv").is_file()]
    assert len(parts) == 1
    for table in TABLES:
        a = (maps / f"{table}.csv").read_bytes()
        assert a == (kept / f"{table}.csv").read_bytes(), f"{table}.csv: keep_maps=false differs"
        assert a == (parts[0] / f"{table}.csv").read_bytes(), f"{table}.csv: keep_maps=false in parts differs"
    # the corpus's store keeps only the statistics; the induction detector's few sequences keep their maps
    stores = [p.parent.name for p in (tmp_path / "c2").glob("*/manifest.json") if "-induction-" not in p.parent.name]
    assert len(stores) == 1 and "-heads_stats-" in stores[0], "no maps kept, only the statistics"
    maps_bytes = sum(f.stat().st_size for f in (tmp_path / "c1").rglob("*.bin"))
    kept_bytes = sum(f.stat().st_size for f in (tmp_path / "c2").rglob("*.bin"))
    assert kept_bytes < maps_bytes
