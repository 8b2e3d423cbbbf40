"""Exact engine admission: which relations each selector may read, with version/delete arguments parsed exactly.

Legacy admits only a plain ``MergeTree``. Raw admits ``ReplacingMergeTree`` (``single_server``) and
``ReplicatedReplacingMergeTree`` (``connected_replica``, one identified replica). Everything else - Shared engines,
Distributed, views, aliases, non-Atomic databases, temporary tables, a zero UUID, any name prefix or suffix that is
not parsed here - fails before extraction. The engine's version and is_deleted columns are bound, never interpreted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from airflow_provider_dpone.core.canonical import sha256_hex, tagged_digest
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.transfer_options import ReplicaScope
from airflow_provider_dpone.transfer.route.selector import SnapshotRequirement
from airflow_provider_dpone.transfer.values.raw_snapshot import EngineSignature
from airflow_provider_dpone.transfer.values.source_observation import RelationObservation, ReplicaObservation

REPLACING: Final = frozenset({"ReplacingMergeTree", "ReplicatedReplacingMergeTree"})
_IDENT: Final[re.Pattern[str]] = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`[A-Za-z_][A-Za-z0-9_]*`")
_STRING: Final[re.Pattern[str]] = re.compile(r"'(?:[^'\\]|\\.)*'")
_CLAUSES: Final = ("PARTITION BY ", "PRIMARY KEY ", "ORDER BY ", "SAMPLE BY ", "TTL ", "SETTINGS ", "COMMENT ")
_VERSION_TYPES: Final[re.Pattern[str]] = re.compile(r"(UInt(8|16|32|64|128|256)|Date|Date32|DateTime(64)?(\(.*\))?)")
_ZERO_UUID: Final = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class EngineArgument:
    kind: Literal["identifier", "string", "other"]
    text: str


def _split_arguments(text: str) -> tuple[list[str], str]:
    """Top-level arguments of ``(...)`` at the start of ``text`` (quotes and nesting respected) and the remainder."""
    depth, index, start = 0, 0, 1
    arguments: list[str] = []
    while index < len(text):
        char = text[index]
        if char == "'":
            index += 1
            while index < len(text) and text[index] != "'":
                index += 2 if text[index] == "\\" else 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                arguments.append(text[start:index].strip())
                if arguments == [""]:
                    return [], text[index + 1 :]
                if not all(arguments):
                    raise DponeError("native_transfer.source_engine_unsupported", "empty engine argument")
                return arguments, text[index + 1 :]
        elif char == "," and depth == 1:
            arguments.append(text[start:index].strip())
            start = index + 1
        index += 1
    raise DponeError("native_transfer.source_engine_unsupported", "unbalanced engine arguments")


def parse_engine_full(engine: str, engine_full: str) -> list[EngineArgument]:
    """Split ``engine_full`` into the engine's arguments; the name must be exactly ``engine`` (no prefix/suffix)."""
    if not engine or not engine_full.startswith(engine):
        raise DponeError("native_transfer.source_engine_unsupported", "engine_full does not start with the engine name")
    rest = engine_full[len(engine) :]
    raw_arguments: list[str] = []
    if rest.startswith("("):
        raw_arguments, rest = _split_arguments(rest)
    if rest and not (rest.startswith(" ") and rest[1:].startswith(_CLAUSES)):
        raise DponeError("native_transfer.source_engine_unsupported", "unparsed text after the engine name")
    arguments: list[EngineArgument] = []
    for text in raw_arguments:
        if _IDENT.fullmatch(text):
            arguments.append(EngineArgument("identifier", text.strip("`")))
        elif _STRING.fullmatch(text):
            arguments.append(EngineArgument("string", text))
        else:
            arguments.append(EngineArgument("other", text))
    return arguments


