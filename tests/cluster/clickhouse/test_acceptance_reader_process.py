"""The real bounded reader's process and frame handling, without a server: what reaches the worker (argv,
environment, stdin), and that a hung, crashed, chattering or lying worker is never an answer.

A stand-in "interpreter" (a small shell script given as ``python``) plays the worker, so every case runs a real
child process through the reader's own spawn, wait and kill code.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_dpone.cluster.clickhouse import acceptance_reader
from airflow_provider_dpone.cluster.clickhouse.acceptance_reader import (
    SubprocessAcceptanceReader,
    parse_answer,
    worker_environment,
)
from airflow_provider_dpone.cluster.ports import ReadIncompleteError
from airflow_provider_dpone.cluster.values.inventory import AdmittedMember
from airflow_provider_dpone.cluster.values.quality_read import ReplicaRead, TargetReadPlan
from airflow_provider_dpone.core.clickhouse.connection import ResolvedConnection
from airflow_provider_dpone.core.errors import UnavailableError

pytestmark = pytest.mark.adapter

SECRET = "pw-Reader-Private-91c"
MEMBER = "m" + "0" * 16
PLAN = TargetReadPlan(
    database="analytics",
    table="target_table",
    generation_uuid="00000000-0000-4000-8000-000000000001",
    guard=(ReplicaRead(member_id=MEMBER),),
    scan=MEMBER,
    metrics=("row_count", "null_count"),
    columns=("id",),
    digest_version=2,
    schema_columns=(("id", "UInt64"),),
)
COUNTS = {
    "generation_uuid": PLAN.generation_uuid,
    "row_count": 3,
    "content_digest": "c" * 64,
    "columns": [{"name": "id", "null_count": 0, "distinct_count": None}],
}
FACT = {
    "member_id": MEMBER,
    "exists": True,
    "uuid": PLAN.generation_uuid,
    "columns": [["id", "UInt64"]],
    "parts_digest": "a" * 64,
    "content_digest": None,
    "zookeeper_path": "/clickhouse/tables/x/1",
    "readonly": False,
}


def observed(**changes: Any) -> dict[str, Any]:
    return {"before": [FACT], "counts": COUNTS, "after": [FACT], **changes}


def connection(_member: AdmittedMember) -> ResolvedConnection:
    return ResolvedConnection(host="127.0.0.1", port=1, username="reader", password=SECRET)


def member() -> AdmittedMember:
    return AdmittedMember.model_validate(
        {"member_id": MEMBER, "shard_num": 1, "replica_num": 1, "endpoint": {"host": "h", "port": 9000}}
    )


def stand_in(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def frame(nonce: str, **fields: Any) -> bytes:
    return json.dumps({"nonce": nonce, **fields}).encode()


def test_an_exact_answer_frame_is_the_observation() -> None:
    observation = parse_answer(frame("n1", observation=observed()), "n1", PLAN)
    assert observation.counts is not None and observation.counts.row_count == 3
    assert observation.counts.columns[0].null_count == 0 and observation.before[0].readonly is False


@pytest.mark.parametrize(
    "raw",
    [
        frame("n1", observation=observed(counts={**COUNTS, "row_count": True})),  # a boolean is not a count
        frame("n1", observation=observed(counts={**COUNTS, "row_count": -1})),
        frame("n1", observation=observed(counts={**COUNTS, "row_count": "3"})),
        frame("n1", observation=observed(counts={**COUNTS, "columns": []})),  # a missing alias / column
        frame(
            "n1",
            observation=observed(counts={**COUNTS, "columns": [{"name": "id", "null_count": 0, "distinct_count": 1}]}),
        ),
        frame("n1", observation=observed(counts=None)),  # the scan is missing
        frame("n1", observation=observed(after=[])),  # the guard after the scan is missing
        frame("n1", observation=observed(before=[{**FACT, "readonly": 0}])),  # not a boolean
        frame("other", observation=observed()),  # another request's answer
        frame("n1", observation=observed(), extra=1),
        frame("n1", failure="incomplete", detail="x"),
        b'{"nonce":"n1","counts":',  # cut off
        b"",
    ],
)
def test_anything_but_one_exact_answer_is_incomplete(raw: bytes) -> None:
    with pytest.raises(ReadIncompleteError):
        parse_answer(raw, "n1", PLAN)


def test_a_worker_that_could_not_ask_is_unavailable() -> None:
    with pytest.raises(UnavailableError):
        parse_answer(frame("n1", failure="unavailable", detail="OperationalError"), "n1", PLAN)


def test_the_worker_environment_carries_no_airflow_secret() -> None:
    environ = {"PATH": "/bin", "AIRFLOW_CONN_CH": f"clickhouse://u:{SECRET}@h", "AIRFLOW__CORE__FERNET_KEY": "k"}
    assert worker_environment(environ) == {"PATH": "/bin"}


def test_credentials_travel_on_stdin_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in records its argv, environment and stdin; only stdin holds the password."""
    monkeypatch.setenv("AIRFLOW_CONN_LEAK", SECRET)
    seen = tmp_path / "seen"
    python = stand_in(tmp_path, f'echo "$@" > {seen}.argv; env > {seen}.env; cat > {seen}.stdin; exit 3')
    with pytest.raises(ReadIncompleteError):
        SubprocessAcceptanceReader(connection, python=python).observe((member(),), PLAN, budget_ms=5_000)
    assert SECRET not in Path(f"{seen}.argv").read_text()
    assert SECRET not in Path(f"{seen}.env").read_text()
    request = json.loads(Path(f"{seen}.stdin").read_text())
    assert request["members"][MEMBER]["password"] == SECRET and request["plan"] == PLAN.model_dump(mode="json")
    assert Path(f"{seen}.argv").read_text().split() == ["-m", acceptance_reader.WORKER_MODULE]


