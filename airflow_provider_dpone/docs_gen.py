"""Generated sections of the documentation: error codes, CLI exit codes, manifest fields, connection fields.

The reference tables are rendered from the code that enforces them (the error registry, the manifest models, the
connection options model), so the documentation cannot drift from behaviour. Each page keeps its prose; only the
text between ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->`` is rewritten.

    python -m airflow_provider_dpone.docs_gen            # rewrite the generated sections in docs/
    python -m airflow_provider_dpone.docs_gen --check    # exit 1 and print a diff when a section is stale
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from airflow_provider_dpone.cli import EXIT_CODES
from airflow_provider_dpone.cluster.values.authority.phases import (
    ALLOWED_TRANSITIONS,
    LOOP_FIELDS,
    TERMINAL_PHASES,
    VOID_EDGES,
    Phase,
)
from airflow_provider_dpone.core.alerts import ALERTS
from airflow_provider_dpone.core.connection_options import ClickHouseConnectionOptions
from airflow_provider_dpone.core.errors import REGISTRY
from airflow_provider_dpone.core.errors.code import LEGACY_NATIVE_TRANSFER_PREFIX, NATIVE_TRANSFER_PREFIX
from airflow_provider_dpone.core.manifest import ClusterPublicationManifest, NativeTransferManifest
from airflow_provider_dpone.core.manifest.transfer_options import (
    ExecutionOptions,
    NativeTransferOptions,
    SourceSnapshot,
    WireOptions,
)
from airflow_provider_dpone.core.manifest.types import DocType
from airflow_provider_dpone.provider_info import CONFIG

REGENERATE: Final[str] = "python -m airflow_provider_dpone.docs_gen"
DEFAULT_DOCS_DIR: Final[Path] = Path(__file__).resolve().parents[1] / "docs"

_DESCRIPTIONS: Final[dict[tuple[type[BaseModel], str], str]] = {
    (NativeTransferOptions, "source_snapshot"): "The declared snapshot selector. Omitted: the legacy behaviour "
    "(query_visible; plain MergeTree only).",
    (NativeTransferOptions, "wire"): "Wire format between the source reader and the target writer.",
    (NativeTransferOptions, "execution"): "Import backend, verification and chunk bounds.",
    (SourceSnapshot, "mode"): "query_visible (legacy, plain MergeTree) or exact_raw_rows (ReplacingMergeTree "
    "row versions of one non-FINAL SELECT, duplicates preserved).",
    (SourceSnapshot, "replica_scope"): "single_server (non-replicated engine) or connected_replica "
    "(ReplicatedReplacingMergeTree through one pinned replica).",
    (WireOptions, "mode"): "Typed binary transport (the only mode).",
    (WireOptions, "binary_format"): "Binary row format (the only format).",
    (ExecutionOptions, "import_backend"): "SQL Server bulk import backend: bcp (default) or mssql_sqlclient.",
    (ExecutionOptions, "verification_backend"): "target_local (required by exact_raw_rows) or source_only.",
    (ExecutionOptions, "chunk_rows"): "Rows per chunk; bounds memory independently of the row count.",
    (ExecutionOptions, "max_chunk_bytes"): "Bytes per chunk; bounds memory independently of the row count.",
}
"""Descriptions of fields of models defined without them (the native-transfer options)."""


# ------------------------------------------------------------------------------------------------- rendering --
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _doc_type(metadata: list[Any]) -> str | None:
    return next((item.name for item in metadata if isinstance(item, DocType)), None)


def _type_name(annotation: Any, metadata: list[Any]) -> str:
    named = _doc_type(metadata)
    if named:
        return named
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0], list(args[1:]))
    if origin is typing.Literal:
        return " | ".join(f"`{value}`" for value in args)
    if origin in (typing.Union, types.UnionType):
        names = dict.fromkeys(_type_name(arg, []) for arg in args if arg is not type(None))
        return " or ".join(names)
    if origin in (tuple, list):
        return "list of " + _type_name(args[0], [])
    if origin is dict:
        return f"mapping of {_type_name(args[0], [])} to {_type_name(args[1], [])}"
    if isinstance(annotation, type):
        if issubclass(annotation, Enum):
            return " | ".join(f"`{member.value}`" for member in annotation)
        if issubclass(annotation, BaseModel):
            return "mapping"
        simple = {bool: "boolean", int: "integer", str: "string", datetime: "UTC timestamp"}
        if annotation in simple:
            return simple[annotation]
    return str(annotation)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None or isinstance(info.default, BaseModel):
        return "(defaults)"
    value = info.default
    if value is None:
        return "omitted"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The model classes a field holds (one, or the members of a tagged union), unwrapping Optional/Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [model for arg in typing.get_args(annotation) for model in _models_in(arg)]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _tag(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("type")
    if field is None or typing.get_origin(field.annotation) is not typing.Literal:
        return None
    return str(typing.get_args(field.annotation)[0])


def field_rows(model: type[BaseModel], prefix: str = "", qualifier: str = "") -> Iterator[tuple[str, ...]]:
    """Rows ``(path, type, default, description)`` for every field reachable from ``model``."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}{key}"
        description = info.description or _DESCRIPTIONS.get((model, name), "")
        if not description:
            raise ValueError(f"{model.__name__}.{name} has no description: add one to the model or to _DESCRIPTIONS")
        yield (f"`{path}`{qualifier}", _type_name(info.annotation, list(info.metadata)), _default(info), description)
        members = _models_in(info.annotation)
        for member in members:
            tag = _tag(member) if len(members) > 1 else None
            inner = f" (when `{path}.type` is `{tag}`)" if tag else qualifier
            yield from field_rows(member, prefix=f"{path}.", qualifier=inner)


