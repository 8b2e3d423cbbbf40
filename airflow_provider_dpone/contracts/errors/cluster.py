"""``DPONE_CLICKHOUSE_CLUSTER_*``: ClickHouse cluster publication (static admission, runtime admission, authority)."""

from __future__ import annotations

CODES: tuple[tuple[str, str, str], ...] = ()