def test_a_hung_worker_is_killed_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    python = stand_in(tmp_path, f"echo $$ > {pid_file}; cat > /dev/null; sleep 30")
    started = time.monotonic()
    with pytest.raises(ReadIncompleteError, match="killed"):
        SubprocessAcceptanceReader(connection, python=python).observe((member(),), PLAN, budget_ms=700)
    assert time.monotonic() - started < 5
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone, not left running


@pytest.mark.parametrize("body", ["cat > /dev/null; echo '{\"nonce\":'", "cat > /dev/null; exit 1", "exit 0"])
def test_a_crashed_or_chattering_worker_is_incomplete(tmp_path: Path, body: str) -> None:
    with pytest.raises(ReadIncompleteError):
        SubprocessAcceptanceReader(connection, python=stand_in(tmp_path, body)).observe(
            (member(),), PLAN, budget_ms=5_000
        )


def test_an_answer_after_the_deadline_is_not_an_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker answered, but the monotonic deadline passed first (the clock jumps while the answer is read)."""
    clock = iter([100.0, 100.0, 200.0, 200.0, 200.0])
    monkeypatch.setattr(acceptance_reader.time, "monotonic", lambda: next(clock))
    python = stand_in(tmp_path, "cat > /dev/null; echo '{}'")
    with pytest.raises(ReadIncompleteError, match="after the deadline"):
        SubprocessAcceptanceReader(connection, python=python).observe((member(),), PLAN, budget_ms=5_000)


def test_the_worker_takes_only_one_exact_aggregate_row_as_counts() -> None:
    from airflow_provider_dpone.cluster.clickhouse.acceptance_worker import IncompleteAnswerError, counts_from

    names = ("count()", "toString(sum(...))", "generation_uuid", "null_0")
    row = [3, "12345", PLAN.generation_uuid, 0]
    counts = counts_from(PLAN, names, [row])
    assert counts.row_count == 3 and counts.columns[0].null_count == 0
    for bad_names, bad_rows in [
        (names[:3], [row[:3]]),  # the alias of a count is missing
        (names, []),  # no row
        (names, [row, row]),  # more than one row
        (names, [[True, *row[1:]]]),  # a boolean count
        (names, [[*row[:3], -1]]),
        (names, [[3, "-5", *row[2:]]]),  # not a UInt128 sum
        (names, [[3, "12345", None, 0]]),  # the table left: no UUID
        (names, [[3, "12345", "", 0]]),
    ]:
        with pytest.raises(IncompleteAnswerError):
            counts_from(PLAN, bad_names, bad_rows)
