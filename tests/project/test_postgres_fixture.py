"""The PostgreSQL test fixture: missing binaries fail under CI instead of skipping silently."""

from __future__ import annotations

import pytest

from tests.support.fixtures import postgres

pytestmark = pytest.mark.unit


def test_missing_binaries_fail_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "find_postgres_bin", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"scripts/ci/postgres\.sh"):
        postgres.require_postgres_bin()


def test_missing_binaries_skip_with_the_reason_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "find_postgres_bin", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="PostgreSQL binaries not found"):
        postgres.require_postgres_bin()


def test_the_throwaway_cluster_is_stopped_and_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    if postgres.find_postgres_bin() is None:
        postgres.require_postgres_bin()
    with postgres.throwaway_cluster() as server, psycopg.connect(server.dsn) as conn:
        assert conn.execute("SELECT current_setting('fsync')").fetchone() == ("off",)
        data_dir = conn.execute("SELECT current_setting('data_directory')").fetchone()
    assert data_dir is not None
    from pathlib import Path

    assert not Path(data_dir[0]).exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(server.dsn, connect_timeout=2)
