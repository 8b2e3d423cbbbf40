"""The fence's proof that every member can ``EXCHANGE`` tables, before anything is fenced or staged.

The publication (an ``EXCHANGE TABLES ... ON CLUSTER`` when the target exists) swaps two tables' metadata files on
each member with ``renameat2(..., RENAME_EXCHANGE)``: ``DatabaseAtomic::renameTable`` (src/Databases/
DatabaseAtomic.cpp) refuses with Code 48 ``NOT_IMPLEMENTED`` on a kernel without it, and ``renameExchange``
(src/Common/renameat2.cpp) with Code 1 ``UNSUPPORTED_METHOD`` when the filesystem of the metadata directory does not
support the flag (``EINVAL``; some network and overlay filesystems, Docker on macOS). Found only at publication, the
statement has already run on the other members: a mixed publication. So the fence proves it first, on each member
and in the operation's own database (the directory the publication will rename in):

1. observe the two scratch names of this operation (``__dpone_xprobe_<operation prefix>_a`` / ``_b``); whatever an
   earlier attempt of the same operation left there is dropped by its observed UUID (the names belong to this
   operation: nothing else creates them), and then the names must be observed free (names observed free at once need
   no drop and no second look);
2. create both (one column, ``MergeTree``, fresh random UUIDs), ``EXCHANGE`` them on that member alone, and observe
   that their UUIDs swapped;
3. drop both by the exact UUIDs that observation showed, and observe that the names are free.

A refusal for an unsupported exchange stops the fence with ``EXCHANGE_UNSUPPORTED`` (terminal: the member's
filesystem must change) after dropping the scratch tables. Every mutation is sent once; a lost answer is resolved by
the observation that follows, and anything left undecided stops the attempt with the retryable
``MEMBER_OUTCOME_UNKNOWN``: the next attempt starts with step 1. The probe runs only when the fence writes a new
record (a retry of an already fenced operation resumes without it), so a run pays it once: eleven requests per
member (four observations, two creates, the exchange, two drops each after its UUID guard), members in parallel.
"""

from __future__ import annotations

from functools import partial
from typing import Final

from airflow_provider_dpone.cluster.ports import ColumnSpec, MemberSession, TableSpec
from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.member_mutation import mutate_once
from airflow_provider_dpone.core.errors import (
    DponeError,
    ExchangeUnsupportedError,
    MutationRejectedError,
    OutcomeUnknownError,
    UnavailableError,
)

EXCHANGE_UNSUPPORTED: Final[str] = "DPONE_CLICKHOUSE_CLUSTER_EXCHANGE_UNSUPPORTED"
UNKNOWN: Final[str] = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_OUTCOME_UNKNOWN"
REJECTED: Final[str] = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_MUTATION_REJECTED"
UNAVAILABLE: Final[str] = "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_INCOMPLETE"
SCRATCH_SPEC: Final[TableSpec] = TableSpec(columns=(ColumnSpec(name="probe", type="UInt8"),), engine="MergeTree")
SCRATCH_INFIX: Final[str] = "__dpone_xprobe_"


def scratch_names(operation_id: str) -> tuple[str, str]:
    """The operation's two scratch table names (a retry of the same operation finds its own)."""
    prefix = f"{SCRATCH_INFIX}{operation_id[:16]}"
    return f"{prefix}_a", f"{prefix}_b"


def prove_exchange(ctx: Context) -> None:
    """Prove on every member that ``EXCHANGE TABLES`` works in the operation's database, leaving nothing behind."""
    entropy = ctx.ports.entropy
    uuids = {member_id: (entropy.uuid(), entropy.uuid()) for member_id in ctx.inventory.member_ids}  # drawn in order
    ctx.each_member(lambda member_id: _prove(ctx, member_id, uuids[member_id]), ctx.inventory.member_ids)


def _prove(ctx: Context, member_id: str, uuids: tuple[str, str]) -> None:
    session = ctx.session(member_id)
    database = ctx.request.database
    names = scratch_names(ctx.request.operation_id)
    label = ctx.label(member_id)
    _clear(session, database, names, label)
    for name, uuid in zip(names, uuids, strict=True):
        mutate_once(label, "exchange probe create", partial(session.create_table, database, name, uuid, SCRATCH_SPEC))
    if _observe(session, database, names, label) != uuids:
        raise DponeError(UNKNOWN, f"member {label}: the exchange probe's scratch tables did not settle")
    try:
        session.exchange_tables(database, *names)
    except ExchangeUnsupportedError:
        _clear(session, database, names, label)
        raise DponeError(EXCHANGE_UNSUPPORTED, f"member {label}: EXCHANGE TABLES is not supported there") from None
    except MutationRejectedError:
        raise DponeError(REJECTED, f"exchange probe on member {label}") from None
    except OutcomeUnknownError:
        pass  # observed next
    swapped = _observe(session, database, names, label)
    if swapped != (uuids[1], uuids[0]):
        raise DponeError(UNKNOWN, f"member {label}: the exchange probe's outcome is not proven")
    _clear(session, database, names, label, seen=swapped)


def _clear(
    session: MemberSession,
    database: str,
    names: tuple[str, str],
    label: str,
    *,
    seen: tuple[str | None, ...] | None = None,
) -> None:
    """Drop whatever the scratch names hold on the member named ``label``, each by its observed UUID (``seen``:
    observed just before, with no mutation since); then require both names free. Names observed free need no drop
    and no second look."""
    observed = _observe(session, database, names, label) if seen is None else seen
    if observed == (None, None):
        return
    for name, uuid in zip(names, observed, strict=True):
        if uuid is not None:
            mutate_once(label, "exchange probe drop", partial(session.drop_table, database, name, uuid))
    if _observe(session, database, names, label) != (None, None):
        raise DponeError(UNKNOWN, f"member {label}: the exchange probe's scratch tables were not dropped")


def _observe(session: MemberSession, database: str, names: tuple[str, str], label: str) -> tuple[str | None, ...]:
    try:
        return session.table_uuids(database, names)
    except UnavailableError:
        raise DponeError(UNAVAILABLE, f"member {label}: the exchange probe could not observe") from None
