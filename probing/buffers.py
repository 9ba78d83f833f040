"""Reusable memory for the large temporaries of a loop over batches (extraction's pooling, the context-mixing
measures' transformed values).

A tensor of tens of megabytes freed at the end of every batch goes back to the system (glibc maps such blocks
on their own, or trims them off the top of its heap) and the next batch's comes back as fresh pages, each
zeroed by the kernel on first touch, which costs system time on every batch. Kept in :class:`Buffers` (an
:class:`~probing.encoder.Encoder` holds one for as long as it is loaded), the same pages serve every batch.
"""

from __future__ import annotations

import math
import os

import torch

_GROWTH = 1.5  # batches come sorted by length: room for the next few longer ones at each reallocation


class Buffers:
    """Named slots of memory, each a tensor that only grows: :meth:`take` hands out a view of a slot, valid
    until the slot is taken again. Not thread-safe; one per loop (an extraction, a batch's layers)."""

    def __init__(self) -> None:
        self._slots: dict[str, torch.Tensor] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype: torch.dtype = torch.float32,
             device: "torch.device | str" = "cpu") -> torch.Tensor:
        """A contiguous ``shape`` view of slot ``name`` (uninitialised), the slot grown when too small (and
        replaced when asked for another dtype or device)."""
        n = math.prod(shape)
        slot = self._slots.get(name)
        if slot is None or slot.dtype != dtype or slot.device != torch.device(device) or slot.numel() < n:
            same = slot is not None and slot.dtype == dtype and slot.device == torch.device(device)
            grown = max(n, math.ceil(slot.numel() * _GROWTH)) if same else n
            slot = self._slots[name] = torch.empty(grown, dtype=dtype, device=device)
        return slot[:n].view(shape)

    def nbytes(self) -> int:
        """Memory held by all slots."""
        return sum(s.numel() * s.element_size() for s in self._slots.values())


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim``; nothing elsewhere).

    glibc returns only the top of its heap by itself, and after a large block is freed it serves blocks up to that
    size from the heap rather than mapping them apart: a long loop over batches of varying shapes then leaves
    freed pages scattered in the heap, and the process's resident memory climbs with the number of batches.
    Called between blocks of sentences, this brings the resident size back to what is in use (the peak within a
    block still climbs: :class:`ResidentCap`); the pages in use are untouched."""
    if _trim is not None:
        _trim(0)


class ResidentCap:
    """Keeps a loop's resident memory within ``slack_mb`` of where the last trim left it: :meth:`check` (once a
    batch) reads the resident size and, when it has grown by more than the slack, hands the heap's free pages
    back (:func:`release_free_memory`). Batches of new shapes leave freed blocks in glibc's heap that later
    batches do not fit: the bytes in use stay flat while the resident size climbs with the number of batches.
    Each trim costs page faults when the pages are used again. ``slack_mb`` None, a resident size that cannot
    be read or an allocator that does not trim: nothing is done."""

    def __init__(self, slack_mb: "float | None"):
        self.slack = slack_mb
        self.floor = resident_mb() if slack_mb is not None and _trim is not None else None

    def check(self) -> None:
        if self.floor is None:
            return
        now = resident_mb()
        if now is not None and now > self.floor + self.slack:
            release_free_memory()
            self.floor = resident_mb()


def fix_mmap_threshold(mb: "float | None") -> bool:
    """Have glibc map every block of at least ``mb`` MB apart, and unmap it when freed, for the rest of the
    process (``mallopt(M_MMAP_THRESHOLD)``; nothing elsewhere, or with ``mb`` None).

    By default glibc raises that threshold to the size of the largest mapped block freed so far (up to 32 MB) and
    keeps twice as much free at the top of its heap: over a loop of batches of ever new shapes the threshold
    climbs, more of the batches' temporaries come from the heap, and its freed blocks, scattered between live
    ones, keep the resident size climbing with the number of batches. A fixed threshold of a few MB sends the
    forward pass's large tensors to their own mappings, so the heap holds only the smaller ones. Returns whether
    the allocator took it."""
    return mb is not None and _mallopt is not None and _mallopt(_M_MMAP_THRESHOLD, int(mb * 2**20)) == 1


def resident_mb() -> "float | None":
    """This process's resident memory now (Linux's /proc; None elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return None


def _glibc(name: str):
    import ctypes
    import ctypes.util

    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):  # not glibc (macOS, musl): its allocator does its own
        return None


_trim = _glibc("malloc_trim")
_mallopt = _glibc("mallopt")
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD_MAX_MB = 32  # glibc's own threshold climbs no higher on 64-bit systems
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
