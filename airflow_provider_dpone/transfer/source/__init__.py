"""The ClickHouse snapshot source: one pinned session, the physical observation, the exact raw-row read."""
