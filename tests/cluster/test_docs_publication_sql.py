"""docs/publication-sql.md cannot drift: every statement it quotes exactly is rendered here by the builder that
sends it, and every statement on the page is marked with the replication mode that sends it."""

from __future__ import annotations

import re
from typing import Final

import pytest

from airflow_provider_dpone.cluster import ports
from airflow_provider_dpone.cluster.clickhouse import (
    sql_acceptance,
    sql_catalog,
    sql_cluster_ddl,
    sql_digest,
    sql_member,
)
from airflow_provider_dpone.cluster.protocol.ddl_step import dispatch_comment
from airflow_provider_dpone.cluster.values.authority.row import AUTHORITY_TABLE
from airflow_provider_dpone.cluster.values.quality_read import TargetReadPlan
from airflow_provider_dpone.cluster.values.replication import EXTERNAL, INTERNAL, ReplicationVariant
from tests.support.manifest_samples import REPO

pytestmark = pytest.mark.unit

PAGE = REPO / "docs" / "publication-sql.md"
MODES: Final = ("both", "internal", "external")
MARKER = re.compile(r"^-- \[(both|internal|external)\]")

# the page's example values
DB, CLUSTER, TARGET, CANDIDATE = "db", "c", "t", "cand"
UUID = "00000000-0000-4000-8000-000000000001"
TOKEN = "0123456789abcdef" * 2
OPERATION = "0123456789abcdef" * 4  # the comment carries its first 16 hex digits
SPEC = ports.TableSpec(
    columns=(
        ports.ColumnSpec(name="id", type="UInt64"),
        ports.ColumnSpec(name="amount", type="Nullable(Decimal(18,4))"),
        ports.ColumnSpec(name="at", type="DateTime64(3,'UTC')"),
    ),
    engine="ReplicatedMergeTree",
    order_by=("id",),
)
ONE_COLUMN = (("id", "UInt64"),)


def dispatched(mode: ReplicationVariant, epoch: int, intent: ports.DdlIntent) -> str:
    """The ON CLUSTER statement of one permit as ``ddl_step`` dispatches it (its ``log_comment``, the default task
    timeout)."""
    comment = dispatch_comment(mode.log_label, OPERATION, epoch, TOKEN)
    settings = ports.DispatchSettings(correlation_token=TOKEN, query_digest="e" * 64, log_comment=comment)
    return sql_cluster_ddl.render(intent, settings)


EXCHANGE = ports.ExchangeTables(cluster=CLUSTER, database=DB, left=TARGET, right=CANDIDATE)
RENAME = ports.RenameTable(cluster=CLUSTER, database=DB, source=CANDIDATE, target=TARGET)
DROP = ports.DropTable(cluster=CLUSTER, database=DB, table=CANDIDATE)
ACCEPTANCE = TargetReadPlan(
    database=DB,
    table=TARGET,
    generation_uuid=UUID,
    scan="m" + "0" * 16,
    metrics=("row_count", "null_count", "distinct_count"),
    columns=("id",),
    digest_version=2,
    schema_columns=ONE_COLUMN,
)

QUOTED: Final[tuple[tuple[str, str], ...]] = (
    # runtime admission
    ("both", sql_catalog.inventory(CLUSTER)),
    ("both", sql_catalog.admission_facts(CLUSTER, DB, AUTHORITY_TABLE)),
    # pinning a permit, reconciling it: both modes
    ("both", sql_cluster_ddl.SERVER_IDENTITY),
    ("both", sql_cluster_ddl.queue_entry(CLUSTER, TOKEN)),
    ("both", sql_member.uuid_snapshot(DB, (TARGET, CANDIDATE))),
    # member staging and its digests
    ("both", sql_member.uuid_probe(DB, CANDIDATE)),
    ("both", sql_member.observe_metadata(DB, CANDIDATE, with_parts=True)),
    ("both", sql_digest.part_content(DB, CANDIDATE, ONE_COLUMN, 2)),
    ("both", sql_digest.listed_parts(DB, CANDIDATE)),
    ("both", sql_member.drop_table(DB, CANDIDATE, UUID)),
    ("external", sql_member.create_table(DB, CANDIDATE, UUID, SPEC.model_copy(update={"engine": "MergeTree"}))),
    ("external", sql_member.load_statement(DB, CANDIDATE, ("id", "amount", "at"))),
    # replicated staging
    (
        "internal",
        dispatched(
            INTERNAL,
            1,
            ports.CreateReplicatedTable(cluster=CLUSTER, database=DB, table=CANDIDATE, uuid=UUID, spec=SPEC),
        ),
    ),
    ("internal", sql_member.load_statement(DB, CANDIDATE, ("id", "amount", "at"))),
    ("internal", sql_member.replica_status(DB, CANDIDATE)),
    ("internal", sql_member.sync_replica(DB, CANDIDATE)),
    ("internal", dispatched(INTERNAL, 2, DROP)),
    # publication and cleanup, per mode (the log_comment names the mode)
    ("external", dispatched(EXTERNAL, 1, EXCHANGE)),
    ("external", dispatched(EXTERNAL, 1, RENAME)),
    ("external", dispatched(EXTERNAL, 2, DROP)),
    ("internal", dispatched(INTERNAL, 2, EXCHANGE)),
    ("internal", dispatched(INTERNAL, 2, RENAME)),
    ("internal", dispatched(INTERNAL, 3, DROP)),
    # quality replay's reads
    ("internal", sql_member.observe_metadata(DB, TARGET, with_parts=True)),
    ("internal", sql_member.replica_status(DB, TARGET)),
    ("internal", sql_acceptance.target_counts(ACCEPTANCE)),
)


def _normal(text: str) -> str:
    return " ".join(text.split())


def marked_statements(page: str) -> list[tuple[str, str]]:
    """Every statement of the page's ``sql`` blocks with its mode: a ``-- [mode]`` line opens a statement, which runs
    until the next marker or blank line; comment lines and trailing `` -- `` comments are not part of it. A line of
    SQL outside a marked statement is an error."""
    statements: list[tuple[str, str]] = []
    for block in re.findall(r"```sql\n(.*?)```", page, re.DOTALL):
        mode: str | None = None
        lines: list[str] = []
        for raw in [*block.splitlines(), ""]:
            line = raw.strip()
            marker = MARKER.match(line)
            if marker or not line:
                if mode is not None and lines:
                    statements.append((mode, _normal(" ".join(lines))))
                mode, lines = (marker.group(1), []) if marker else (None, [])
                continue
            if line.startswith("--"):
                continue
            assert mode is not None, f"statement without a mode marker (-- [both|internal|external]): {line}"
            lines.append(re.split(r"\s--\s", line, maxsplit=1)[0])
    return statements


def test_every_statement_on_the_page_is_marked_with_its_mode() -> None:
    statements = marked_statements(PAGE.read_text(encoding="utf-8"))
    assert {mode for mode, _ in statements} == set(MODES)


@pytest.mark.parametrize(("mode", "statement"), QUOTED, ids=lambda value: value[:48])
def test_the_page_quotes_the_statement_the_builder_renders(mode: str, statement: str) -> None:
    statements = marked_statements(PAGE.read_text(encoding="utf-8"))
    assert (mode, _normal(statement)) in statements, f"docs/publication-sql.md lacks, marked [{mode}]:\n{statement}"


def test_the_page_is_titled_for_both_modes() -> None:
    title = PAGE.read_text(encoding="utf-8").splitlines()[0]
    assert title.startswith("# ") and "external" not in title.lower()
