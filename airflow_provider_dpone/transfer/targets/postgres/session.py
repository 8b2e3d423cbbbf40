"""The PostgreSQL session settings every transaction of the target runs under: set by the provider, read back.

What the target computes and reads depends on settings a role, a database or a pooler can change
(``ALTER ROLE ... SET``, ``ALTER DATABASE ... SET``, ``PGOPTIONS``):

* the commit row's ``timestamptz`` is parsed by psycopg, which reads the ISO ``DateStyle`` only (under
  ``SQL, DMY`` it raises ``NotImplementedError``); ``IntervalStyle`` and ``TimeZone`` are the other renderings of
  temporal values;
* the digest's SQL spells its byte constants as ``'\\x..'::bytea``, which means those bytes only with
  ``standard_conforming_strings`` on, and calls unqualified functions and operators (``sha256``, ``convert_to``,
  ``||``, the advisory-lock functions), which a ``search_path`` naming another schema first can shadow;
* text travels through the bulk COPY and the read-back in the client encoding, and is compared as UTF-8;
* ``bytea_output`` and ``extra_float_digits`` change how bytes and floating-point values are rendered as text;
* the publication lock and the receipt are read in READ COMMITTED: under REPEATABLE READ or SERIALIZABLE a
  transaction's snapshot is taken by its first statement, before it waits for the lock, so it could read "no
  receipt" while a publication that committed during the wait holds one;
* a COMMIT the server acknowledged must survive a server crash, or the route records a publication (and a chunk's
  load) that the restarted server no longer holds: ``synchronous_commit`` ``off`` acknowledges before the commit
  is flushed. It is raised to ``local`` when off and kept otherwise (``remote_apply`` and the other levels wait for
  at least as much; setting ``on`` would weaken a stronger level the server asks for).

So every transaction of the adapter (each port call's psycopg transaction, each chunk's bulk-load transaction)
starts by setting each of :data:`SETTINGS` for itself (``set_config(..., true)``, schema-qualified so no
``search_path`` can shadow it) and its isolation level, then reads every one back (``current_setting``, a separate
statement) and refuses to go on (``native_transfer.target_session_unsupported``, naming what differs) unless each
is what was set.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from airflow_provider_dpone.core.errors import DponeError

SETTINGS: Final[tuple[tuple[str, str], ...]] = (
    ("DateStyle", "ISO, MDY"),
    ("IntervalStyle", "postgres"),
    ("TimeZone", "UTC"),
    ("extra_float_digits", "3"),
    ("client_encoding", "UTF8"),
    ("search_path", "pg_catalog, pg_temp"),
    ("bytea_output", "hex"),
    ("standard_conforming_strings", "on"),
)
"""Each setting as ``SET`` names it, and the value the provider sets (``SHOW`` reports it in the same spelling)."""
DURABLE_COMMITS: Final[frozenset[str]] = frozenset({"local", "on", "remote_write", "remote_apply"})
"""``synchronous_commit`` levels that flush the commit locally before acknowledging it."""
ISOLATION: Final[str] = "read committed"
SET_ISOLATION: Final[str] = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"
"""The transaction's first statement: a ``SET`` takes no snapshot, so the level can still be chosen."""
PIN: Final[str] = (
    "SELECT "
    + ", ".join(f"pg_catalog.set_config('{name}', '{value}', true)" for name, value in SETTINGS)
    + ", pg_catalog.set_config('synchronous_commit', CASE pg_catalog.current_setting('synchronous_commit') "
    "WHEN 'off' THEN 'local' ELSE pg_catalog.current_setting('synchronous_commit') END, true)"
)
READ_BACK: Final[str] = (
    "SELECT "
    + ", ".join(f"pg_catalog.current_setting('{name}')" for name, _ in SETTINGS)
    + ", pg_catalog.current_setting('transaction_isolation'), pg_catalog.current_setting('synchronous_commit')"
)


def check(found: Sequence[Any] | None) -> None:
    """The answer of :data:`READ_BACK`: every setting as set, or ``native_transfer.target_session_unsupported``
    naming each one that differs."""
    expected = [*SETTINGS, ("transaction_isolation", ISOLATION)]
    if found is None or len(found) != len(expected) + 1:
        raise DponeError("native_transfer.target_session_unsupported", "PostgreSQL settings could not be read back")
    differ = [
        f"{name} {value!r} (set {wanted!r})"
        for (name, wanted), value in zip(expected, found[:-1], strict=True)
        if value != wanted
    ]
    if found[-1] not in DURABLE_COMMITS:
        differ.append(f"synchronous_commit {found[-1]!r} (set 'local' or stronger)")
    if differ:
        raise DponeError("native_transfer.target_session_unsupported", "PostgreSQL: " + ", ".join(differ))
