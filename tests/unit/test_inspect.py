"""The single-sentence inspector: argmax choices and gold marks on hand-made maps, sentence sources."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf

from probing.config import InspectConfig, RunConfig
from probing.corpus import split_words
from probing.errors import ProbingError
from probing.heads.choices import choices_table, format_choices, head_choices, top_heads
from probing.tasks.inspect import sentences_to_inspect, with_seed_tree


def hand_maps() -> np.ndarray:
    """1 layer x 2 heads over [CLS] a b c [SEP] (prefix 1, 3 words). Rows sum to 1.

    head 0: a looks at b (0.6), b looks at [SEP] (0.7) but among words at c (0.2), c looks at b (0.5).
    head 1: every word looks at [CLS] (0.9); among words a->c, b->a, c->a (0.04 vs 0.03 vs 0.03).
    """
    m = np.zeros((1, 2, 5, 5), dtype=np.float32)
    m[0, 0, 1] = [0.1, 0.1, 0.6, 0.1, 0.1]
    m[0, 0, 2] = [0.0, 0.05, 0.05, 0.2, 0.7]
    m[0, 0, 3] = [0.2, 0.1, 0.5, 0.1, 0.1]
    m[0, 1, 1] = [0.9, 0.03, 0.03, 0.04, 0.0]
    m[0, 1, 2] = [0.9, 0.04, 0.03, 0.03, 0.0]
    m[0, 1, 3] = [0.9, 0.04, 0.03, 0.03, 0.0]
    m[0, :, 0, 0] = m[0, :, 4, 4] = 1.0
    return m


def test_head_choices_pick_the_argmax_with_and_without_specials():
    heads = (1, -1, 1)  # a <- b (root) -> c
    ch = head_choices(hand_maps(), prefix=1, n=3, heads=heads)
    assert ch.position.tolist() == [[[2, 4, 2], [0, 0, 0]]]  # positions: b, [SEP], b | [CLS] x3
    assert ch.weight[0, 0].tolist() == pytest.approx([0.6, 0.7, 0.5])
    assert ch.word.tolist() == [[[1, 2, 1], [2, 0, 0]]]  # words: b, c, b | c, a, a
    # gold: a->b yes, b is the root (never), c->b yes; head 1: a->c no, b root, c->a no
    assert ch.gold.tolist() == [[[True, False, True], [False, False, False]]]
    assert top_heads(ch, k=2) == [(0, 0, 2), (0, 1, 0)]
    assert head_choices(hand_maps(), prefix=1, n=3).gold is None


def test_format_marks_gold_choices_and_names_winning_specials():
    words, labels = ("a", "b", "c"), ["[CLS]", "a", "b", "c", "[SEP]"]
    ch = head_choices(hand_maps(), 1, 3, (1, -1, 1))
    lines = format_choices(words, labels, 1, ch)
    assert len(lines) == 2
    assert lines[0].endswith("gold 2/2 | a->b*  b->[SEP](c)  c->b*")
    assert lines[1].endswith("gold 0/2 | a->[CLS](c)  b->[CLS](a)  c->[CLS](a)")
    assert lines[0].startswith("L0  H0")
    no_tree = format_choices(words, labels, 1, head_choices(hand_maps(), 1, 3))
    assert no_tree[0].endswith("| a->b  b->[SEP](c)  c->b") and "gold" not in no_tree[0]


def test_choices_table_is_tidy():
    from probing.corpus import Sentence

    s = Sentence("s", ("a", "b", "c"), (1, -1, 1), ("det", "root", "obj"))
    ch = head_choices(hand_maps(), 1, 3, s.heads)
    df = choices_table(0, s, ["[CLS]", "a", "b", "c", "[SEP]"], 1, ch)
    assert len(df) == 1 * 2 * 3
    row = df[(df["head"] == 0) & (df["query"] == 1)].iloc[0]
    assert (row.choice_label, bool(row.choice_is_special), row.word_choice_word) == ("[SEP]", True, "c")
    assert df.is_gold.sum() == 2


def test_raw_text_matching_a_seed_sentence_gets_its_gold_tree():
    assert split_words("The cat sat on the mat.") == ("The", "cat", "sat", "on", "the", "mat", ".")
    assert split_words("It's a well-known fact!") == ("It's", "a", "well-known", "fact", "!")
    s, source = with_seed_tree(split_words("the cat sat on the mat."), "x")
    assert s.heads == (1, 2, -1, 5, 5, 2, 2) and s.relations[1] == "nsubj" and "grammar" in source
    s2, _ = with_seed_tree(split_words("I am going to deposit my money at the bank."), "y")
    assert s2.heads is not None and s2.relations[5] == "nmod:poss"
    s3, source3 = with_seed_tree(split_words("A dog barked."), "z")
    assert s3.heads is None and source3 == "text"


def _run_config(**data):
    cfg = OmegaConf.structured(RunConfig)
    cfg.inspect = InspectConfig()
    for k, v in data.items():
        cfg.data[k] = v
    return cfg


def test_sentence_sources(tmp_path):
    cfg = _run_config()
    with pytest.raises(ProbingError, match="needs sentences"):
        sentences_to_inspect(cfg.data, cfg.inspect)
    cfg = _run_config(kind="text", text="The cat sat on the mat.")
    [(s, _)] = sentences_to_inspect(cfg.data, cfg.inspect)
    assert s.heads is not None
    f = tmp_path / "s.txt"
    f.write_text("A dog barked.\n\nThe cat sat on the mat.\nOne more.\n")
    cfg = _run_config(kind="text", path=str(f))
    cfg.inspect.max_sentences = 2
    got = sentences_to_inspect(cfg.data, cfg.inspect)
    assert [x.words[1] for x, _ in got] == ["dog", "cat"] and got[1][0].heads is not None
    # the line numbers are the file's own (the blank line 2 is skipped, not renumbered)
    assert got[0][1] == "s-1: text" and got[1][1].startswith("s-3: grammar")
    cfg = _run_config(index=1)  # the built-in grammar: the second seed sentence
    [(s, source)] = sentences_to_inspect(cfg.data, cfg.inspect)
    assert s.words[:3] == ("I", "am", "going") and s.heads is not None and "#1" in source
    cfg.data.index = 10_000
    with pytest.raises(ProbingError, match="data.index=10000"):
        sentences_to_inspect(cfg.data, cfg.inspect)


def test_a_conllu_file_brings_its_gold_trees(tmp_path):
    f = tmp_path / "two.conllu"
    f.write_text(
        "# sent_id = a\n1\tDogs\tdog\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\t_\t_\t0\troot\t_\t_\n\n"
        "# sent_id = b\n1\tCats\tcat\tNOUN\t_\t_\t2\tnsubj\t_\t_\n2\tsleep\tsleep\tVERB\t_\t_\t0\troot\t_\t_\n\n")
    cfg = _run_config(kind="conllu", name="two", path=str(f))
    got = sentences_to_inspect(cfg.data, cfg.inspect)
    assert [s.words for s, _ in got] == [("Dogs", "bark"), ("Cats", "sleep")]
    assert [s.heads for s, _ in got] == [(1, -1), (1, -1)] and "(a)" in got[0][1]


def test_measures_are_tagged_and_per_layer_maps_are_labelled_by_layer():
    words, labels = ("a", "b", "c"), ["[CLS]", "a", "b", "c", "[SEP]"]
    ch = head_choices(hand_maps()[:, :1], 1, 3, (1, -1, 1))
    [line] = format_choices(words, labels, 1, ch, tag="alti ", per_layer=True)
    assert line.startswith("alti L0  all ") and line.endswith("gold 2/2 | a->b*  b->[SEP](c)  c->b*")


def test_inspector_views_show_every_measure(tmp_path):
    """A per-head and a per-layer measure beside the weights: a PNG each (a panel a layer for the per-layer
    one), and one page section per measure, each named."""
    from probing.corpus import Sentence
    from probing.figures.inspect import png_grid
    from probing.report import inspect as views

    s = Sentence("s", ("a", "b", "c"), (1, -1, 1), ("det", "root", "obj"))
    labels = ["[CLS]", "a", "b", "c", "[SEP]"]
    maps = hand_maps()
    norm = maps * np.array([1.0, 3.0, 0.5, 2.0, 0.1], dtype=np.float32)  # value norms per key: unbounded rows
    layer = maps[:, :1]
    shown = []
    for name, m, per_layer in (("attention", maps, False), ("norm", norm, False), ("alti", layer, True)):
        mv = views.MeasureView(name, m, head_choices(m, 1, 3, s.heads), per_layer, None)
        png = png_grid(mv, 1, s.words, tmp_path / f"{name}.png", "t")
        assert png.read_bytes()[:4] == b"\x89PNG"
        shown.append(views.MeasureView(name, m, mv.choices, per_layer, png))
    assert shown[0].vmax == 1.0 and shown[1].vmax == pytest.approx(float(norm.max()))
    view = views.SentenceView(0, s, "test", labels, 1, tuple(shown))
    assert view.weights.measure == "attention"
    html = views.write_html([view], tmp_path / "i.html", "m").read_text()
    for name in ("attention", "norm", "alti"):
        assert f"data-measure='{name}'" in html and f"<h3>Measure: {name}</h3>" in html
        assert f"href='#s0-{name}'" in html
    assert html.count("Plotly.newPlot") == 3 and "<td class='l'>L0</td>" in html  # the per-layer row label