def manifest_fields(model: type[BaseModel]) -> str:
    return _table(("Field", "Type", "Default", "Meaning"), list(field_rows(model)))


def error_codes() -> str:
    families: dict[str, list[tuple[str, ...]]] = {}
    for entry in REGISTRY.values():
        retry = "yes" if entry.retryable else "no"
        families.setdefault(entry.family, []).append((f"`{entry.code}`", retry, entry.cause, entry.action))
    header = ("Code", "Retryable", "Cause", "Next action")
    notes = {
        NATIVE_TRANSFER_PREFIX.rstrip("."): f"Every code of this family is also accepted under its earlier name "
        f"`{LEGACY_NATIVE_TRANSFER_PREFIX}*` (for example `{LEGACY_NATIVE_TRANSFER_PREFIX}target_unavailable`); the "
        "provider reports the name below.\n\n"
    }
    parts = [f"### {family}\n\n" + notes.get(family, "") + _table(header, rows) for family, rows in families.items()]
    return "\n\n".join(parts)


def alerts() -> str:
    rows = [
        (
            f"`{alert.name}`",
            alert.condition,
            ", ".join(f"`{code}`" for code in alert.codes) or "none: the run goes on",
            alert.action,
        )
        for alert in ALERTS.values()
    ]
    return _table(("Alert (log event and metric)", "Emitted when", "With code", "Next action"), rows)


def exit_codes() -> str:
    return _table(("Exit code", "Meaning"), [(f"`{code}`", meaning) for code, meaning in EXIT_CODES])


def connection_fields() -> str:
    rows = []
    for name, info in ClickHouseConnectionOptions.model_fields.items():
        rows.append(
            (
                f"`{name}`",
                info.title or name,
                _type_name(info.annotation, list(info.metadata)),
                _default(info),
                info.description or "",
            )
        )
    return _table(("Extra key", "Form label", "Type", "Default", "Meaning"), rows)


