"""Least privilege of the native transfer's source account, enforced by the real engine (seed 003, SE4).

The grants come from the route guide's block (``docs/clickhouse-to-mssql.md``), the one list users read: the transfer
runs with an account holding exactly those grants, and with one of them taken away it ends in a stable code with the
old target intact. Each run is its own process (``native_source_grants.py``): chdb reads its users config once per
engine start and authenticates every connection as ``default``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster.documented_grants import documented_grants
from tests.support.transfer.native_source_grants import DATABASE, OLD_ROWS, TABLE

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

MARKER = "-- dpone: native transfer source grants"
RELATION_SELECT = f"GRANT SELECT ON {DATABASE}.{TABLE}"
ROW_POLICIES = "GRANT SHOW ROW POLICIES ON *.*"


def source_grants() -> list[str]:
    return documented_grants("clickhouse-to-mssql.md", MARKER, database=DATABASE, table=TABLE)


def transfer(grants: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.transfer.native_source_grants", *grants],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return outcome


def as_users_xml_grant(line: str) -> str:
    """``SHOW GRANTS``'s line back to the grant it shows (``... TO default``)."""
    return line.removesuffix(" TO default")


def test_the_documented_grants_suffice_and_are_all_the_account_holds() -> None:
    grants = source_grants()
    assert RELATION_SELECT in grants and ROW_POLICIES in grants
    outcome = transfer(grants)
    held = {as_users_xml_grant(str(line)) for line in outcome["grants"]}  # type: ignore[attr-defined]
    assert held == set(grants), "the engine's account holds exactly the documented grants"
    assert "code" not in outcome, outcome
    assert outcome["rows"] == 10
    published = outcome["target"]
    assert [row[0] for row in published] == list(range(10))  # type: ignore[index,union-attr]
    assert outcome["policy_filtered"] is False, "no row policy on the relation"


@pytest.mark.parametrize(
    ("missing", "replacement", "code"),
    [
        (RELATION_SELECT, None, "native_transfer.source_access_denied"),
        (RELATION_SELECT, f"GRANT SELECT(id, ver) ON {DATABASE}.{TABLE}", "native_transfer.source_access_denied"),
        (ROW_POLICIES, None, "native_transfer.source_read_profile_unsupported"),
    ],
    ids=["no-select", "select-without-one-column", "no-show-row-policies"],
)
def test_a_missing_grant_ends_in_its_code_with_the_old_target_intact(
    missing: str, replacement: str | None, code: str
) -> None:
    grants = [grant for grant in source_grants() if grant != missing]
    assert len(grants) == len(source_grants()) - 1
    outcome = transfer(grants + ([replacement] if replacement else []))
    assert outcome.get("code") == code, outcome
    assert outcome["target"] == [list(row) for row in OLD_ROWS], "the old target is untouched"
