"""One native transfer on a fresh real engine (chdb) whose only account holds the grants it is given, in its own process.

chdb authenticates every connection as its ``default`` user and reads its users config once per engine start, so
the account is restricted by restarting the engine on the same data directory: the source table is created under a
config with ``access_management``, then the engine starts again with ``default`` holding exactly the given grants
(``<grants><query>``), and the transfer runs through the product's connector into a fake target seeded with an old
table. The engine enforces the grants; nothing here checks them. Prints one JSON line: the outcome, the target's rows
afterwards and the evidence's access record.

Usage: ``python -m tests.support.transfer.native_source_grants GRANT...`` (statements without ``TO``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import clickhouse_connect

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.route.schema_admission import map_type
from airflow_provider_dpone.transfer.values.chunk import RelationRef
from tests.support.transfer import native_chdb
from tests.support.transfer.native_route_chdb import OPERATION, ChdbRoute

DATABASE = "dpone_src"
TABLE = "events"
OLD_ROWS = [(100, 9, "old")]


def users_config(root: Path, name: str, access: str) -> str:
    path = root / f"{name}.xml"
    path.write_text(
        "<clickhouse><users><default><password></password><networks><ip>::/0</ip></networks>"
        f"<profile>default</profile><quota>default</quota>{access}</default></users>"
        "<profiles><default></default></profiles><quotas><default></default></quotas>"
        f"<user_directories><users_xml><path>{path}</path></users_xml></user_directories></clickhouse>"
    )
    return str(path)


def main(grants: list[str]) -> None:
    root = Path(tempfile.mkdtemp(prefix="dpone-grants-"))
    data = str(root / "data")
    admin = clickhouse_connect.get_client(
        interface="chdb",
        path=data,
        chdb_options={"config-file": users_config(root, "admin", "<access_management>1</access_management>")},
    )
    admin.command(f"CREATE DATABASE {DATABASE} ENGINE = Atomic")
    admin.command(
        f"CREATE TABLE {DATABASE}.{TABLE} (id UInt64, ver UInt64, payload String) "
        "ENGINE = ReplacingMergeTree(ver) ORDER BY id"
    )
    admin.command(f"INSERT INTO {DATABASE}.{TABLE} SELECT number, 1, toString(number) FROM numbers(10)")
    described = admin.query(f"DESCRIBE TABLE {DATABASE}.{TABLE}").result_rows
    admin.close()  # the last connection: the engine stops and starts again with the restricted account

    queries = "".join(f"<query>{grant}</query>" for grant in grants)
    restricted = users_config(root, "restricted", f"<grants>{queries}</grants>")
    native_chdb.engine = lambda: (data, restricted)  # type: ignore[method-assign]
    native_chdb._CHECKED.append(True)  # the harness's own access_management probe does not apply here
    route = ChdbRoute(root / "run", RelationRef(database=DATABASE, table=TABLE))
    route.target.seed([map_type(str(row[0]), str(row[1]), implicit_utc=True) for row in described], OLD_ROWS)
    outcome: dict[str, object] = {}
    try:
        result, _ = route.run()
        outcome["rows"] = result.rows
    except DponeError as exc:
        outcome["code"] = exc.code
    probe = native_chdb.client()
    outcome["grants"] = sorted(line for (line,) in probe.query("SHOW GRANTS").result_rows)
    probe.close()
    for client in route.clients:
        client.close()
    outcome["target"] = sorted([list(row) for row in route.target.rows()])
    journal = root / "run" / OPERATION / "journal"
    for entry in sorted(journal.iterdir()) if journal.exists() else []:
        record = json.loads(entry.read_bytes())
        if record["kind"] == "stage_complete":
            profile = record["body"]["completion_metadata"]["source_snapshot_v1"]["profile"]
            outcome["policy_filtered"] = profile["access"]["policy_filtered"]
    print(json.dumps(outcome, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
