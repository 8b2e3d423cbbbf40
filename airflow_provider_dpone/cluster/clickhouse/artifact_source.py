"""Sealing an artifact (``ArtifactSource``): extraction from a ClickHouse source query, or adoption of an existing file.

Extraction streams the query's result as ClickHouse ``Native`` bytes over HTTP (``raw_stream``) straight into the
artifact store in large chunks, hashing while it writes; ``max_source_bytes`` is enforced *while* streaming: the
stream is closed and the partial object discarded at the bound, never after. Adoption copies an existing Native file
into the store the same way. Either way the bytes pass through the worker once, as bytes: no Python row objects.

Then the receipt is completed from the *stored* object: the server loads those bytes into a temporary table,
checks them against the declared columns and returns the row count and the reference content digest
(``reference_digest``). An extraction is then anchored to its source: the source engine counts and digests the
rows of the same query over its own values (``sql_digest.source_content``, a second read), and the receipt is
returned only if both equal the stored bytes' (``DPONE_ARTIFACT_SOURCE_DIGEST_MISMATCH`` otherwise). The receipt is
what the protocol binds in the authority before any member is touched. An adopted file has no source to compare
with: its receipt is anchored to its own bytes only.

Every read of the source query (the stream, its source digest, the ``DESCRIBE`` of its columns) carries
:func:`extraction_settings`: ``readonly = 1`` and the provider's time bound (a caller's own request settings, such
as a block size, go with them and never over them). Under ``readonly = 1`` the server
refuses any change of a setting, so neither a write nor a query-level ``SETTINGS`` clause that lifts a limit
(``max_execution_time = 0``, ``max_memory_usage = 0``, ``readonly = 0``) can run (Code 164, ``READONLY``; ClickHouse
``src/Access/SettingsConstraints.cpp``, ``getChecker``: ``readonly == 1`` refuses every setting not made
``CHANGEABLE_IN_READONLY`` by the account's profile, while ``readonly = 2`` would admit all but ``readonly``). The
settings travel with the request, and the server checks them together against the account's own profile before it
applies them (``HTTPHandler.cpp``), so ``readonly = 1`` does not forbid its companions. Static admission refuses a
``SETTINGS`` clause in the manifest's query before anything is sent
(``DPONE_CLICKHOUSE_CLUSTER_QUERY_SETTINGS_REFUSED``); this is the server-side bound behind it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO, Final

from airflow_provider_dpone.cluster.clickhouse.artifact_store import (
    ArtifactWriter,
    ObjectStorageArtifactStore,
    StoredObject,
)
from airflow_provider_dpone.cluster.clickhouse.column_types import canonical_columns
from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.reference_digest import reference_digest
from airflow_provider_dpone.cluster.clickhouse.sql_digest import content_digest, source_content
from airflow_provider_dpone.cluster.values.receipts import (
    CURRENT_CONTENT_DIGEST,
    ArtifactColumn,
    ArtifactReceipt,
    ContentDigestVersion,
)
from airflow_provider_dpone.core.errors import DponeError

EXTRACTION_SECONDS: Final[int] = 3600
"""Default server-side bound of one read of the source query (``[dpone] extraction_timeout_seconds``)."""


def extraction_settings(seconds: int = EXTRACTION_SECONDS) -> dict[str, int | str]:
    """The settings of every read of a source query: read-only, stopped by the server at ``seconds`` (Code 159)."""
    if not 0 < seconds <= 7 * 86_400:
        raise ValueError("the extraction time bound must be between 1 s and 7 days")
    return {"readonly": 1, "max_execution_time": seconds, "timeout_overflow_mode": "throw"}


def seal_stored(
    store: ObjectStorageArtifactStore,
    stored: StoredObject,
    columns: Sequence[tuple[str, str]],
    reference: Endpoint,
) -> ArtifactReceipt:
    """The receipt of a committed object: rows and content digest computed by ``reference`` from the stored bytes."""
    rows, content = reference_digest(reference, columns, store.stream(stored))
    return ArtifactReceipt(
        sha256=stored.sha256,
        byte_size=stored.byte_size,
        row_count=rows,
        wire_format="Native",
        columns=tuple(ArtifactColumn(name=name, type=type_) for name, type_ in columns),
        content_digest=content,
        replayable=True,
        content_digest_version=CURRENT_CONTENT_DIGEST,
    )


def copy_bounded(read: Any, writer: ArtifactWriter, chunk_bytes: int) -> None:
    """Copy ``read(n)`` chunks into ``writer`` until EOF (the writer enforces the bound before each write)."""
    while chunk := read(chunk_bytes):
        writer.write(chunk)


class QueryArtifactSource:
    """Extraction: one read-only query on the source (:func:`extraction_settings`), streamed as Native bytes into the
    store."""

    def __init__(
        self,
        *,
        source: Endpoint,
        query: str,
        columns: Sequence[tuple[str, str]],
        store: ObjectStorageArtifactStore,
        reference: Endpoint,
        max_source_bytes: int,
        max_execution_seconds: int = EXTRACTION_SECONDS,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.source = source
        self.query = query
        self.columns = canonical_columns(tuple(columns))
        self.store = store
        self.reference = reference
        self.max_source_bytes = max_source_bytes
        self.settings = {**(settings or {}), **extraction_settings(max_execution_seconds)}  # the provider's win

    def seal(self) -> ArtifactReceipt:
        writer = self.store.writer(self.max_source_bytes)
        with writer:
            try:
                stream = self.source.reader().raw_stream(self.query, fmt="Native", settings=self.settings)
            except Exception as error:  # noqa: BLE001 -- the query or the connection failed
                raise DponeError("DPONE_ARTIFACT_EXTRACTION_FAILED", type(error).__name__) from None
            try:
                copy_bounded(stream.read, writer, self.store.chunk_bytes)
            except DponeError:
                raise
            except Exception as error:  # noqa: BLE001 -- the stream broke
                raise DponeError("DPONE_ARTIFACT_EXTRACTION_FAILED", type(error).__name__) from None
            finally:
                _close(stream)
            stored = writer.commit()
        receipt = seal_stored(self.store, stored, self.columns, self.reference)
        rows, content = self.source_digest(receipt.content_digest_version)
        if (rows, content) != (receipt.row_count, receipt.content_digest):
            raise DponeError(
                "DPONE_ARTIFACT_SOURCE_DIGEST_MISMATCH",
                f"source {rows} rows, digest {content[:16]}; artifact {receipt.row_count} rows, digest "
                f"{receipt.content_digest[:16]}",
            )
        return receipt

    def source_digest(self, version: ContentDigestVersion) -> tuple[int, str]:
        """``(row_count, content_digest)`` of the source query's rows, computed by the source engine over its own
        values with the query's settings: a path independent of the bytes the extraction stored."""
        try:
            rows = (
                self.source.reader()
                .query(source_content(self.query, self.columns, version), settings=self.settings)
                .result_rows
            )
            count, hash_sum = int(rows[0][0]), int(rows[0][1])
        except Exception as error:  # noqa: BLE001 -- the query or the connection failed
            raise DponeError("DPONE_ARTIFACT_SOURCE_DIGEST_FAILED", type(error).__name__) from None
        return count, content_digest(count, hash_sum, version)


class FileArtifactSource:
    """Adoption: an existing Native file (any readable binary stream) copied into the store under the same bound."""

    def __init__(
        self,
        *,
        opener: Any,
        columns: Sequence[tuple[str, str]],
        store: ObjectStorageArtifactStore,
        reference: Endpoint,
        max_source_bytes: int,
    ) -> None:
        self.opener = opener
        self.columns = canonical_columns(tuple(columns))
        self.store = store
        self.reference = reference
        self.max_source_bytes = max_source_bytes

    def seal(self) -> ArtifactReceipt:
        writer = self.store.writer(self.max_source_bytes)
        with writer:
            try:
                handle: BinaryIO = self.opener()
            except Exception as error:  # noqa: BLE001
                raise DponeError("DPONE_ARTIFACT_STORE_FAILED", f"open source file ({type(error).__name__})") from None
            try:
                copy_bounded(handle.read, writer, self.store.chunk_bytes)
            finally:
                _close(handle)
            stored = writer.commit()
        return seal_stored(self.store, stored, self.columns, self.reference)


def _close(stream: Any) -> None:
    with contextlib.suppress(Exception):  # closing a broken stream may fail too
        stream.close()
