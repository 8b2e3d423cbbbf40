"""The per-part content contract of ``MemberSession.observe_table``, on the fakes AND the real adapters on the
embedded cluster: the facts of the active parts add up to the content digest, and a digest that reuses known facts
reads only the parts not known and is exactly what a read of every row gives (the artifact's own reference digest,
computed apart from any table, is the judge)."""

from __future__ import annotations

import uuid

import pytest

from airflow_provider_dpone.cluster.ports import TableObservation, TableRead
from airflow_provider_dpone.cluster.values.part_digests import MAX_PART_DIGESTS, PartDigest
from tests.cluster.test_publication_ports import COLUMNS, ROWS, candidate, members, session
from tests.cluster.test_publication_ports import backend as backend  # the same fake and embedded backends
from tests.support.cluster.port_backends import PortBackend

pytestmark = [pytest.mark.contract, pytest.mark.embedded_cluster(members=2)]


class Table:
    """One member's candidate with merges stopped, loaded by distinct INSERTs (one part each)."""

    def __init__(self, backend: PortBackend) -> None:
        self.backend = backend
        self.member_id = members(backend)[0]
        self.uuid = candidate(backend, self.member_id)
        backend.stop_merges(self.member_id, "cand")
        self.receipt = backend.seal(COLUMNS, ROWS)
        self.loads = 0

    def load(self, times: int = 1) -> None:
        member = session(self.backend, self.member_id)
        for _ in range(times):
            artifact = self.backend.ports.artifacts.open(self.receipt)
            token = uuid.uuid4().hex
            member.load(
                self.backend.database, "cand", self.uuid, artifact, query_id=f"dpone-load-{token}", dedup_token=token
            )
            self.loads += 1

    def observe(self, known: tuple[PartDigest, ...] = ()) -> TableObservation:
        member = session(self.backend, self.member_id)
        return member.observe_table(TableRead(self.backend.database, "cand", with_content=True, known_parts=known))

    def expected(self) -> str:
        """The reference digest of the rows the table should hold (sealed from the rows, not read from the table)."""
        return self.backend.seal(COLUMNS, ROWS * self.loads).content_digest


def facts(observed: TableObservation) -> tuple[PartDigest, ...]:
    assert observed.part_digests is not None
    return observed.part_digests


def test_part_facts_add_up_to_the_content_digest(backend: PortBackend) -> None:
    table = Table(backend)
    table.load(3)
    observed = table.observe()
    assert observed.content_digest == table.expected() and observed.row_count == 3 * len(ROWS)
    assert len(facts(observed)) == 3 == observed.parts_read
    assert sum(fact.rows for fact in facts(observed)) == observed.row_count
    assert table.observe(facts(observed)).parts_read == 0  # nothing changed: nothing is read


def test_only_new_parts_are_read_and_the_digest_is_exact(backend: PortBackend) -> None:
    table = Table(backend)
    table.load(2)
    verified = table.observe()
    table.load()
    reused = table.observe(facts(verified))
    assert reused.parts_read == 1 and len(facts(reused)) == 3
    assert reused.content_digest == table.expected() == table.observe().content_digest
    assert reused.part_digests == table.observe().part_digests


def test_a_forced_merge_reads_the_merged_part_only(backend: PortBackend) -> None:
    table = Table(backend)
    table.load(3)
    verified = table.observe()
    backend.merge(table.member_id, "cand")
    merged = table.observe(facts(verified))
    assert merged.parts_read == 1 and len(facts(merged)) == 1
    assert merged.content_digest == verified.content_digest == table.expected()
    table.load()
    after = table.observe(facts(merged))
    assert after.parts_read == 1 and after.content_digest == table.expected()


def test_a_dropped_part_reads_nothing_and_leaves_its_rows_out(backend: PortBackend) -> None:
    table = Table(backend)
    table.load(3)
    verified = table.observe()
    backend.drop_part(table.member_id, "cand", 0)
    table.loads -= 1
    dropped = table.observe(facts(verified))
    assert dropped.parts_read == 0 and len(facts(dropped)) == 2
    assert dropped.content_digest == table.expected() != verified.content_digest


def test_above_the_bound_no_facts_are_given_and_known_ones_still_count(backend: PortBackend) -> None:
    table = Table(backend)
    table.load(MAX_PART_DIGESTS)
    bounded = table.observe()
    assert len(facts(bounded)) == MAX_PART_DIGESTS
    table.load()
    above = table.observe(facts(bounded))
    assert above.part_digests is None and above.parts_read == 1
    assert above.content_digest == table.expected() == table.observe().content_digest
