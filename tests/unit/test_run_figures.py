"""The run's static heatmaps: one PNG per relation, drawn by blitting over one laid-out figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
from PIL import Image

from probing.figures.heads import relation_heatmaps


def table(best: dict[str, tuple[int, int]]) -> pd.DataFrame:
    rows = []
    for rel, (bl, bh) in best.items():
        for d in ("dep_to_head", "head_to_dep"):
            for layer in range(3):
                for head in range(4):
                    acc = 0.9 if (layer, head) == (bl, bh) else 0.1
                    rows.append(dict(relation=rel, direction=d, layer=layer, head=head, n=50, accuracy=acc,
                                     baseline_offset=1, baseline_accuracy=0.2))
    return pd.DataFrame(rows)


def red_centre(path) -> tuple[float, float]:
    """Where the red outline of the best cell is, as fractions of the image's width and height."""
    a = np.asarray(Image.open(path).convert("RGB")).astype(int)
    red = (a[..., 0] > 200) & (a[..., 1] < 60) & (a[..., 2] < 60)
    ys, xs = np.nonzero(red)
    assert len(xs) > 20, "no red outline drawn"
    return xs.mean() / a.shape[1], ys.mean() / a.shape[0]


def test_one_png_per_relation_with_the_best_cell_outlined_where_it_is(tmp_path):
    paths = relation_heatmaps(table({"det": (0, 0), "nmod:poss": (2, 3)}), ["dep_to_head", "head_to_dep"],
                              "model · corpus", tmp_path)
    assert [p.name for p in paths] == ["heads_det.png", "heads_nmod_poss.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heads_det.png", "heads_nmod_poss.png"]  # no temp files
    (x0, y0), (x1, y1) = red_centre(paths[0]), red_centre(paths[1])
    # det's best is the top-left cell of both panels, nmod:poss's the bottom-right: further right and lower
    assert x1 > x0 + 0.05 and y1 > y0 + 0.1
    assert Image.open(paths[0]).size == Image.open(paths[1]).size
