"""One registry of the alerts the protocols raise, and the one function that emits them.

An alert marks a condition an operator must look at even when a retry, another run or a human is already on it: the
seeds name them (a foreign operation holding the target, a diverged candidate, a terminal mixed publication, expired
queue evidence, a cleanup of unknown outcome, topology drift, a live target written or altered in place; on the
transfer: held or unknown custody, a re-extract, provenance drift, observed source drift, an undecidable publication, a failed cleanup). Each alert has one stable name, used both as the log event and as the Airflow metric name
(``Stats.incr(name)``), and is emitted exactly where a protocol decides its condition, once per decision.

:func:`emit` refuses anything but opaque facts: every fact key is from a closed set, and its value must have that
key's shape (hex ids, member ids, registered error codes, phase names, counts) or it is redacted, so no host, credential, SQL, path or
row value can reach a log line or a metric. It writes one structured record to the ``airflow_provider_dpone.alerts``
logger and then hands the event to the caller's sink (the Airflow surface counts it with ``Stats``); the protocols
import no Airflow and only see :data:`AlertSink`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from airflow_provider_dpone.core.errors import REGISTRY
from airflow_provider_dpone.core.errors.code import registered_name

PREFIX: Final[str] = "dpone.alert."
LOGGER: Final[logging.Logger] = logging.getLogger("airflow_provider_dpone.alerts")


@dataclass(frozen=True)
class Alert:
    """A registered alert: its stable name (log event and metric), the route, when it fires and what to do."""

    name: str
    route: str
    condition: str
    action: str
    codes: tuple[str, ...]
    """The error codes the run stops (or waits) with when this alert fires; none when the run goes on."""


def _alert(route: str, key: str, condition: str, action: str, *codes: str) -> Alert:
    return Alert(f"{PREFIX}{route}.{key}", route, condition, action, codes)


_C = "DPONE_CLICKHOUSE_CLUSTER_"
_T = "native_transfer."

FENCED_FOREIGN_OPERATION = _alert(
    "cluster",
    "fenced_foreign_operation",
    "a fence, stage or abort found the target held by another, unresolved operation (or its quality reader fence)",
    "find the holding operation by its id and let it finish, or abort it; the authority row is never taken over",
    _C + "OPERATION_FENCED",
    _C + "EXTERNAL_RECORD_UNRESOLVED",
    _C + "INTERNAL_RECORD_UNRESOLVED",
)
STAGING_DIVERGENCE = _alert(
    "cluster",
    "staging_divergence",
    "a candidate holds what no load of this operation explains (duplicated, divergent or vanished while staging), "
    "or a staged candidate changed before its publication",
    "keep every table; compare the member's candidate with the artifact receipt before aborting the operation",
    _C + "CANDIDATE_DIVERGENT",
)
TARGET_DRIFT = _alert(
    "cluster",
    "target_drift",
    "the live target was written or altered in place after the operation observed its baseline: the publication "
    "stopped before its permit, or (a write while its DDL was in flight) before COMMITTED, so no cleanup drops it",
    "keep every table (the target holds the write); find the writer, then abort the operation or start a new run "
    "once you decide whether the write must survive",
    _C + "TARGET_DRIFT",
)
TERMINAL_MIXED_PUBLICATION = _alert(
    "cluster",
    "terminal_mixed_publication",
    "the publication DDL finished with some members published and others not (or a published member's host failed)",
    "keep every table; follow the runbook's mixed-publication recovery from the recorded per-member UUIDs",
    _C + "PUBLICATION_MIXED",
)
PUBLISHED_CHANGED_AFTER_COMMIT = _alert(
    "cluster",
    "published_changed_after_commit",
    "observed again after the COMMITTED write, a member's published target no longer holds the committed generation "
    "(the publication stands: COMMITTED is never undone)",
    "find who wrote into the target between the publication's check and its COMMITTED write (the receipt's "
    "after_commit has each member's counts and digest); accept or restore the table by the runbook",
    _C + "PUBLISHED_CHANGED_AFTER_COMMIT",
)
QUEUE_EVIDENCE_EXPIRED = _alert(
    "cluster",
    "queue_evidence_expired",
    "the bound DDL's queue entry is gone or incomplete while members show its effect (queue retention expired)",
    "raise the DDL queue retention; resolve the operation from the members' UUIDs by the runbook, never by replay",
    _C + "PUBLICATION_EVIDENCE_MISSING",
)
CLEANUP_UNKNOWN = _alert(
    "cluster",
    "cleanup_unknown",
    "the cleanup DROP's outcome cannot be decided (no queue evidence, mixed, or never reached the queue)",
    "the publication stands; inspect the candidate name on every member by UUID before voiding or dropping",
    _C + "PUBLICATION_EVIDENCE_MISSING",
    _C + "PUBLICATION_MIXED",
    _C + "DISPATCH_UNPROVEN",
)
TOPOLOGY_DRIFT = _alert(
    "cluster",
    "topology_drift",
    "the live cluster inventory differs from the members the operation bound",
    "restore the bound members, or abort the operation and start a new one on the new topology",
    _C + "INVENTORY_DRIFT",
)
CUSTODY_HELD = _alert(
    "transfer",
    "custody_held",
    "another run holds a live writer lease on the operation, or another operation holds the target table",
    "wait for the holder to finish or its lease to expire; overlapping runs stay blocked",
    _T + "custody_held",
)
CUSTODY_UNKNOWN = _alert(
    "transfer",
    "custody_unknown",
    "the target table's previous operation has a publication whose outcome is not recorded",
    "rerun that operation so it reconciles its publication by its receipt; the target stays blocked until then",
    _T + "custody_held",
)
REEXTRACT_REQUIRED = _alert(
    "transfer",
    "reextract_required",
    "an invocation that stopped before EOF was settled and its stage retired; the next one reads the source again",
    "nothing to do unless it repeats: then find why the extraction stops (the reason code) before retrying again",
    _T + "reextract_required",
)
PROVENANCE_DRIFT = _alert(
    "transfer",
    "provenance_drift",
    "at EOF the source's server, relation, access, settings or replica identity differs from what admission saw",
    "find what changed on the source during the read (the drifted fields); the run re-extracts, never publishes",
    _T + "source_endpoint_drift",
    _T + "source_snapshot_drift",
)
SOURCE_DRIFT_OBSERVED = _alert(
    "transfer",
    "source_drift_observed",
    "at EOF the source's physical profile (parts, merges, mutations, row counts) differs from the one before the "
    "SELECT: the acquired snapshot stands and publishes, but the run is not a repeatable measurement",
    "nothing to do for the data; a benchmark excludes the trial, and a merge or insert during every read says the "
    "source is written while it is read",
)

PUBLICATION_UNKNOWN = _alert(
    "transfer",
    "publication_unknown",
    "the target's publication of a verified stage cannot be decided: its receipt differs from the stage, or the "
    "target could not be read to reconcile it",
    "keep the target and the stage; rerun the operation once the target answers, or compare the receipt by the runbook",
    _T + "publication_outcome_unknown",
    _T + "target_publication_outcome_unknown",
    _T + "target_driver_fault",
)
CLEANUP_FAILED = _alert(
    "transfer",
    "cleanup_failed",
    "after a recorded success, the target's staging objects or the stage's chunks could not be removed",
    "the published snapshot stands; drop the invocation's staging table and stage prefix by hand, or let a later "
    "run of the operation retire them",
    _T + "target_unavailable",
    _T + "stage_retirement_failed",
)

ALERTS: Final[dict[str, Alert]] = {}
for _entry in (
    FENCED_FOREIGN_OPERATION,
    STAGING_DIVERGENCE,
    TARGET_DRIFT,
    TERMINAL_MIXED_PUBLICATION,
    PUBLISHED_CHANGED_AFTER_COMMIT,
    QUEUE_EVIDENCE_EXPIRED,
    CLEANUP_UNKNOWN,
    TOPOLOGY_DRIFT,
    CUSTODY_HELD,
    CUSTODY_UNKNOWN,
    REEXTRACT_REQUIRED,
    PROVENANCE_DRIFT,
    SOURCE_DRIFT_OBSERVED,
    PUBLICATION_UNKNOWN,
    CLEANUP_FAILED,
):
    if _entry.name in ALERTS:
        raise RuntimeError(f"alert registered twice: {_entry.name}")
    ALERTS[_entry.name] = _entry

# --- facts: a closed set of keys, each with the one shape its values may have -------------------------------------

_HEX = re.compile(r"^[0-9a-f]{16,64}$")
_MEMBER = re.compile(r"^m[0-9a-f]{16}$")
_PHASE = re.compile(r"^[A-Z][A-Z_]{0,39}$")
STEPS: Final[frozenset[str]] = frozenset({"publication", "cleanup", "candidate create", "candidate drop"})
DRIFT_FIELDS: Final[frozenset[str]] = frozenset(
    {"relation", "access", "settings", "replica", "server", "endpoint", "result"}
)
REASONS: Final[frozenset[str]] = frozenset({"interrupted_before_eof", "unexpected_error"})


def _code(value: object) -> bool:
    return isinstance(value, str) and registered_name(value) in REGISTRY


def _drift(value: object) -> bool:
    return isinstance(value, str) and bool(value) and set(value.split(",")) <= DRIFT_FIELDS


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _matches(pattern: re.Pattern[str]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, str) and pattern.fullmatch(value) is not None


FACTS: Final[dict[str, Callable[[object], bool]]] = {
    "operation_id": _matches(_HEX),
    "holder_operation_id": _matches(_HEX),
    "invocation_id": _matches(_HEX),
    "target_key": _matches(_HEX),
    "member_id": _matches(_MEMBER),
    "phase": _matches(_PHASE),
    "step": lambda value: isinstance(value, str) and value in STEPS,
    "epoch": _count,
    "members": _count,
    "live_members": _count,
    "code": _code,
    "reason": lambda value: isinstance(value, str) and (value in REASONS or _code(value)),
    "drifted": _drift,
}
"""Fact key -> the test its value must pass (opaque ids, registered codes, closed vocabularies, counts)."""

Fact = str | int
REDACTED: Final[str] = "redacted"


@dataclass(frozen=True)
class AlertEvent:
    """One emitted alert: the registered alert and its facts, in key order."""

    alert: Alert
    facts: tuple[tuple[str, Fact], ...]

    @property
    def name(self) -> str:
        return self.alert.name

    def as_dict(self) -> dict[str, Fact]:
        return {"alert": self.name, **dict(self.facts)}

    def line(self) -> str:
        facts = " ".join(f"{key}={value}" for key, value in self.facts)
        return f"dpone alert {self.name}: {self.alert.condition} [{facts}]"


def _opaque(key: str, value: object) -> bool:
    """Whether ``value`` has fact ``key``'s shape; any failure of the test itself means it has not."""
    try:
        return FACTS[key](value) is True
    except Exception:  # noqa: BLE001 -- a value that breaks its test is redacted, never raised
        return False


AlertSink = Callable[[AlertEvent], None]
"""Where an emitted event goes after its log record (the Airflow surface: a ``Stats`` counter)."""


def emit(sink: AlertSink | None, alert: Alert, **facts: Fact) -> AlertEvent:
    """Emit ``alert`` once: validate every fact, log one structured record, hand the event to ``sink``.

    An unregistered alert or a fact key outside :data:`FACTS` is a programming error and raises ``ValueError`` before
    anything is written; a value without its key's shape, of any type (a list, a dict, an object whose comparison
    fails), is shown as :data:`REDACTED` and never raises (an alert never replaces the error it accompanies), so
    nothing but opaque facts ever leaves.
    """
    if ALERTS.get(alert.name) is not alert:
        raise ValueError(f"unregistered alert {alert.name!r}: add it to core/alerts.py")
    unknown = sorted(set(facts) - set(FACTS))
    if unknown:
        raise ValueError(f"alert {alert.name}: {unknown} are not registered facts")
    shown = {key: value if _opaque(key, value) else REDACTED for key, value in facts.items()}
    event = AlertEvent(alert, tuple(sorted(shown.items())))
    LOGGER.warning(event.line(), extra={"dpone_alert": event.as_dict()})
    if sink is not None:
        sink(event)
    return event
