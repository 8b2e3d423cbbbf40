"""A process's replication worker: pulls its replicas' logs into their queues and executes the entries in order.

Executing an entry inserts the spooled bytes of the block into the local table, with the block's local
deduplication token, so an entry executed again after a crash (the insert took effect, the pointer did not move)
inserts nothing twice. An entry this replica wrote itself needs no work. The fault controls act here: a paused or
stalled replica keeps pulling (its queue grows, as ``system.replicas`` shows) but executes nothing; a lagging one
executes an entry only once it is ``seconds`` old. As a replica fetches a part from another replica that has it, an
entry is executed only while a running process holds its block (its writer, or a replica that executed it). On start the worker first finishes or releases the claims its
process left when it died: a block inserted locally but not yet logged is logged, one never inserted is dropped.
"""

from __future__ import annotations

import threading
import time
import traceback

from dpone_embedded.engine import EngineError
from dpone_embedded.faults import LAG_REPLICATION, PAUSE_REPLICATION, STALL_REPLICATION
from dpone_embedded.replica_views import STALE_SECONDS
from dpone_embedded.replicas import POLL_SECONDS, Replication
from dpone_embedded.replication import Replica

RETRY_SECONDS = 0.5
"""Pause before a replica retries an entry whose execution failed."""
IDLE_SECONDS = 1.0
"""Longest sleep of a worker whose replicas have nothing queued: the bell (a log entry, a replica, a fault written)
wakes it at once; this bound is only a safety net. A worker with entries it cannot execute yet (paused, lagging,
retrying, waiting for a holder) looks again every ``POLL_SECONDS``."""


class ReplicationWorker(threading.Thread):
    def __init__(self, replication: Replication) -> None:
        super().__init__(name=f"replication-{replication.spec.name}", daemon=True)
        self._replication = replication
        self._member = replication.spec.name
        self._halt = threading.Event()
        self._retry_at: dict[str, float] = {}

    def stop(self) -> None:
        self._halt.set()
        self._replication.store.bell.interrupt()

    def run(self) -> None:
        bell = self._replication.store.bell
        self._recover()
        while not self._halt.is_set():
            rung = bell.generation()
            try:
                busy, queued = self.step()
            except Exception:  # noqa: BLE001 - a broken step must not end replication; it is logged and retried
                traceback.print_exc()
                busy, queued = False, True
            if not busy:
                bell.wait(rung, POLL_SECONDS if queued else IDLE_SECONDS)

    def step(self) -> tuple[bool, bool]:
        """One round over this process's replicas: whether anything was executed, and whether any replica's queue
        held entries when the round began (when nothing was executed, they are still there)."""
        log = self._replication.log
        found = log.replicas(self._member)
        if not found:
            return False, False
        if any(replica.log_pointer < newest for replica, newest in found):
            log.pull(self._member)
            found = log.replicas(self._member)
        faults = {fault.kind: fault for fault in self._replication.store.faults(self._member)}
        paused = PAUSE_REPLICATION in faults or STALL_REPLICATION in faults
        lag = float(faults[LAG_REPLICATION].seconds or 0.0) if LAG_REPLICATION in faults else 0.0
        busy = False
        for replica, _ in found:
            busy = self._catch_up(replica, paused, lag) or busy
        return busy, any(replica.applied < replica.log_pointer for replica, _ in found)

    def _catch_up(self, replica: Replica, paused: bool, lag: float) -> bool:
        if time.monotonic() < self._retry_at.get(replica.uuid, 0.0):
            return False
        log = self._replication.log
        busy = False
        for idx in range(replica.applied, replica.log_pointer):
            entry = log.entry(replica.path, idx)
            if entry is None:
                break
            if not entry.written_by(replica):  # its own blocks are in its table already
                if paused or time.time() - entry.create_time < lag:
                    break
                if not log.holders(entry) & self._replication.store.live_targets(STALE_SECONDS):
                    break  # no running replica has the part: wait for one (as a fetch would)
                try:
                    self._replication.apply(replica.uuid, entry.block)
                except LookupError:
                    break  # the table is not attached here (being dropped): nothing to insert into
                except EngineError as exc:
                    log.failed(replica, exc.message)
                    self._retry_at[replica.uuid] = time.monotonic() + RETRY_SECONDS
                    print(f"replication {replica.replica_path}: entry {idx} failed: {exc.message}", flush=True)
                    break
            log.advance(replica, idx)
            busy = True
        return busy

    def _recover(self) -> None:
        log = self._replication.log
        for claim in log.orphan_claims(self._member):
            try:
                self._replication.apply(claim.uuid, claim.block)
            except (LookupError, EngineError):
                log.release(claim.block.token)
                continue
            log.commit(claim.block.token)
