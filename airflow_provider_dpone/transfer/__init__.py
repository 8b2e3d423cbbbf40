"""ClickHouse ReplacingMergeTree exact raw-row snapshot -> SQL Server / PostgreSQL, with source-free recovery.

Layers, imports strictly downward: source | targets | storage (adapters) > route (the state machine,
on ports only) > ports > values (chunks, journal records, stage codec, target plans and receipts)."""