def _check_relation(relation: RelationObservation) -> None:
    if not relation.exists:
        raise DponeError("native_transfer.source_relation_not_found", "relation not found or not visible")
    if relation.database_engine != "Atomic":
        raise DponeError("native_transfer.source_engine_unsupported", "database engine is not Atomic")
    if relation.is_temporary:
        raise DponeError("native_transfer.source_engine_unsupported", "temporary table")
    if not relation.uuid or relation.uuid == _ZERO_UUID:
        raise DponeError("native_transfer.source_engine_unsupported", "relation has no UUID")


def admit_legacy_engine(relation: RelationObservation) -> None:
    """Omitted/query_visible selector: exactly a plain MergeTree, as before."""
    _check_relation(relation)
    if relation.engine in REPLACING:
        raise DponeError("native_transfer.replacing_raw_snapshot_required", f"engine {relation.engine}")
    if relation.engine != "MergeTree":
        raise DponeError("native_transfer.source_engine_unsupported", f"engine {relation.engine or 'none'}")
    parse_engine_full(relation.engine, relation.engine_full)


def _column_type(relation: RelationObservation, name: str) -> str:
    for column in relation.columns:
        if column.name == name:
            return column.type
    raise DponeError("native_transfer.source_engine_unsupported", "engine argument is not a column of the relation")


def admit_raw_engine(
    requirement: SnapshotRequirement, relation: RelationObservation, replica: ReplicaObservation
) -> EngineSignature:
    """exact_raw_rows: parse the Replacing engine signature and check the replica scope against the engine."""
    _check_relation(relation)
    engine = relation.engine
    if engine == "MergeTree":
        raise DponeError("native_transfer.replacing_raw_snapshot_required", "exact_raw_rows on a plain MergeTree")
    if engine not in REPLACING:
        raise DponeError("native_transfer.source_engine_unsupported", f"engine {engine or 'none'}")
    arguments = parse_engine_full(engine, relation.engine_full)
    replicated = engine == "ReplicatedReplacingMergeTree"
    strings = [argument for argument in arguments if argument.kind == "string"]
    if replicated:
        if requirement.replica_scope is not ReplicaScope.CONNECTED_REPLICA:
            raise DponeError("native_transfer.replica_scope_unproven", "replicated engine needs connected_replica")
        if len(strings) not in (0, 2) or arguments[: len(strings)] != strings:
            raise DponeError("native_transfer.source_engine_unsupported", "replication path arguments are not parsed")
        if not replica.present or not replica.replica_name or not replica.zookeeper_path:
            raise DponeError("native_transfer.replica_scope_unproven", "connected replica identity is not observable")
    else:
        if requirement.replica_scope is not ReplicaScope.SINGLE_SERVER:
            raise DponeError("native_transfer.replica_scope_unproven", "non-replicated engine needs single_server")
        if strings:
            raise DponeError("native_transfer.source_engine_unsupported", "unexpected string engine argument")
        if replica.present:
            raise DponeError("native_transfer.replica_scope_unproven", "table reports a replica but is not replicated")
    columns = arguments[len(strings) :]
    if len(columns) > 2 or any(argument.kind != "identifier" for argument in columns):
        raise DponeError(
            "native_transfer.source_engine_unsupported", "engine arguments are not version/is_deleted columns"
        )
    version = columns[0].text if columns else None
    deleted = columns[1].text if len(columns) > 1 else None
    if version is not None and not _VERSION_TYPES.fullmatch(_column_type(relation, version)):
        raise DponeError("native_transfer.source_engine_unsupported", "version column type is not admitted")
    if deleted is not None and _column_type(relation, deleted) != "UInt8":
        raise DponeError("native_transfer.source_engine_unsupported", "is_deleted column is not UInt8")
    return EngineSignature(
        name="ReplicatedReplacingMergeTree" if replicated else "ReplacingMergeTree",
        version_column=version,
        is_deleted_column=deleted,
        replicated=replicated,
        replication_path_sha256=(
            tagged_digest("dpone.replica-path.v1", replica.zookeeper_path, replica.replica_name) if replicated else None
        ),
        engine_full_sha256=sha256_hex(relation.engine_full),
    )
