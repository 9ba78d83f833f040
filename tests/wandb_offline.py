"""Read what an offline wandb run logged, without syncing it (test-only: the package never reads it back)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any


def offline_records(run_file: Path) -> list:
    """The protobuf records of an offline run's ``run-*.wandb`` file, to check what a run logged without
    syncing it. The file is a LevelDB-style log: a 7-byte header, then 32 KiB blocks of chunks, each with a
    7-byte header (crc32, length, type FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(run_file).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{run_file}: not a wandb run file")
    pos, block, pending, out = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        pos += 7
        chunk, pos = data[pos:pos + length], pos + length
        if pos > len(data):  # the writer is still on this chunk: what is complete so far
            break
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(pending)
            out.append(rec)
    return out


def offline_summary(records: list) -> dict[str, Any]:
    """The final summary of an offline run (nested keys joined with ``/``) from its records."""
    summary: dict[str, Any] = {}
    for rec in records:
        if rec.WhichOneof("record_type") == "summary":
            for item in rec.summary.update:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                summary[key] = json.loads(item.value_json)
    return summary
