"""A garbage-collector probe for a server under a benchmark: put this folder first on the
server's PYTHONPATH, and every 10 s it appends to $STATEGYM_GC_PROBE_OUT (one JSON line) the
collections so far per generation, their CPU seconds and the longest one (wall, ms).

    PYTHONPATH=bench/gc_probe STATEGYM_GC_PROBE_OUT=/tmp/gc.jsonl stategym serve ...

Python imports `sitecustomize` at start-up from the first folder on sys.path that has one; the
server itself is unchanged. Used for bench/history/soak.md, "The collector at training scale".
"""

import gc
import json
import os
import threading
import time

_started: dict[int, tuple[float, float]] = {}
_count = [0, 0, 0]
_cpu_s = [0.0, 0.0, 0.0]
_longest_ms = [0.0, 0.0, 0.0]


def _callback(phase: str, info: dict) -> None:
    generation = info["generation"]
    if phase == "start":
        _started[generation] = (time.thread_time(), time.perf_counter())
        return
    cpu, wall = _started.pop(generation, (time.thread_time(), time.perf_counter()))
    _count[generation] += 1
    _cpu_s[generation] += time.thread_time() - cpu
    _longest_ms[generation] = max(_longest_ms[generation], 1000 * (time.perf_counter() - wall))


def _write(path: str) -> None:
    while True:
        time.sleep(10)
        line = {"t": round(time.time(), 1), "collections": _count, "cpu_s": _cpu_s}
        line["longest_ms"] = _longest_ms
        with open(path, "a") as out:
            out.write(json.dumps(line) + "\n")


if os.environ.get("STATEGYM_GC_PROBE_OUT"):
    gc.callbacks.append(_callback)
    threading.Thread(
        target=_write, args=(os.environ["STATEGYM_GC_PROBE_OUT"],), daemon=True
    ).start()
