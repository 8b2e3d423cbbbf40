"""Races of the per-part digest on the real engine (embedded cluster): a merge that lands between the parts listing
and the read of the unknown parts is seen (the read names a part the listing did not, or the listing after differs),
and the observation is retried, at worst read whole; the digest is always exactly the whole table's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.cluster.clickhouse import part_content
from airflow_provider_dpone.cluster.clickhouse.member_session import ClickHouseMemberSession
from airflow_provider_dpone.cluster.ports import TableRead
from tests.cluster.test_part_digests import Table, facts
from tests.support.cluster.port_backends import EmbeddedBackend, open_backend

pytestmark = [pytest.mark.adapter, pytest.mark.embedded_cluster(members=2)]


@pytest.fixture
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    backend = open_backend("embedded", request, tmp_path)
    assert isinstance(backend, EmbeddedBackend)
    try:
        yield Table(backend)
    finally:
        backend.close()


def racing_reads(table: Table, races: int, *, merge: bool) -> tuple[ClickHouseMemberSession, list[str]]:
    """A session whose next ``races`` per-part content reads each run right after a fresh INSERT and, with
    ``merge``, a forced merge of every part (both land between the listing before and the read)."""
    session = table.backend.ports.sessions.session(table.backend.inventory.member(table.member_id))
    assert isinstance(session, ClickHouseMemberSession)
    metadata, content = session._rows, session._content_rows
    seen: list[str] = []

    def rows(statement: str, what: str) -> list[Any]:
        seen.append(what)
        return metadata(statement, what)

    def content_rows(statement: str, what: str) -> list[Any]:
        seen.append(what)
        if what == "content read" and seen.count("content read") <= races:
            table.load()
            if merge:
                table.backend.merge(table.member_id, "cand")
        return content(statement, what)

    session._rows = rows  # type: ignore[method-assign]
    session._content_rows = content_rows  # type: ignore[method-assign]
    return session, seen


def observe(session: ClickHouseMemberSession, table: Table, known: Any) -> Any:
    return session.observe_table(TableRead(table.backend.database, "cand", with_content=True, known_parts=known))


def test_an_insert_during_the_partial_read_is_retried_with_the_known_parts(table: Table) -> None:
    table.load(3)
    verified = table.observe()
    table.load()  # one unknown part: the next observation reads it alone
    session, seen = racing_reads(table, 1, merge=False)
    observed = observe(session, table, facts(verified))
    assert seen == ["metadata read", "content read", "parts listing", "content read", "parts listing"]
    assert observed.parts_read == 2 and len(facts(observed)) == 5  # the retry read the two new parts only
    assert observed.content_digest == table.expected() == table.observe().content_digest


def test_a_merge_during_the_partial_read_ends_in_a_whole_read(table: Table) -> None:
    table.load(3)
    verified = table.observe()
    table.load()
    session, seen = racing_reads(table, 1, merge=True)
    observed = observe(session, table, facts(verified))
    assert seen == ["metadata read", "content read", "parts listing", "content read"]  # nothing known is left
    assert observed.parts_read == 1 and len(facts(observed)) == 1
    assert observed.content_digest == table.expected() == table.observe().content_digest


def test_races_on_every_attempt_end_in_one_whole_read(table: Table) -> None:
    table.load(3)
    verified = table.observe()
    table.load()
    session, seen = racing_reads(table, part_content.ATTEMPTS, merge=False)
    observed = observe(session, table, facts(verified))
    assert seen.count("parts listing") == part_content.ATTEMPTS
    assert seen.count("content read") == part_content.ATTEMPTS + 1  # the last one whole
    assert observed.parts_read == len(facts(observed)) == 3 + 1 + part_content.ATTEMPTS
    assert observed.content_digest == table.expected() == table.observe().content_digest
