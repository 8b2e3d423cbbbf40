"""Ports implemented for real systems (ClickHouse over clickhouse-connect, SQL Server, PostgreSQL, object storage)."""
