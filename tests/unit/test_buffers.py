"""Reusable memory for batches' temporaries: slots reused and grown, and never visible in what extraction
returns or stores."""

from __future__ import annotations

import numpy as np
import torch
from test_store_extract import cfg, corpus

from probing.alignment import pool_attention
from probing.buffers import Buffers
from probing.config import Measure, Pooling, Representation
from probing.extract import extract, word_maps


def test_a_slot_is_reused_until_it_must_grow():
    b = Buffers()
    first = b.take("a", (2, 3))
    assert first.shape == (2, 3) and first.dtype == torch.float32 and first.is_contiguous()
    assert b.take("a", (3, 2)).data_ptr() == first.data_ptr()  # same memory, another shape
    assert b.take("other", (2, 3)).data_ptr() != first.data_ptr()  # slots are apart
    grown = b.take("a", (8,))
    assert grown.data_ptr() != first.data_ptr() and grown.shape == (8,)
    assert b.take("a", (9,)).data_ptr() == grown.data_ptr()  # grown by half: room for the next longer batch
    half = b.take("a", (4, 4), torch.float16)  # another dtype replaces the slot
    assert half.dtype == torch.float16 and b.nbytes() == 16 * 2 + 6 * 4


def test_pool_attention_reads_layers_unstacked_and_into_buffers():
    g = torch.Generator().manual_seed(0)
    attn = torch.rand(2, 3, 2, 6, 6, generator=g).softmax(-1)
    pos = torch.tensor([[0, 1, 2, 2, 3, 4], [0, 1, 1, 2, 3, -1]])
    for pooling in (Pooling.mean_sum, Pooling.first):
        stacked = pool_attention(attn, pos, 5, pooling)
        work = Buffers()
        lent = pool_attention(list(attn.unbind(1)), pos, 5, pooling, buffers=work)
        torch.testing.assert_close(lent, stacked)
        again = pool_attention(attn.flip(0), pos.flip(0), 5, pooling, buffers=work)  # the same memory
        assert again.data_ptr() == lent.data_ptr()
        torch.testing.assert_close(again, stacked.flip(0))


def test_arrays_of_a_batch_are_their_own_after_later_batches(tiny_encoder):
    """``word_maps`` with shared buffers hands out copies: the first batch's arrays (float32, where the
    longest sentence's slice of a padded batch would otherwise be a view) stay as computed alone."""
    c = corpus()
    what = [Measure.attention, Measure.norm, Representation.hidden, Representation.heads]
    first = tiny_encoder.tokenize([s.words for s in c.sentences[:3]])
    second = tiny_encoder.tokenize([s.words for s in c.sentences[3:7]])
    alone = word_maps(tiny_encoder, first, Pooling.mean_sum, what, torch.float32)
    work = Buffers()
    shared = word_maps(tiny_encoder, first, Pooling.mean_sum, what, torch.float32, work)
    word_maps(tiny_encoder, second, Pooling.mean_sum, what, torch.float32, work)
    word_maps(tiny_encoder, first[::-1], Pooling.mean_sum, what, torch.float32, work)
    for w in what:
        for a, b in zip(alone[w], shared[w]):
            np.testing.assert_array_equal(a, b)


def test_an_encoder_keeps_its_buffers_across_extractions(tiny_encoder, tmp_path):
    extract(tiny_encoder, corpus(), cfg(tmp_path / "a"))
    held = tiny_encoder.buffers.nbytes()
    ptr = tiny_encoder.buffers.take("pool_rows", (1,)).data_ptr()
    r = extract(tiny_encoder, corpus(), cfg(tmp_path / "b"))
    assert not r.reused and held > 0 and tiny_encoder.buffers.nbytes() == held
    assert tiny_encoder.buffers.take("pool_rows", (1,)).data_ptr() == ptr


