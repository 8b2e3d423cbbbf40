"""Codes for input that is malformed before any domain rule applies: manifests, canonical JSON, identifiers, and
stored records of a format this build does not read (both routes)."""

from __future__ import annotations

from airflow_provider_dpone.core.errors.code import ErrorCode

CODES: tuple[ErrorCode, ...] = (
    ErrorCode(
        "DPONE_MANIFEST_UNREADABLE",
        "the manifest file cannot be read",
        "check the path and file permissions",
        retryable=False,
        summary="the manifest file cannot be read",
    ),
    ErrorCode(
        "DPONE_MANIFEST_YAML_INVALID",
        "the manifest is not valid YAML or is not a mapping at the top level",
        "fix the YAML syntax at the reported line and column",
        retryable=False,
        summary="the manifest is not a YAML mapping",
    ),
    ErrorCode(
        "DPONE_MANIFEST_UNKNOWN_FIELD",
        "the manifest contains a field the schema does not define",
        "remove or correct the reported field; see docs/manifest-reference.md",
        retryable=False,
        summary="the manifest has a field the schema lacks",
    ),
    ErrorCode(
        "DPONE_MANIFEST_FIELD_INVALID",
        "a manifest field has a wrong type or a value outside its allowed set",
        "correct the reported field; see docs/manifest-reference.md",
        retryable=False,
        summary="a manifest field has a wrong value",
    ),
    ErrorCode(
        "DPONE_MANIFEST_FIELD_MISSING",
        "a required manifest field is absent",
        "add the reported field; see docs/manifest-reference.md",
        retryable=False,
        summary="a required manifest field is absent",
    ),
    ErrorCode(
        "DPONE_MANIFEST_DUPLICATE_KEY",
        "a YAML mapping in the manifest repeats a key (YAML would silently keep only the last value)",
        "remove the repeated key at the reported line",
        retryable=False,
        summary="a manifest mapping repeats a key",
    ),
    ErrorCode(
        "DPONE_MANIFEST_OVERSIZE",
        "the manifest file exceeds the size bound for manifests",
        "a manifest declares one job; move data and long SQL out of it",
        retryable=False,
        summary="the manifest file is too large",
    ),
    ErrorCode(
        "DPONE_MANIFEST_VERSION_UNSUPPORTED",
        "the manifest's version is not one this provider reads",
        "set version: 1; see docs/manifest-reference.md",
        retryable=False,
        summary="unsupported manifest version",
    ),
    ErrorCode(
        "DPONE_MANIFEST_WINDOW_INVALID",
        "load.window is not a fixed UTC half-open interval, or is absent/present for the wrong strategy",
        "give column, start and end as explicit UTC timestamps (e.g. 2026-09-01T00:00:00Z) with start < end, "
        "only with strategy partition_replace",
        retryable=False,
        summary="load.window is not a fixed UTC window",
    ),
    ErrorCode(
        "DPONE_IDENTIFIER_INVALID",
        "a database, table, column or cluster name is not a plain identifier "
        "(letters, digits, underscore; at most 128 characters; no quotes, backticks, NUL or look-alike characters)",
        "rename the object or reference it by a plain identifier",
        retryable=False,
        summary="a name is not a plain identifier",
    ),
    ErrorCode(
        "DPONE_DOCS_PAGE_NAME_INVALID",
        "the docs page asked for is a path (.., an absolute path, a dot, a character no page name has), not a page name",
        "name a page as messages cite it (connections, docs/connections.md, adr/<page>); `dpone docs` opens nothing else",
        retryable=False,
        summary="the docs page name is a path",
    ),
    ErrorCode(
        "DPONE_DOCS_PAGE_UNKNOWN",
        "no docs page of the installed provider has that name",
        "check the name against the pages in docs/ (`dpone docs` with no name prints getting-started)",
        retryable=False,
        summary="no docs page has that name",
    ),
    ErrorCode(
        "DPONE_CANONICAL_JSON_INVALID",
        "a value cannot be encoded as canonical JSON (floats, non-string keys or unsupported types)",
        "encode decimals as strings and use only JSON objects, arrays, strings, integers, booleans and null",
        retryable=False,
        summary="a value has no canonical JSON form",
    ),
    ErrorCode(
        "DPONE_CANONICAL_JSON_NONCANONICAL",
        "stored bytes are not the canonical encoding of their value",
        "preserve the stored bytes and investigate who rewrote them; never re-encode to make them pass",
        retryable=False,
        summary="stored bytes are not canonical",
    ),
    ErrorCode(
        "DPONE_CANONICAL_JSON_OVERSIZE",
        "a canonical JSON document exceeds its size bound",
        "reduce the document (fewer members or columns) or investigate a corrupt payload",
        retryable=False,
        summary="a JSON document exceeds its bound",
    ),
    ErrorCode(
        "DPONE_CONNECTION_INVALID",
        "the Airflow connection's extra is not a JSON object of known dpone_clickhouse options",
        "fix the connection's extra fields; see docs/connections.md",
        retryable=False,
        summary="the connection's extra is not valid",
    ),
    ErrorCode(
        "DPONE_CONNECTION_HOST_INVALID",
        "the Airflow connection's host field is not a bare host name or address: it holds user info "
        "(user:password@), a scheme, a path, a query or white space; nothing was sent and the host is not shown",
        "put only the host name or address in the host field, the login and password in their own fields; then "
        "rotate any password that was written into the host",
        retryable=False,
        summary="the connection host is not a bare host",
    ),
    ErrorCode(
        "DPONE_CONNECTION_UNDEFINED",
        "the Airflow connection a manifest names is not defined (no such connection id in the metadata database, "
        "a secrets backend or an AIRFLOW_CONN_<ID> variable)",
        "define the connection (see docs/connections.md), or correct the manifest's connection_id",
        retryable=False,
        summary="the Airflow connection is not defined",
    ),
    ErrorCode(
        "DPONE_RECORD_FORMAT_UNSUPPORTED",
        "a stored record (a publication authority record, a transfer journal record or stage object) is in a format "
        "this build does not read: another build wrote it (the detail names the format found, its writer and this "
        "build); nothing was read from it, migrated or changed",
        "settle the operation with the build that wrote the record (finish or abort it there), then run this build; "
        "never edit, convert or overwrite the record",
        retryable=False,
        summary="a stored record is in another format",
    ),
    ErrorCode(
        "DPONE_TYPED_VALUE_INVALID",
        "a value does not fit its column's logical type (or NULL in a non-nullable column)",
        "check the column type mapping; floats and nested types are not supported by exact verification",
        retryable=False,
        summary="a value does not fit its column type",
    ),
)