def settings() -> str:
    """The ``[dpone]`` options as provider info registers them with Airflow."""
    rows = []
    for name, option in CONFIG["dpone"]["options"].items():
        default = option["default"]
        rows.append(
            (
                f"`[dpone] {name}` (`AIRFLOW__DPONE__{name.upper()}`)",
                option["type"],
                "unset" if default is None else f"`{default}`",
                f"`{option['example']}`",
                option["description"],
            )
        )
    return _table(("Option", "Type", "Default", "Example", "Meaning"), rows)


def phase_transitions() -> str:
    """The publication state diagram as the authority write helper enforces it (``ALLOWED_TRANSITIONS``)."""
    rows = []
    for old, allowed in ALLOWED_TRANSITIONS.items():
        edges = []
        for new in sorted(allowed, key=list(Phase).index):
            if new is old:
                loop = LOOP_FIELDS.get(old)
                edges.append(f"`{new}` (progress; only {', '.join(sorted(loop))})" if loop else f"`{new}` (progress)")
            elif old is not None and (old, new) in VOID_EDGES:
                edges.append(f"`{new}` (back, by a proven void of the permit)")
            elif new is Phase.RELEASED:
                edges.append(f"`{new}` (by the operator's checked release of a publication stopped after its swap)")
            else:
                edges.append(f"`{new}`")
        name = "no record" if old is None else f"`{old}`" + (" (terminal)" if old in TERMINAL_PHASES else "")
        rows.append((name, ", ".join(edges)))
    return _table(("Phase", "May be written next"), rows)


SECTIONS: Final[dict[str, dict[str, Callable[[], str]]]] = {
    "errors.md": {"error-codes": error_codes, "exit-codes": exit_codes, "alerts": alerts},
    "manifest-reference.md": {
        "cluster-fields": lambda: manifest_fields(ClusterPublicationManifest),
        "transfer-fields": lambda: manifest_fields(NativeTransferManifest),
    },
    "connections.md": {"connection-fields": connection_fields},
    "how-to-external-full-refresh.md": {"settings": settings},
    "runbook.md": {"phase-transitions": phase_transitions},
}
"""Page -> generated section name -> renderer."""


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- BEGIN GENERATED: {name} ({REGENERATE}) -->", f"<!-- END GENERATED: {name} -->"


def regenerate(text: str, sections: dict[str, Callable[[], str]]) -> str:
    """Return ``text`` with every generated section replaced by its current rendering."""
    for name, render in sections.items():
        begin, end = _markers(name)
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if not pattern.search(text):
            raise ValueError(f"section {name!r} has no markers; add:\n{begin}\n{end}")
        text = pattern.sub(lambda _match: f"{begin}\n{render()}\n{end}", text, count=1)  # noqa: B023
    return text


def stale_pages(docs_dir: Path) -> dict[str, str]:
    """Page name -> unified diff, for every page whose generated sections are out of date."""
    diffs: dict[str, str] = {}
    for page, sections in SECTIONS.items():
        current = (docs_dir / page).read_text(encoding="utf-8")
        wanted = regenerate(current, sections)
        if wanted != current:
            diff = difflib.unified_diff(
                current.splitlines(keepends=True), wanted.splitlines(keepends=True), f"docs/{page}", f"docs/{page}"
            )
            diffs[page] = "".join(diff)
    return diffs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REGENERATE, description="Regenerate the generated sections of docs/.")
    parser.add_argument("--check", action="store_true", help="only report stale sections (exit 1 if any)")
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR)
    args = parser.parse_args(argv)
    if args.check:
        diffs = stale_pages(args.docs_dir)
        for diff in diffs.values():
            sys.stdout.write(diff)
        if diffs:
            sys.stdout.write(f"stale generated docs; fix with: {REGENERATE}\n")
        return 1 if diffs else 0
    for page, sections in SECTIONS.items():
        path = args.docs_dir / page
        path.write_text(regenerate(path.read_text(encoding="utf-8"), sections), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