def test_resident_cap_trims_only_past_its_slack(monkeypatch):
    """The cap hands memory back when the resident size has grown by more than the slack since the last trim,
    and measures its new floor after each trim."""
    import probing.buffers as buffers

    readings = iter([100.0, 150.0, 170.0, 120.0, 180.0, 190.0, 110.0])
    trims = []
    monkeypatch.setattr(buffers, "resident_mb", lambda: next(readings))
    monkeypatch.setattr(buffers, "release_free_memory", lambda: trims.append(True))
    monkeypatch.setattr(buffers, "_trim", object())
    cap = buffers.ResidentCap(64)
    assert cap.floor == 100.0
    cap.check()  # 150: within 100 + 64
    assert not trims
    cap.check()  # 170: past it, trimmed, the floor read again (120)
    assert len(trims) == 1 and cap.floor == 120.0
    cap.check()  # 180: within 120 + 64
    assert len(trims) == 1
    cap.check()  # 190: past it
    assert len(trims) == 2 and cap.floor == 110.0
    off = buffers.ResidentCap(None)  # no slack: never reads or trims
    off.check()
    assert off.floor is None and len(trims) == 2


def test_extraction_under_a_resident_cap_stores_the_same_maps(tiny_encoder, tmp_path):
    plain = extract(tiny_encoder, corpus(), cfg(tmp_path / "plain", trim_mb=None)).store  # never trims
    capped = extract(tiny_encoder, corpus(), cfg(tmp_path / "capped", trim_mb=0.0)).store  # trims every batch
    assert list(plain.indices) == list(capped.indices)
    for i in plain.indices:
        assert plain.maps(i).tobytes() == capped.maps(i).tobytes()


def test_a_negative_trim_is_refused_in_one_line_before_anything_is_written(tiny_encoder, tmp_path):
    import pytest

    from probing.errors import ProbingError

    with pytest.raises(ProbingError, match=r"^extract.trim_mb=-1.0: give the growth in MB"):
        extract(tiny_encoder, corpus(), cfg(tmp_path / "c", trim_mb=-1.0))
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


def test_extraction_fixes_glibcs_mmap_threshold_in_bytes(tiny_encoder, tmp_path, monkeypatch):
    import probing.buffers as buffers

    calls = []
    monkeypatch.setattr(buffers, "_mallopt", lambda option, value: calls.append((option, value)) or 1)
    extract(tiny_encoder, corpus(), cfg(tmp_path / "a", mmap_threshold_mb=4.0))
    assert calls == [(-3, 4 * 2**20)]  # M_MMAP_THRESHOLD, as malloc.h numbers it
    extract(tiny_encoder, corpus(), cfg(tmp_path / "b", mmap_threshold_mb=None))  # glibc's own: not touched
    assert calls == [(-3, 4 * 2**20)]


_MAPPED = """
import ctypes, sys
import numpy as np
import probing.buffers as buffers

class Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

info = buffers._glibc("mallinfo2")
if buffers._mallopt is None or info is None:
    sys.exit(3)
info.restype = Mallinfo2
assert buffers.fix_mmap_threshold(float(sys.argv[1])) and not buffers.fix_mmap_threshold(None)
before = info().hblkhd
big = np.ones(8 * 2**20, dtype=np.uint8)
during = info().hblkhd - before
del big
after = info().hblkhd - before
small = np.ones(2 * 2**20, dtype=np.uint8)
print(during, after, info().hblkhd - before)
"""


def test_with_the_threshold_fixed_a_block_above_it_is_mapped_apart_and_one_below_is_not():
    """What glibc's own accounting shows in a fresh process (a heap with a large free block would serve both):
    after ``fix_mmap_threshold(4)`` an 8 MB array is a mapping of its own (counted in mallinfo2's mapped bytes
    while it lives, gone when freed), a 2 MB one comes from the heap."""
    import subprocess
    import sys

    import pytest

    run = subprocess.run([sys.executable, "-c", _MAPPED, "4"], capture_output=True, text=True)
    if run.returncode == 3:
        pytest.skip("not glibc 2.33 or later")
    assert run.returncode == 0, run.stderr
    during, after, small = (int(x) for x in run.stdout.split())
    assert during >= 8 * 2**20 and after == 0 and small == 0


def test_an_mmap_threshold_out_of_range_is_refused_in_one_line(tiny_encoder, tmp_path):
    import pytest

    from probing.errors import ProbingError

    for mb in (0.0, 33.0):
        with pytest.raises(ProbingError, match=rf"^extract.mmap_threshold_mb={mb}: give a size in MB above 0 and "
                                               r"at most 32 \(as high as glibc's own threshold goes\), or null"):
            extract(tiny_encoder, corpus(), cfg(tmp_path / "c", mmap_threshold_mb=mb))
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())
