"""Packed kept sessions (app/storage/sqlite/packing.py): size and CPU per session, in process.

    PYTHONPATH=. python -m bench.packing DATA_DIR [--env retail] [--limit 200]

Reads the closed plain session files of a data dir (a soak's, say, run with
`STATEGYM_PACK_CLOSED_SESSIONS=false`), packs each against the environment's template in memory
and unpacks it again (checked equal), and prints the sizes and the CPU time of each step; the
data dir is not changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
from pathlib import Path

from app.storage.sqlite import packing


def measure(data_dir: Path, env: str, limit: int) -> dict[str, float]:
    (template,) = (data_dir / "templates" / env).glob("*.sqlite")
    base = template.read_bytes()
    sha = hashlib.sha256(base).hexdigest()
    files = [
        p
        for p in sorted((data_dir / "sessions" / env).glob("*.sqlite"))
        if not p.with_name(p.name + "-wal").exists()
    ][:limit]
    if not files:
        raise SystemExit(f"no closed plain session files under {data_dir}/sessions/{env}")
    sizes, packed, encode_ms, decode_ms = [], [], [], []
    for path in files:
        try:
            image = path.read_bytes()
        except FileNotFoundError:  # a live data dir: removed by retention meanwhile
            continue
        start = time.process_time()
        pack = packing.encode(image, base, sha)
        encode_ms.append((time.process_time() - start) * 1000)
        start = time.process_time()
        assert packing.decode(pack, base) == image
        decode_ms.append((time.process_time() - start) * 1000)
        sizes.append(len(image))
        packed.append(len(pack))
    return {
        "sessions": len(files),
        "file_kb": statistics.mean(sizes) / 1024,
        "pack_kb": statistics.mean(packed) / 1024,
        "ratio": statistics.mean(sizes) / statistics.mean(packed),
        "encode_ms_p50": statistics.median(encode_ms),
        "decode_ms_p50": statistics.median(decode_ms),
        "template_kb": len(base) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--env", default="retail")
    parser.add_argument("--limit", type=int, default=200)
    args = parser.parse_args()
    result = measure(args.data_dir, args.env, args.limit)
    print(json.dumps({k: round(v, 2) for k, v in result.items()}, indent=1))


if __name__ == "__main__":
    main()
