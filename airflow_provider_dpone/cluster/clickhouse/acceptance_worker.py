"""The bounded acceptance worker process: ``python -m airflow_provider_dpone.cluster.clickhouse.acceptance_worker``.

It reads **one** request frame from its stdin, a private pipe only its parent holds: the connection of each member
the plan reads (credentials included: never in argv, the environment, a file or a report), a typed
:class:`TargetReadPlan` (never SQL), the budget and a nonce. It makes every read of the plan -- the guard facts of each
guarded replica through the same :class:`ClickHouseMemberSession` reads the protocol uses elsewhere, the aggregate
read of the scanned replica, the guard facts again -- and answers **one** frame on stdout: ``{"nonce",
"observation"}`` or ``{"nonce", "failure", "detail"}`` where ``failure`` is ``unavailable`` (a member could not be
asked, or refused a read) or ``incomplete`` (the server's time bound fired, or an answer was not exactly the plan's),
and ``detail`` is an exception class name or a fixed text, never a host, credential or SQL text. Its parent kills it
when the budget is spent: one budget covers every read.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from pydantic import ValidationError

from airflow_provider_dpone.cluster.clickhouse.endpoint import Endpoint
from airflow_provider_dpone.cluster.clickhouse.member_session import ClickHouseMemberSession
from airflow_provider_dpone.cluster.clickhouse.oneshot import TIMEOUT_EXCEEDED, error_code
from airflow_provider_dpone.cluster.clickhouse.sql_acceptance import UUID_ALIAS, aliases, read_settings, target_counts
from airflow_provider_dpone.cluster.clickhouse.sql_digest import content_digest
from airflow_provider_dpone.cluster.protocol.quality_target import replica_facts
from airflow_provider_dpone.cluster.values.quality_read import ColumnCounts, Observation, TargetCounts, TargetReadPlan
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions

MAX_REQUEST_BYTES = 1 << 20


class IncompleteAnswerError(Exception):
    """The answer is not exactly one row with exactly the plan's columns."""


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise IncompleteAnswerError("a count is not a non-negative integer")
    return value


def counts_from(plan: TargetReadPlan, names: tuple[str, ...], rows: list[Any]) -> TargetCounts:
    """The counts of the aggregate statement's answer, or :class:`IncompleteAnswerError` unless it is exactly one
    row with exactly the plan's aliases and strict non-negative integer counts."""
    expected = aliases(plan)
    if len(rows) != 1 or len(names) != 3 + len(expected) or names[2] != UUID_ALIAS or names[3:] != expected:
        raise IncompleteAnswerError("missing rows or aliases")
    row = dict(zip(names[2:], rows[0][2:], strict=True))
    count = _count(rows[0][0])
    hash_sum = rows[0][1]
    if not isinstance(hash_sum, str) or not hash_sum.isdigit():
        raise IncompleteAnswerError("the multiset sum is not decimal text")
    uuid = row[UUID_ALIAS]
    if not isinstance(uuid, str):
        raise IncompleteAnswerError("the table left during the read")
    columns = tuple(
        ColumnCounts(
            name=name,
            null_count=_count(row[f"null_{index}"]) if "null_count" in plan.metrics else None,
            distinct_count=_count(row[f"distinct_{index}"]) if "distinct_count" in plan.metrics else None,
        )
        for index, name in enumerate(plan.columns)
    )
    try:
        return TargetCounts(
            generation_uuid=uuid,
            row_count=count,
            content_digest=content_digest(count, int(hash_sum), plan.digest_version),
            columns=columns,
        )
    except (ValidationError, ValueError):
        raise IncompleteAnswerError("the answer is not a UUID, counts and a sum of the digest's width") from None


def _connection(raw: dict[str, Any], budget_seconds: int) -> ResolvedConnection:
    options = ClickHouseConnectionOptions.model_validate(raw["options"])
    bounded = options.model_copy(
        update={"send_receive_timeout_seconds": max(1, min(options.send_receive_timeout_seconds, budget_seconds + 1))}
    )
    return ResolvedConnection(
        host=raw["host"],
        port=int(raw["port"]),
        username=raw["username"],
        password=raw["password"],
        options=bounded,
        unverified_tls_allowed=raw.get("unverified_tls_allowed") is True,
    )


def _observe(request: dict[str, Any]) -> Observation:
    plan = TargetReadPlan.model_validate(request["plan"])
    budget_seconds = math.ceil(int(request["budget_ms"]) / 1000)
    connections = request["members"]
    if set(connections) != set(plan.member_ids):
        raise IncompleteAnswerError("the request does not carry exactly the plan's members")
    endpoints = {mid: Endpoint.of(_connection(connections[mid], budget_seconds)) for mid in plan.member_ids}
    try:
        sessions = {mid: ClickHouseMemberSession(endpoint, mid) for mid, endpoint in endpoints.items()}
        before = tuple(replica_facts(sessions[read.member_id], plan, read) for read in plan.guard)
        if plan.scan is None:
            return Observation(before=before)
        result = endpoints[plan.scan].reader().query(target_counts(plan), settings=read_settings(budget_seconds))
        counts = counts_from(plan, tuple(result.column_names), list(result.result_rows))
        after = tuple(replica_facts(sessions[read.member_id], plan, read) for read in plan.guard)
        return Observation(before=before, counts=counts, after=after)
    finally:
        for endpoint in endpoints.values():
            endpoint.close()


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The frame answering one request (pure but for the read itself)."""
    nonce = request.get("nonce")
    try:
        return {"nonce": nonce, "observation": _observe(request).model_dump(mode="json")}
    except IncompleteAnswerError as error:
        return {"nonce": nonce, "failure": "incomplete", "detail": str(error)}
    except Exception as error:  # noqa: BLE001 -- every other failure is "could not ask"; only its class travels
        failure = "incomplete" if error_code(error) == TIMEOUT_EXCEEDED else "unavailable"
        return {"nonce": nonce, "failure": failure, "detail": type(error).__name__}


def main() -> int:
    request = json.loads(sys.stdin.buffer.read(MAX_REQUEST_BYTES))
    sys.stdout.write(json.dumps(answer(request), separators=(",", ":")))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
