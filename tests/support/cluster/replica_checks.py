"""What the DAG tests on the embedded cluster read directly from every engine to judge a run, never from XCom.

Counts and digests are read per replica and compared with the source, one replica at a time (never summed across
replicas): rows, distinct ids and a duplicate-sensitive multiset digest (``sum`` of a 128-bit hash of every row, which
is NULL-safe because it hashes the whole tuple). The authority record is read from the coordinator's KeeperMap table
and decoded with the provider's own codec.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord, decode
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_TABLE, AuthorityRow
from airflow_provider_dpone.cluster.values.identities import member_id

_DIGEST = "count(), uniqExact(id), toString(sum(reinterpretAsUInt128(sipHash128(tuple(*)))))"


class Content(NamedTuple):
    rows: int
    ids: int
    digest: str


def _query(cluster: Any, process: Any, statement: str) -> list[tuple[Any, ...]]:
    client = cluster.client(process)
    try:
        return [tuple(row) for row in client.query(statement).result_rows]
    finally:
        client.close()


def source_content(cluster: Any, database: str) -> Content:
    """The source table on the coordinator (where the example's query runs)."""
    rows, ids, digest = _query(cluster, "coordinator", f"SELECT {_DIGEST} FROM `{database}`.source_table")[0]
    return Content(int(rows), int(ids), str(digest))


def replica_contents(cluster: Any, database: str, table: str = "target_table") -> list[Content | None]:
    """``table`` on each member, read from that member's engine; ``None`` where the name is free."""
    result: list[Content | None] = []
    for member in cluster.members:
        exists = _query(cluster, member, f"EXISTS TABLE `{database}`.`{table}`")[0][0]
        if not int(exists):
            result.append(None)
            continue
        rows, ids, digest = _query(cluster, member, f"SELECT {_DIGEST} FROM `{database}`.`{table}`")[0]
        result.append(Content(int(rows), int(ids), str(digest)))
    return result


def table_facts(cluster: Any, database: str) -> list[list[tuple[str, str, str]]]:
    """(name, engine, partition key) of every table, per member."""
    return [
        [
            (str(name), str(engine), str(partition))
            for name, engine, partition in _query(
                cluster,
                member,
                f"SELECT name, engine, partition_key FROM system.tables WHERE database = '{database}' ORDER BY name",
            )
        ]
        for member in cluster.members
    ]


def replica_paths(cluster: Any, database: str, table: str = "target_table") -> set[str]:
    """The Keeper paths the members' replicas of ``table`` report (one path: one replicated table)."""
    paths: set[str] = set()
    for member in cluster.members:
        rows = _query(
            cluster,
            member,
            f"SELECT zookeeper_path FROM system.replicas WHERE database = '{database}' AND table = '{table}'",
        )
        paths.update(str(row[0]) for row in rows)
    return paths


def authority_record(cluster: Any, database: str) -> AuthorityRecord | None:
    """The one authority record of the database, decoded (``None`` when no operation ever fenced the target)."""
    rows = _query(
        cluster,
        "coordinator",
        "SELECT target_key, operation_id, fence_token, phase, dispatch_epoch, payload, toString(payload_sha256)"
        f" FROM `{database}`.`{AUTHORITY_TABLE}`",
    )
    if not rows:
        return None
    assert len(rows) == 1, "one target, one record"
    key, operation, fence, phase, epoch, payload, digest = rows[0]
    return decode(
        AuthorityRow(
            target_key=key,
            operation_id=operation,
            fence_token=fence,
            phase=phase,
            dispatch_epoch=int(epoch),
            payload=payload,
            payload_sha256=digest,
        )
    )


def queue_entries(cluster: Any, database: str, statement: str, naming: str = "") -> int:
    """How many distinct ON CLUSTER entries of ``statement`` (e.g. ``EXCHANGE TABLES``) name ``database`` (and
    contain ``naming``, e.g. the internal candidates' infix)."""
    rows = _query(
        cluster,
        "coordinator",
        "SELECT count(DISTINCT entry) FROM system.distributed_ddl_queue"
        f" WHERE startsWith(query, '{statement}') AND position(query, '{database}') > 0"
        f" AND position(query, '{naming}') > 0",
    )
    return int(rows[0][0])


def loader_process(cluster: Any) -> str:
    """The member process the internal route loads through: the replica with the lowest opaque member id."""
    return min(cluster.members, key=lambda member: member_id(member.shard_num, member.replica_num)).name


def follower_process(cluster: Any) -> str:
    """A member process the load does not go through (it receives the rows by replication only)."""
    loader = loader_process(cluster)
    return next(member.name for member in cluster.members if member.name != loader)
