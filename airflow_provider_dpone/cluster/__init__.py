"""Full refresh of one ClickHouse cluster table, in both replication modes, with durable quality replay.

Layers, imports strictly downward: clickhouse (the ports on clickhouse-connect) > protocol (the state machines,
on ports only) > ports > values (authority records and codecs, receipts, part digests, the quality capsule)."""
