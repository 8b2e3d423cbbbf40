"""Fault controls of an embedded cluster, for tests and the CLI.

Armed faults live in the cluster's shared state, so they take effect in whichever process they target, survive a
restart of that process, and can be armed from any process (a test, the CLI). A *target* is a process name
(``"coordinator"``, ``"member1"``...), the provider's id of a member (``m<16 hex>``, as its task logs name it), an
:class:`~dpone_embedded.cluster.Endpoint`, or a member's ``replica_num``. ``match`` is a regular expression searched (case-insensitively) in the statement text -- for an
``INSERT`` the statement without its data; empty matches every statement.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

from dpone_embedded import launcher, member_names
from dpone_embedded.layout import COORDINATOR
from dpone_embedded.store import Store

PAUSE_REPLICATION = "pause_replication"
STALL_REPLICATION = "stall_replication"
LAG_REPLICATION = "lag_replication"
"""Fault kinds the replication worker of the target process reads (``replica_worker.py``)."""
HOLD_DDL = "hold_ddl"
"""Fault kind the initiator of the target process reads: hold matching ON CLUSTER requests unqueued (``ddl.py``)."""


def target_name(target: Any) -> str:
    """Normalize a target to a process name."""
    if isinstance(target, bool):
        raise TypeError("target must be a process name, an Endpoint or a replica number")
    if isinstance(target, int):
        return f"member{target}"
    name = getattr(target, "name", target)
    if not isinstance(name, str):
        raise TypeError("target must be a process name, an Endpoint or a replica number")
    return name


class Faults:
    """Deterministic fault injection; every control is undone by :meth:`reset`."""

    def __init__(self, directory: Path) -> None:
        self._directory = Path(directory)
        self._store = Store(self._directory / "state.sqlite")

    def _known(self, target: Any, *, member_only: bool = False) -> str:
        name = target_name(target)
        names = launcher.read_state(self._directory)["processes"]
        if member_names.MEMBER_ID_PATTERN.match(name):  # the provider's id of a member, as its logs name it
            ids = {
                member_names.member_id(s.shard_num, s.replica_num): n
                for n, s in launcher.specs_of(self._directory).items()
                if n != COORDINATOR
            }
            name = ids.get(name, name)
        if name not in names or (member_only and name == COORDINATOR):
            raise ValueError(f"unknown {'member' if member_only else 'process'}: {name}")
        return name

    def pause(self, member: Any) -> None:
        """The member's DDL worker stops taking queue entries (an unavailable host: its rows stay Inactive)."""
        name = self._known(member, member_only=True)
        if not self._store.has_fault(name, "pause"):
            self._store.arm(name, "pause", count=-1)

    def resume(self, member: Any) -> None:
        self._store.disarm(self._known(member, member_only=True), "pause")

    def fail_next_ddl(self, member: Any, code: int, *, match: str = "", count: int = 1) -> None:
        """The member's next ``count`` queue entries (matching ``match``) finish with exception ``code``, unexecuted."""
        self._store.arm(self._known(member, member_only=True), "fail_ddl", pattern=match, code=code, count=count)

    def fail_next_statement(self, target: Any, code: int, *, match: str = "", count: int = 1) -> None:
        """The next matching statement sent to ``target`` over HTTP fails with ``code`` and has no effect."""
        self._store.arm(self._known(target), "fail_statement", pattern=match, code=code, count=count)

    def lose_response(self, target: Any, *, match: str = "", count: int = 1) -> None:
        """The next matching statement takes full effect, then the connection closes without a response."""
        self._store.arm(self._known(target), "lose_response", pattern=match, count=count)

    def delay_response(self, target: Any, seconds: float, *, match: str = "", count: int = 1) -> None:
        """The next matching statement takes effect, then its response waits ``seconds`` before it is sent."""
        self._store.arm(self._known(target), "delay", pattern=match, seconds=seconds, count=count)

    def hold_ddl(self, target: Any, *, match: str = "") -> None:
        """``target``'s initiator stalls on the next matching ``ON CLUSTER`` request: it keeps it and queues nothing
        (the client times out) until :meth:`release_ddl` (the request is then queued, late) or
        :meth:`emulate_restart` (it dies unqueued). A coordinator stopped by SIGSTOP while holding a request."""
        name = self._known(target)
        self._store.disarm(name, HOLD_DDL)
        self._store.arm(name, HOLD_DDL, pattern=match, count=-1)

    def release_ddl(self, target: Any) -> None:
        """The stalled initiator wakes up: a held request is queued now and runs on every member."""
        self._store.disarm(self._known(target), HOLD_DDL)

    def emulate_restart(self, target: Any, *, new_server_uuid: str | None = None) -> None:
        """An emulated restart of ``target``'s server whose Keeper lives on, as in production (Keeper is a service
        of its own): requests the initiator holds die unqueued and ``uptime()`` starts again from zero now; tables
        and KeeperMap state stay. Emulated because a real restart of an embedded process loses its in-process test
        keeper, and with it the authority (KeeperMap state does not survive an engine restart: Code 668).

        ``new_server_uuid``: the server also lost its data directory, so it answers ``serverUUID()`` with a new UUID
        from now on (a real server keeps its UUID in the ``uuid`` file of its data path and writes a new random one
        when that file is missing: ``ServerUUID::load``, src/Core/ServerUUID.cpp); ``hostName()`` is unchanged."""
        name = self._known(target)
        self._store.server_started(name)  # first: a held request that sees its hold gone must see the restart too
        if new_server_uuid is not None:
            self._store.recreate_server(name, str(uuid.UUID(new_server_uuid)))
        self._store.disarm(name, HOLD_DDL)

    def pause_replication(self, member: Any) -> None:
        """The member's replicas stop executing log entries (they still pull: their queues grow) until resumed."""
        name = self._known(member, member_only=True)
        if not self._store.has_fault(name, PAUSE_REPLICATION):
            self._store.arm(name, PAUSE_REPLICATION, count=-1)

    def resume_replication(self, member: Any) -> None:
        """Undo :meth:`pause_replication` (a stalled replica stays stalled until :meth:`reset`)."""
        self._store.disarm(self._known(member, member_only=True), PAUSE_REPLICATION)

    def stall_replication(self, member: Any) -> None:
        """The member's replicas never converge: paused until :meth:`reset`, whatever resumes them."""
        name = self._known(member, member_only=True)
        if not self._store.has_fault(name, STALL_REPLICATION):
            self._store.arm(name, STALL_REPLICATION, count=-1)

    def lag_replication(self, member: Any, seconds: float) -> None:
        """The member's replicas execute a log entry only once it is ``seconds`` old (a lagging replica)."""
        if seconds < 0:
            raise ValueError("seconds must not be negative")
        name = self._known(member, member_only=True)
        self._store.disarm(name, LAG_REPLICATION)
        self._store.arm(name, LAG_REPLICATION, seconds=seconds, count=-1)

    def kill(self, target: Any) -> None:
        """Crash the process (SIGKILL). Its tables survive on disk; in-process KeeperMap state does not."""
        launcher.kill(self._directory, self._known(target))

    def restart(self, target: Any) -> None:
        """Start the process again on the same ports and data directory; returns once it answers ``/ping``."""
        launcher.restart(self._directory, self._known(target))

    def armed(self) -> list[dict[str, Any]]:
        return [asdict(fault) for fault in self._store.faults()]

    def killed(self) -> list[str]:
        return list(launcher.read_state(self._directory).get("killed", []))

    def reset(self) -> None:
        """Disarm everything, resume every worker and restart every process that is not running (killed or not)."""
        self._store.disarm()
        for name in launcher.stopped(self._directory):
            launcher.restart(self._directory, name)
