"""``inspect.pair``: heads ranked by the weight linking two words (a planted head ranks first), the one line
for a word a sentence lacks, and each head's strongest links as the summary of raw text."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from probing.heads.links import distinct, find_pair, format_links, pair_words, rank_pair, strongest_links


def random_maps(n_layers: int = 2, n_heads: int = 4, n: int = 5, seed: int = 0) -> np.ndarray:
    """Word-level maps ``(L, H, n, n)`` with rows on the simplex, none above 0.5."""
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(n) * 5.0, size=(n_layers, n_heads, n)).astype(np.float32)
    return np.minimum(w, 0.5)


def test_a_planted_head_ranks_first_either_way():
    w = random_maps()
    a, b = 1, 3
    w[1, 2, a] = 0.0
    w[1, 2, a, b] = 0.9  # L1H2: a -> b
    df = rank_pair(w, a, b)
    top = df.iloc[0]
    assert (top["rank"], top.layer, top["head"], top.rank_b_in_a) == (1, 1, 2, 1)
    assert top.weight_ab == pytest.approx(0.9) and len(df) == 2 * 4
    assert df["link"].is_monotonic_decreasing
    w[0, 3, b] = 0.0
    w[0, 3, b, a] = 0.95  # L0H3: b -> a, stronger still
    top = rank_pair(w, a, b).iloc[0]
    assert (top.layer, top["head"], top.rank_a_in_b) == (0, 3, 1) and top.weight_ba == pytest.approx(0.95)


def test_rank_pair_agrees_with_a_loop_over_heads():
    w = random_maps(3, 5, 6, seed=1)
    a, b = 4, 0
    df = rank_pair(w, a, b).set_index(["layer", "head"])
    for layer in range(3):
        for head in range(5):
            row = df.loc[(layer, head)]
            assert row.weight_ab == pytest.approx(w[layer, head, a, b])
            assert row.weight_ba == pytest.approx(w[layer, head, b, a])
            targets = sorted(w[layer, head, a], reverse=True)
            assert row.rank_b_in_a == targets.index(w[layer, head, a, b]) + 1
            targets = sorted(w[layer, head, b], reverse=True)
            assert row.rank_a_in_b == targets.index(w[layer, head, b, a]) + 1
            # positional expectation: the mean weight at offset -4 (words 4, 5 -> 0, 1) and +4 (0, 1 -> 4, 5)
            back = np.mean([w[layer, head, q, q - 4] for q in (4, 5)])
            ahead = np.mean([w[layer, head, q, q + 4] for q in (0, 1)])
            assert row.positional_ab == pytest.approx(back) and row.positional_ba == pytest.approx(ahead)
            assert row.excess == pytest.approx(max(w[layer, head, a, b] - back, w[layer, head, b, a] - ahead))
    assert sorted(df.rank_excess) == list(range(1, 16))
    assert df.sort_values("rank_excess").excess.is_monotonic_decreasing


def test_words_are_found_by_first_occurrence_and_a_missing_one_is_one_line():
    words = ("The", "cat", "sat", "on", "the", "mat", ".")
    got = find_pair(words, ("cat", "sat"))
    assert (got.a, got.b, got.notes) == (1, 2, ())
    got = find_pair(words, ("the", "mat"))  # any case; the first of two
    assert (got.a, got.b) == (0, 5) and got.notes == ("'the' occurs 2 times (words #0, #4): #0 is used",)
    got = find_pair(words, ("the", "THE"))  # one word named twice: its first two occurrences
    assert (got.a, got.b) == (0, 4) and "#0 and #4 are used" in got.notes[0]
    missing = find_pair(words, ("cat", "dog"))
    assert missing == "'dog' is not in the sentence (words: The, cat, sat, on, the, mat, .)"
    assert "\n" not in missing and "once" in find_pair(words, ("cat", "cat"))


def test_the_pair_setting_takes_two_words():
    assert pair_words([]) is None and pair_words([" cat", "sat"]) == ("cat", "sat")
    for bad in (["cat"], ["cat", "sat", "on"], ["cat", ""]):
        with pytest.raises(ValueError, match="inspect.pair=.*name two words"):
            pair_words(bad)


def test_the_command_line_pair_is_a_list():
    from probing.compose import compose_run

    for given in ("cat,sat", "[cat,sat]"):
        cfg = compose_run(["task=inspect", "text=The cat sat on the mat.", f"inspect.pair={given}"])
        assert list(cfg.inspect.pair) == ["cat", "sat"]
    cfg = compose_run(["task=inspect", "text=The cat sat.", "inspect.pair=It's,fact"])
    assert list(cfg.inspect.pair) == ["It's", "fact"]


def test_strongest_links_leave_out_self_links():
    w = random_maps(1, 2, 4)
    w[0, 0, np.arange(4), np.arange(4)] = 1.0  # self-links strongest: left out
    w[0, 0, 2, 0] = 0.8
    query, key, weight = strongest_links(w, 3)
    assert query.shape == (1, 2, 3) and (query != key).all()
    assert (query[0, 0, 0], key[0, 0, 0]) == (2, 0) and weight[0, 0, 0] == pytest.approx(0.8)
    assert (np.diff(weight, axis=-1) <= 0).all()
    assert strongest_links(w[:, :, :2, :2], 5)[0].shape[-1] == 2  # only n (n - 1) links exist
    lines = format_links(("a", "the", "b", "the"), (query, key, weight))
    assert lines[0].startswith("  L0  H0  | b->a 0.80") and len(lines) == 2
    assert distinct(("The", "cat", "the")) == ["The#0", "cat", "the#2"]


# ---- end to end on the tiny model ------------------------------------------------------------------------

PLANT = (1, 2)  # layer, head whose 'dog' attends to 'house' only
RAW = "a dog saw the big red house ."  # no gold tree
SEED = "the cat sat on the mat ."  # a grammar seed sentence: its gold tree


@pytest.fixture
def planted(monkeypatch):
    """The task's maps, with head ``PLANT``'s row of 'dog' in the raw sentence moved onto 'house'."""
    from probing.config import Measure
    from probing.tasks import inspect as task

    real, seen = task.extract_in_memory, {}

    def extract(encoder, sentences, pooling, measures):
        got = real(encoder, sentences, pooling, measures)
        maps, prefix = got[0]
        att = np.array(maps[Measure.attention])
        layer, head = PLANT
        att[layer, head, prefix + 1] = 0.0
        att[layer, head, prefix + 1, prefix + 6] = 1.0
        maps[Measure.attention] = att
        seen.update(maps=maps, prefix=prefix)
        return got

    monkeypatch.setattr(task, "extract_in_memory", extract)
    return seen


def test_pair_end_to_end_on_the_tiny_model(tiny_model_dir, tmp_path, capsys, planted):
    from probing.compose import compose_run
    from probing.tasks.run import run

    f = tmp_path / "two.txt"
    f.write_text(f"{RAW}\n{SEED}\n")
    cfg = compose_run(["task=inspect", "data=text", f"data.path={f}", "model=local",
                       f"model.name_or_path={tiny_model_dir}", "model.name=tiny", "model.device=cpu",
                       "inspect.pair=dog,house", "inspect.measures=[attention,norm]", "inspect.bertviz=false",
                       "inspect.png=false"])
    metrics = run(cfg, tmp_path / "run").metrics
    printed = capsys.readouterr().out
    assert metrics["pair_sentences"] == 1 and metrics["pair_best_head"] == "L1H2"

    table = pd.read_csv(tmp_path / "run" / "inspect_pair.csv")
    assert sorted(table.measure.unique()) == ["attention", "norm"] and (table.sentence == 0).all()
    att = table[table.measure == "attention"].sort_values("rank")
    assert len(att) == 2 * 4 and tuple(att.iloc[0][["layer", "head", "rank_b_in_a"]]) == (1, 2, 1)
    assert (att.word_a == "dog").all() and (att.a == 1).all() and (att.b == 6).all()
    from probing.config import Measure

    w, p = planted["maps"][Measure.attention], planted["prefix"]
    for r in att.itertuples():
        assert r.weight_ab == pytest.approx(float(w[r.layer, r.head, p + 1, p + 6]), abs=1e-6)
        assert r.weight_ba == pytest.approx(float(w[r.layer, r.head, p + 6, p + 1]), abs=1e-6)

    rows = re.findall(r"^    (attention|norm) +(L\d+H\d+) +([\d.]+) +([\d.]+) +(\d+)/8  [\d.]+ [\d.]+  \d+$", printed,
                      flags=re.M)
    assert len(rows) == 2 * 5 and rows[0] == ("attention", "L1H2", "1.000", rows[0][3], "1")
    assert "pair dog (#1), house (#6)" in printed
    # the page has the ranking too: a sortable table per measure, every head, beside its positional expectation
    page = (tmp_path / "run" / "inspect.html").read_text()
    assert "Heads linking dog (#1) and house (#6)" in page and page.count("rank by excess") == 2
    assert "<td>L1H2</td>" in page.replace(" class='l'", "")
    assert "  pair: 'dog' is not in the sentence (words: the, cat, sat, on, the, mat, .)" in printed
    # raw text: each head's strongest links; the seed sentence keeps its gold summary
    assert "strongest links of each head (no gold tree)" in printed
    assert len(re.findall(r"^  links L\d +H\d +\| ", printed, flags=re.M)) == 8
    assert len(re.findall(r"^  norm links L\d +H\d +\| ", printed, flags=re.M)) == 8
    assert re.search(r"^  links L1  H2  \| dog->house 1\.00", printed, flags=re.M)
    assert "heads choosing the gold head most often" in printed
