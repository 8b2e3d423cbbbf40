"""Values that static (and later runtime) admission returns: blockers and route decisions."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from airflow_provider_dpone.core.errors import lookup


@dataclass(frozen=True)
class Blocker:
    """One reason a manifest cannot run: a registered code, the manifest field it concerns, sanitized facts."""

    code: str
    field: str
    detail: str

    def __post_init__(self) -> None:
        lookup(self.code)  # an unregistered code fails where the blocker is built, not where it is printed

    def as_dict(self) -> dict[str, str]:
        entry = lookup(self.code)
        return {
            "code": self.code,
            "field": self.field,
            "cause": entry.cause,
            "detail": self.detail,
            "action": entry.action,
        }


@dataclass(frozen=True)
class ReplicationDecision:
    """The cluster route decision, field for field as the public contract shows it.

    ``selected`` is None while any blocker remains: nothing is ever selected in place of what was requested.
    """

    requested: str
    selected: str | None
    replication_mode: str | None
    runtime_admission_required: bool = True
    no_fallback: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TransferDecision:
    """The native transfer route decision: the effective snapshot selector and the sink it selects."""

    requested: str
    selected: str | None
    source_snapshot: str
    replica_scope: str
    runtime_admission_required: bool = True
    no_fallback: bool = True

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class AdmissionResult:
    """Static admission of one manifest: the route, its decision, and every blocker found (not just the first)."""

    route: str
    decision: ReplicationDecision | TransferDecision
    blockers: tuple[Blocker, ...]

    @property
    def admissible(self) -> bool:
        return not self.blockers

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(blocker.code for blocker in self.blockers)
