"""Phases of one publication operation (both replication modes) and the transitions the protocol may write.

The table and its two content rules (:data:`LOOP_FIELDS`, :func:`require_write`) are the single source of allowed
writes: the authority write helper refuses any write whose phase change is not listed, so a protocol defect cannot
skip a barrier (for example jump from STAGING to PUBLICATION_DISPATCHING). ``None`` stands for "no record yet".

The edges are the publication state diagram (docs/runbook.md, generated from this table), plus the edges an operator abort requires: an
operation may be ABORTED before publication only, after exact owned candidate cleanup. From LOCKED (nothing owned
exists yet) that is one write; from STAGING and STAGED the abort first writes ABORTING, the fence a concurrent stage or
publish write at the same version must lose (no permit can be taken from ABORTING), then drops, then writes ABORTED. Self-loops record progress inside a phase (member stage records, bound queue entries, epochs, and
in COMMITTED the at most two completion writes of a durable quality-replay capsule). The two :data:`VOID_EDGES` go
back one phase, only by the explicit void of a permit whose request is proven dead (``cluster/protocol/void_permit.py``).
A publication that stopped after its swap (its check after the DDL failed) ends RELEASED, only by the operator's
recorded release (``cluster/protocol/release.py``): terminal, never success, and it lets a new operation take the slot.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Final

from airflow_provider_dpone.core.errors import DponeError


class Phase(StrEnum):
    LOCKED = "LOCKED"
    STAGING = "STAGING"
    STAGED = "STAGED"
    PUBLICATION_DISPATCHING = "PUBLICATION_DISPATCHING"
    COMMITTED = "COMMITTED"
    CLEANUP_DISPATCHING = "CLEANUP_DISPATCHING"
    COMPLETED = "COMPLETED"
    ABORTING = "ABORTING"
    ABORTED = "ABORTED"
    RELEASED = "RELEASED"


TERMINAL_PHASES: Final[frozenset[Phase]] = frozenset({Phase.COMPLETED, Phase.ABORTED, Phase.RELEASED})
"""A terminal record is resolved: a new operation may take the slot by a versioned CAS."""

PRE_PUBLICATION_PHASES: Final[frozenset[Phase]] = frozenset({Phase.LOCKED, Phase.STAGING, Phase.STAGED})
"""Phases in which no publication DDL can have been dispatched: the only phases an abort may start from."""

ALLOWED_TRANSITIONS: Final[Mapping[Phase | None, frozenset[Phase]]] = {
    None: frozenset({Phase.LOCKED}),
    Phase.LOCKED: frozenset({Phase.STAGING, Phase.ABORTED}),
    Phase.STAGING: frozenset({Phase.STAGING, Phase.STAGED, Phase.ABORTING}),
    Phase.STAGED: frozenset({Phase.PUBLICATION_DISPATCHING, Phase.ABORTING}),
    Phase.ABORTING: frozenset({Phase.ABORTED}),
    Phase.PUBLICATION_DISPATCHING: frozenset(
        {Phase.PUBLICATION_DISPATCHING, Phase.COMMITTED, Phase.STAGED, Phase.RELEASED}
    ),
    Phase.COMMITTED: frozenset({Phase.COMMITTED, Phase.CLEANUP_DISPATCHING}),
    Phase.CLEANUP_DISPATCHING: frozenset({Phase.CLEANUP_DISPATCHING, Phase.COMPLETED, Phase.COMMITTED}),
    Phase.COMPLETED: frozenset({Phase.LOCKED, Phase.COMPLETED}),
    Phase.ABORTED: frozenset({Phase.LOCKED}),
    Phase.RELEASED: frozenset({Phase.LOCKED}),
}


VOID_EDGES: Final[frozenset[tuple[Phase, Phase]]] = frozenset(
    {(Phase.PUBLICATION_DISPATCHING, Phase.STAGED), (Phase.CLEANUP_DISPATCHING, Phase.COMMITTED)}
)
"""The two backward edges: an explicitly voided permit (with its recorded proof) returns the operation to the phase
its step is dispatched from. The write helper takes them only with one more voided permit in the record."""


LOOP_FIELDS: Final[Mapping[Phase, frozenset[str]]] = {
    Phase.COMMITTED: frozenset({"quality"}),
    Phase.COMPLETED: frozenset({"reader"}),
}
"""What a self-loop in a final phase may change, and nothing else: COMMITTED only the quality-replay capsule's
completion, COMPLETED only the reader fence (any other write there would change evidence that is final)."""


def require_write(old: Phase, new: Phase, changed: frozenset[str], voided_added: int) -> None:
    """Raise ``AUTHORITY_TRANSITION_INVALID`` for a write the table allows by phase but not by content: a self-loop
    of a final phase that changes more (or other) than :data:`LOOP_FIELDS` names, or a :data:`VOID_EDGES` step that
    does not add exactly one voided permit."""
    loop_only = LOOP_FIELDS.get(old)
    if loop_only is not None and new is old and changed != loop_only:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID", f"{old} -> {new}")
    if (old, new) in VOID_EDGES and voided_added != 1:
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID", f"{old} back")


def is_allowed(old: Phase | None, new: Phase) -> bool:
    return new in ALLOWED_TRANSITIONS[old]


def require_transition(old: Phase | None, new: Phase) -> None:
    """Raise ``AUTHORITY_TRANSITION_INVALID`` unless ``old -> new`` is in :data:`ALLOWED_TRANSITIONS`."""
    if not is_allowed(old, new):
        raise DponeError("DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_TRANSITION_INVALID", f"{old} -> {new}")


class MemberStage(StrEnum):
    """Per-member staging state inside the external record.

    PENDING: nothing intended yet. INTENDED: a candidate UUID intent is persisted (CREATE may or may not have run).
    CREATED: the candidate with that exact UUID was observed empty and bound; the single load may have been sent, so an
    inexact candidate in this stage is rebuilt, never appended to. READY: exact content observed and recorded.
    """

    PENDING = "PENDING"
    INTENDED = "INTENDED"
    CREATED = "CREATED"
    READY = "READY"
