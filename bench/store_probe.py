"""Benchmark: the create-once probe a transfer task start pays, against one journal-record write, in the same run.

On ``file://`` (a temp dir) and on S3 (moto's S3 API server from the test extras, on a loopback port), after one
warm-up (the first S3 call builds the client), it times ``--repeat`` times:

* baseline: one ``ObjectStore.put_once`` of a 200-byte record (what a journal append costs);
* probe: ``probe_create_once`` (a put, a refused put, a read, a delete).

It prints the median of each in milliseconds and the ratio probe/baseline; the last line is one JSON object.

    .venv/bin/python bench/store_probe.py [--repeat 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tests.support.airflow_home  # noqa: F401 -- an empty Airflow home of its own, before Airflow is imported


def _median_ms(action: Callable[[], None], repeat: int) -> float:
    action()  # warm-up: the first S3 call builds the client
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _measure(url: str, repeat: int) -> dict[str, float]:
    from airflow_provider_dpone.core.storage import ObjectStore, probe_create_once

    store = ObjectStore(url)
    record = b"x" * 200
    put = _median_ms(lambda: store.put_once(f"journal/{uuid.uuid4().hex}.json", record), repeat)
    probe = _median_ms(lambda: probe_create_once(store), repeat)
    return {"put_once_ms": round(put, 2), "probe_ms": round(probe, 2), "ratio": round(probe / put, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    from tests.support.fixtures.object_store import moto_s3

    with moto_s3("bench_s3", "bench-probe") as server, tempfile.TemporaryDirectory() as local:
        results = {
            "file": _measure(f"file://{local}", args.repeat),
            "s3_moto": _measure(server.url("store"), args.repeat),
        }
    for name, figures in results.items():
        print(
            f"{name:8} put_once {figures['put_once_ms']:8.2f} ms  probe {figures['probe_ms']:8.2f} ms  "
            f"probe/put_once {figures['ratio']:.2f}"
        )
    print(json.dumps({"repeat": args.repeat, **results}))


if __name__ == "__main__":
    main()
