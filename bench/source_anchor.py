"""What anchoring an extracted artifact to its source costs: the source engine's count and typed digest of the
source query (a second read of the query) against the seal without it (extraction, store, reference digest).

Run: ``PYTHONPATH=. .venv/bin/python bench/source_anchor.py [rows] [trials]``; prints per trial the seal's seconds,
the anchor's seconds inside it, and their ratio, measured in the same run.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from external_publication import COLUMNS, attach, source_query, start_cluster


def main(rows: int, trials: int) -> None:
    from airflow_provider_dpone.cluster.clickhouse.artifact_source import QueryArtifactSource

    timed: list[float] = []
    original = QueryArtifactSource.source_digest

    def source_digest(self: Any, version: Any) -> tuple[int, str]:
        started = time.perf_counter()
        try:
            return original(self, version)
        finally:
            timed.append(time.perf_counter() - started)

    QueryArtifactSource.source_digest = source_digest  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as directory:
        cluster = start_cluster(Path(directory) / "cluster", 2)
        try:
            adapters, _, _ = attach(cluster, "bench", Path(directory) / "store")
            for trial in range(trials):
                source = adapters.query_source(query=source_query(rows), columns=COLUMNS, max_source_bytes=1 << 34)
                started = time.perf_counter()
                receipt = source.seal()
                total = time.perf_counter() - started
                anchor = timed[-1]
                print(
                    f"trial {trial}: {rows:,d} rows, {receipt.byte_size / 1e6:.1f} MB; seal {total:.2f} s, of which "
                    f"the source anchor {anchor:.2f} s ({anchor / (total - anchor):.0%} of the seal without it)"
                )
            adapters.close()
        finally:
            cluster.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000, int(sys.argv[2]) if len(sys.argv) > 2 else 3)
