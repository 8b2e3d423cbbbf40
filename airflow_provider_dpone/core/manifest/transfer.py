"""Manifest of the native ClickHouse -> SQL Server / PostgreSQL transfer route.

The source is one table, named by database and table: there is no custom SQL on this route (a raw snapshot is one
qualified SELECT that dpone renders itself). ``source.options.native_transfer`` is the existing closed option model,
including the ``source_snapshot`` selector.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from airflow_provider_dpone.core.canonical import Closed
from airflow_provider_dpone.core.manifest.transfer_options import NativeTransferOptions
from airflow_provider_dpone.core.manifest.types import (
    ConnectionId,
    Identifier,
    LoadStrategy,
    ManifestName,
    ManifestVersion,
    SinkOptions,
    Window,
    check_window_for_strategy,
)


class StringMapping(StrEnum):
    """How a ClickHouse String/FixedString is stored: ``binary`` (lossless default) or validated UTF-8 ``text``."""

    BINARY = "binary"
    TEXT = "text"


class TransferSourceOptions(Closed):
    native_transfer: NativeTransferOptions = Field(
        default_factory=NativeTransferOptions,
        description="Closed options of the native route: source_snapshot selector, wire format, execution bounds.",
    )


class ClickHouseTableSource(Closed):
    """One ClickHouse table read by one dedicated SELECT on a directly connected server."""

    type: Literal["clickhouse"] = Field(description="Source kind.")
    connection_id: ConnectionId = Field(description="Airflow connection id of the ClickHouse server to read from.")
    database: Identifier = Field(description="Source database (Atomic).")
    table: Identifier = Field(description="Source table (MergeTree; ReplacingMergeTree with exact_raw_rows).")
    options: TransferSourceOptions = Field(default_factory=TransferSourceOptions, description="Source options.")


class TransferSinkOptions(SinkOptions):
    """Options of a transfer target table."""

    string_mapping: StringMapping = Field(
        default=StringMapping.BINARY,
        description="How ClickHouse String columns are stored: binary (default; VARBINARY(MAX)/bytea, every byte "
        "round-trips) or text (NVARCHAR(MAX)/text; every value must be strict UTF-8, and NUL-free on PostgreSQL, "
        "or the load is refused with native_transfer.target_value_invalid). Applies to every String column of the table.",
    )


class MssqlSink(Closed):
    type: Literal["mssql"] = Field(description="Sink kind.")
    connection_id: ConnectionId = Field(description="Airflow connection id (mssql) of the SQL Server database.")
    target_schema: Identifier = Field(alias="schema", description="Target schema, e.g. dbo.")
    table: Identifier = Field(description="Target table.")
    options: TransferSinkOptions = Field(default_factory=TransferSinkOptions, description="Sink options.")


class PostgresSink(Closed):
    type: Literal["postgres"] = Field(description="Sink kind.")
    connection_id: ConnectionId = Field(description="Airflow connection id (postgres) of the target database.")
    target_schema: Identifier = Field(alias="schema", description="Target schema, e.g. public.")
    table: Identifier = Field(description="Target table.")
    options: TransferSinkOptions = Field(default_factory=TransferSinkOptions, description="Sink options.")


TransferSink = Annotated[MssqlSink | PostgresSink, Field(discriminator="type")]


class TransferLoad(Closed):
    strategy: LoadStrategy = Field(description="full_refresh, or partition_replace of one fixed window.")
    window: Window | None = Field(default=None, description="Required with partition_replace, refused otherwise.")

    @model_validator(mode="after")
    def _window_matches_strategy(self) -> TransferLoad:
        check_window_for_strategy(self.strategy, self.window)
        return self


class NativeTransferManifest(Closed):
    """Move one ClickHouse table (or one fixed UTC window of it) into a SQL Server or PostgreSQL table."""

    version: ManifestVersion = Field(description="Manifest schema version; 1.")
    name: ManifestName = Field(description="Job name (a label; not part of the normalized plan).")
    source: ClickHouseTableSource = Field(description="The ClickHouse table to read.")
    sink: TransferSink = Field(description="The SQL Server or PostgreSQL table to replace.")
    load: TransferLoad = Field(description="Load strategy and window.")
