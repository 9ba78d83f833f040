"""The structural write-up's statistics: the positional control's offset chosen on dev and scored on test,
Spearman's partial correlation against residuals of ranks, its interval over resampled heads."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, rankdata

PATH = Path(__file__).resolve().parents[2] / "experiments" / "structural_probes_ud_ewt" / "summarise.py"


@pytest.fixture(scope="module")
def summarise():
    spec = importlib.util.spec_from_file_location("structural_summarise", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_control_offset_is_chosen_on_dev_and_scored_on_test(summarise):
    # head (0, 0): dev prefers +1 though test prefers -1, so the control is +1's test score 0.30, not 0.40
    test = pd.DataFrame({"layer": [0, 0, 0, 0], "head": [0, 0, 1, 1], "offset": [-1, 1, -1, 1],
                         "uuas": [0.40, 0.30, 0.20, 0.25], "uuas_lo": [0.38, 0.28, 0.18, 0.23],
                         "uuas_hi": [0.42, 0.32, 0.22, 0.27]})
    dev = pd.DataFrame({"layer": [0, 0, 0, 0], "head": [0, 0, 1, 1], "offset": [-1, 1, -1, 1],
                        "uuas": [0.10, 0.50, 0.30, 0.30]})  # head (0, 1): a tie goes to -1
    c = summarise.positional_control(test, dev).set_index("head")
    assert c.control_offset.tolist() == [1, -1]
    assert c.control.tolist() == [0.30, 0.20]
    assert c.control_lo.tolist() == [0.28, 0.18] and c.control_hi.tolist() == [0.32, 0.22]
    assert c.test_better_offset.tolist() == [-1, 1]


def test_partial_spearman_equals_the_correlation_of_rank_residuals(summarise):
    rng = np.random.default_rng(0)
    z = rng.normal(size=72)
    x, y = z + rng.normal(size=72), z + 0.5 * rng.normal(size=72)
    rz = rankdata(z)

    def resid(a):
        ra = rankdata(a)
        return ra - np.polyval(np.polyfit(rz, ra, 1), rz)

    expected = pearsonr(resid(x), resid(y))[0]
    assert float(summarise.partial_spearman(x, y, z)) == pytest.approx(expected, abs=1e-12)
    np.testing.assert_allclose(summarise.rank_residuals(x, z), resid(x), atol=1e-9)
    # x and y related only through z: their plain rho is large, the partial one small
    assert summarise.spearman(x, y) > 0.5 and abs(expected) < 0.3


def test_partial_interval_covers_its_point_and_groups_average_within(summarise):
    rng = np.random.default_rng(1)
    z = rng.normal(size=72)
    x = z + rng.normal(size=72)
    y = x + rng.normal(size=72)  # related beyond z
    r, lo, hi = summarise.partial_rho_interval(x, y, z, n=2000)
    assert r == pytest.approx(float(summarise.partial_spearman(x, y, z)))
    assert lo < r < hi and lo > 0.2
    groups = np.repeat(np.arange(6), 12)
    rw, _, _ = summarise.partial_rho_interval(x, y, z, groups=groups, n=200)
    within = [float(summarise.partial_spearman(x[groups == g], y[groups == g], z[groups == g])) for g in range(6)]
    assert rw == pytest.approx(np.mean(within))


def test_previous_sections_are_split_at_their_headings(summarise, tmp_path):
    md = ["# title\n", "intro\n", "## Per hidden layer (x)\n", "table a\n", "### sub\n", "## Heads: y\n", "t b\n",
          "## MDL: z\n", "t c\n"]
    (tmp_path / "results.md").write_text("\n".join(md))
    kept = summarise.previous_sections(tmp_path / "results.md")
    assert kept == {"layers": ["## Per hidden layer (x)\n\ntable a\n\n### sub\n"], "heads": ["## Heads: y\n\nt b\n"],
                    "mdl": ["## MDL: z\n\nt c\n"]}
    # written back in order, the file is as it was
    assert "\n".join(md[:2] + kept["layers"] + kept["heads"] + kept["mdl"]) == "\n".join(md)
