"""One in-process ClickHouse engine (chdb) per pytest process, shared by the native-transfer source tests.

chdb runs one engine per OS process and reads its config once, at first start, so this module owns a single
session-scoped engine path and config: the default user may inspect access metadata (``access_management``), and a
row policy guards ``dpone_policy_db.guarded`` so policy identity and filtering are exercised on the real engine. Each
test uses a fresh Atomic database.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import clickhouse_connect
import pytest
from clickhouse_connect.driver.client import Client

from airflow_provider_dpone.transfer.source.session import ClickHouseSnapshotConnector, inprocess_transport

POLICY_DATABASE = "dpone_policy_db"
POLICY_TABLE = "guarded"
POLICY_FILTER = "id % 2 = 0"


@functools.cache
def engine() -> tuple[str, str]:
    """``(path, config file)`` of the process-wide engine."""
    path = tempfile.mkdtemp(prefix="dpone-chdb-")
    atexit.register(shutil.rmtree, path, True)
    config = Path(path) / "config.xml"
    config.write_text(
        f"""<clickhouse>
<users><default><password></password><networks><ip>::/0</ip></networks><profile>default</profile>
<quota>default</quota><access_management>1</access_management>
<databases><{POLICY_DATABASE}><{POLICY_TABLE}><filter>{POLICY_FILTER}</filter></{POLICY_TABLE}></{POLICY_DATABASE}></databases>
</default></users>
<profiles><default></default></profiles><quotas><default></default></quotas>
<user_directories><users_xml><path>{config}</path></users_xml></user_directories>
</clickhouse>"""
    )
    return path, str(config)


def client() -> Client:
    path, config = engine()
    created = clickhouse_connect.get_client(interface="chdb", path=path, chdb_options={"config-file": config})
    if not _CHECKED:
        _check_config_applied(created)
        _CHECKED.append(True)
    return created


_CHECKED: list[bool] = []


def _check_config_applied(created: Client) -> None:
    """The engine reads its config once: fail clearly if another module started it first with another config."""
    try:
        created.query("SELECT count() FROM system.row_policies")
    except Exception as exc:
        raise RuntimeError(
            "the in-process engine was started without this module's config (access_management); start it through "
            "tests/support/transfer/native_chdb.engine() or run these tests in their own process"
        ) from exc


def fresh_database(admin: Client, prefix: str = "t") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin.command(f"CREATE DATABASE {name} ENGINE = Atomic")
    return name


def connector() -> ClickHouseSnapshotConnector:
    """One new engine client per ``connect`` (connections are counted by the connector)."""
    path, _ = engine()
    return ClickHouseSnapshotConnector(client, inprocess_transport(path))


@pytest.fixture(scope="module")
def admin() -> Iterator[Client]:
    """A module's administrative client on the process-wide engine."""
    created = client()
    yield created
    created.close()


@pytest.fixture
def db(admin: Client) -> Iterator[str]:
    """A fresh Atomic database per test, dropped afterwards."""
    name = fresh_database(admin)
    yield name
    admin.command(f"DROP DATABASE {name} SYNC")
