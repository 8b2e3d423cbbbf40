"""Cancelling an abandoned source read on the server, by two independent means.

1. **Cancel on client close.** Over HTTP the long reads carry :data:`CANCEL_ON_CLOSE`: ClickHouse cancels a
   read-only HTTP query when its client closes the connection (``cancel_http_readonly_queries_on_client_close``),
   and only if ``readonly > 0`` (a POST is not read-only by itself). ``readonly = 2`` refuses anything but reads and
   still admits the query-level settings of the frozen profile. Leaving the stream closes its connection without
   reading the rest.
2. **KILL QUERY by id.** The data SELECT has a deterministic query id, so an early exit sends
   ``KILL QUERY WHERE query_id = {id:String} ASYNC`` on a separate request outside the pinning session (the session is
   busy with the SELECT). ASYNC: the error path never waits for the server. It covers what (1) cannot see: an
   intermediary that keeps the upstream connection open after the client's close. The source account may stop its
   own queries without any grant. The KILL is not a data mutation; it is sent once (``query_retries = 0``, urllib3
   ``Retry(total=0)``, and clickhouse-connect replays only the reads it recognises, which KILL is not).

The KILL is best effort: its failure is logged as ``native_transfer.source_cancel_unconfirmed`` and never replaces
the error that made the read stop.
"""

from __future__ import annotations

import logging
from typing import Final

from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.core.errors import DponeError

log = logging.getLogger(__name__)

CANCEL_ON_CLOSE: Final[dict[str, str]] = {"readonly": "2", "cancel_http_readonly_queries_on_client_close": "1"}
"""Settings of the long HTTP reads (the data SELECT, the selected-rows count): cancelled when the client hangs up."""
KILL_SQL: Final = "KILL QUERY WHERE query_id = {query_id:String} ASYNC"


def kill_query(client: Client, query_id: str) -> None:
    """Ask the server to stop the query ``query_id``; never raises (a failure is a coded warning line)."""
    settings: dict[str, str] = {}
    if client.get_client_setting("session_id"):
        settings = {"session_id": "", "session_check": "0"}  # the pinning session is busy with the query
    try:
        client.query(KILL_SQL, parameters={"query_id": query_id}, settings=settings)
    except Exception as exc:  # noqa: BLE001 - best effort by contract: the original error must stand
        server_code = getattr(exc, "code", None)
        detail = f"query id {query_id}: " + (f"server code {server_code}" if server_code else type(exc).__name__)
        log.warning("%s", DponeError("native_transfer.source_cancel_unconfirmed", detail))
