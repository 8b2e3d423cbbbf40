"""The faults a harness can make on the docker-compose cluster's real servers, shared by both routes' end-to-end
tests (``test_dag_real.py``, ``test_internal_route_real.py``): a whole server frozen with ``docker compose pause``
while the publication's EXCHANGE is dispatched. (A worker process killed mid-task is ``workers.py``'s, which runs on
the embedded cluster as well.)"""

from __future__ import annotations

import dataclasses
from typing import Any

from airflow_provider_dpone.cluster.ports import ExchangeTables
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest as Manifest
from airflow_provider_dpone.hooks.clickhouse import hook_environment
from airflow_provider_dpone.hooks.publication import PublicationEnvironment
from tests.support.fixtures import real_cluster
from tests.support.fixtures.real_cluster import RealMember

PAUSED: list[RealMember] = []
"""The member frozen by ``docker compose pause`` while the EXCHANGE is dispatched (unpaused at teardown at the latest)."""
DISPATCHED: list[Any] = []
"""What the real initiator answered to the EXCHANGE sent while a member was frozen (an outcome or an error)."""


def unpause_all() -> None:
    """Never leave a server frozen behind a failed test (a test's teardown calls this)."""
    for member in PAUSED:
        real_cluster.unpause(member)
    PAUSED.clear()


class PausingDdl:
    """The real DDL adapter; the EXCHANGE is sent while the last member is frozen (``docker compose pause``), which is
    unpaused once the initiator has answered. A frozen server answers nothing, so it cannot stay frozen while the
    publish task observes every member after the dispatch (``reconcile_step``): the embedded cluster pauses the DDL
    worker alone and keeps it paused into the trigger (``test_dag_embedded.py``)."""

    def __init__(self, ddl: Any, member: RealMember) -> None:
        self._ddl = ddl
        self._member = member

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ddl, name)

    def dispatch(self, inventory: Any, intent: Any, settings: Any) -> Any:
        if not isinstance(intent, ExchangeTables) or DISPATCHED:
            return self._ddl.dispatch(inventory, intent, settings)
        real_cluster.pause(self._member)
        PAUSED.append(self._member)
        try:
            outcome = self._ddl.dispatch(inventory, intent, settings)
        except Exception as error:
            DISPATCHED.append(error)
            raise
        finally:
            real_cluster.unpause(PAUSED.pop())
        DISPATCHED.append(outcome)
        return outcome


def pausing_environment(
    manifest: Manifest, conn_id: str, *, ddl_task_timeout_seconds: int | None = None
) -> PublicationEnvironment:
    """The hook's environment whose DDL adapter freezes the last server during the first EXCHANGE dispatch."""
    environment = hook_environment(manifest, conn_id, ddl_task_timeout_seconds=ddl_task_timeout_seconds)
    frozen = real_cluster.describe().members[-1]
    ports = dataclasses.replace(environment.ports, ddl=PausingDdl(environment.ports.ddl, frozen))
    return dataclasses.replace(environment, ports=ports)


def assert_one_timed_out_dispatch(members: int) -> None:
    """The initiator answered the one EXCHANGE sent while a server was frozen with that host unfinished (or with an
    error: an unknown answer, resolved by observation)."""
    assert len(DISPATCHED) == 1, DISPATCHED
    answered = DISPATCHED[0]
    if not isinstance(answered, Exception):
        assert answered.timed_out and len(answered.finished) == members - 1, answered
