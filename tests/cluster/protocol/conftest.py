"""Every coded error a protocol test provokes names a member by its one name.

Whatever a scenario drives (refusals, single faults at every I/O point, long fault schedules), each
:class:`~airflow_provider_dpone.core.errors.DponeError` raised while it runs is recorded, and the test fails when a
detail names a member by its bare id (``m<16 hex>``) instead of ``m<16 hex> (shard S, replica R)``, or with a
position that is not the id's (``member_id(S, R)`` recomputed here). Where the operation's bound inventory proves no
position, the name must say so: ``m<16 hex> (position unknown: the inventory changed)``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_provider_dpone.core.errors import DponeError
from tests.support.cluster.member_names import misnamed_members


@pytest.fixture(autouse=True)
def coded_errors_name_members_by_label(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[DponeError]]:
    raised: list[DponeError] = []
    original = DponeError.__init__

    def recording(self: DponeError, code: str, detail: str = "") -> None:
        original(self, code, detail)
        raised.append(self)

    monkeypatch.setattr(DponeError, "__init__", recording)
    yield raised
    wrong = [(error.code, error.detail, misnamed) for error in raised if (misnamed := misnamed_members(error.detail))]
    if wrong:
        pytest.fail(f"coded errors name a member without its one name: {wrong[:5]}")
