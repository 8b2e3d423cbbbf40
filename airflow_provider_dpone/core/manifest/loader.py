"""Strict manifest loading: bytes -> YAML -> closed route model, every failure a stable code.

YAML is read with a deliberately small schema (the YAML 1.2 core subset a manifest needs): ``true``/``false`` are the
only booleans (``yes``/``on`` stay strings and are then refused by strict fields), integers are plain decimals (no
octal, no sexagesimal ``1:20``), timestamps stay text (the window parser decides what a UTC instant is), and floats stay
text (no manifest field is a float). Explicit tags (``!!int 0x10``, ``!!set``, ``!!timestamp``, custom ``!tags``),
integers of more than 64 digits, duplicate keys, non-string keys, anchors/aliases, multiple documents and oversize
files are refused, so what a reviewer reads is exactly what runs.

Errors never echo manifest text: details carry a field path (with unprintable or non-plain keys replaced), a line and
column, or a fixed reason.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest.cluster import ClusterPublicationManifest
from airflow_provider_dpone.core.manifest.transfer import NativeTransferManifest
from airflow_provider_dpone.core.manifest.types import IDENTIFIER_ERROR, WINDOW_ERROR

Manifest = ClusterPublicationManifest | NativeTransferManifest
"""A loaded manifest: one of the two routes, chosen by ``sink.type``."""

ManifestInput = str | os.PathLike[str] | Mapping[str, Any] | Manifest
"""What an operator accepts as its manifest: a ``.yaml``/``.yml`` path, inline YAML text, a mapping, or a model."""

M = TypeVar("M", ClusterPublicationManifest, NativeTransferManifest)

MAX_MANIFEST_BYTES: Final[int] = 1024 * 1024
MAX_INTEGER_DIGITS: Final[int] = 64
"""No manifest integer needs more digits; longer ones are refused before Python's own int-conversion limit."""
SUPPORTED_VERSION: Final[int] = 1

_ROUTES: Final[dict[str, type[BaseModel]]] = {
    "clickhouse": ClusterPublicationManifest,
    "mssql": NativeTransferManifest,
    "postgres": NativeTransferManifest,
}
_UNION_FIELDS: Final[dict[type[BaseModel], tuple[str, ...]]] = {
    ClusterPublicationManifest: ("source",),
    NativeTransferManifest: ("sink",),
}
_YAML_SUFFIXES: Final[tuple[str, ...]] = (".yaml", ".yml")
_KIND_REQUIRED: Final[dict[type[BaseModel], str]] = {
    ClusterPublicationManifest: "sink.type: the publication operators need a clickhouse sink",
    NativeTransferManifest: "sink.type: the native transfer operator needs an mssql or postgres sink",
}
_SELECTOR_PATH: Final[str] = "source.options.native_transfer"
_PLAIN_KEY: Final[re.Pattern[str]] = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class ManifestError(DponeError):
    """A manifest with one or more problems; ``code`` is the first one's, ``problems`` lists all of them."""

    def __init__(self, problems: tuple[DponeError, ...]) -> None:
        first = problems[0]
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(first.code, first.detail + more)
        self.problems = problems


def _problem(code: str, detail: str) -> ManifestError:
    return ManifestError((DponeError(code, detail),))


# --------------------------------------------------------------------------------------------------------- YAML --
def _line(node_or_mark: Any) -> str:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return f"line {mark.line + 1} column {mark.column + 1}"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with the small manifest schema described in the module docstring."""

    yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 - PyYAML's class-level registry, replaced on purpose

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise _problem("DPONE_MANIFEST_YAML_INVALID", _line(event) + ": anchors/aliases are refused")
        if getattr(event, "tag", None) is not None:
            raise _problem(
                "DPONE_MANIFEST_YAML_INVALID", _line(event) + ": explicit tags (!!int, !!set, ...) are refused"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if not isinstance(key, str):
                    raise _problem("DPONE_MANIFEST_YAML_INVALID", _line(key_node) + ": mapping key is not a string")
                if key in seen:
                    raise _problem("DPONE_MANIFEST_DUPLICATE_KEY", _line(key_node))
                seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_decimal_int(self, node: Any) -> int:
        digits = str(self.construct_scalar(node))
        if len(digits.lstrip("+-")) > MAX_INTEGER_DIGITS:
            raise _problem("DPONE_MANIFEST_YAML_INVALID", _line(node) + f": integer over {MAX_INTEGER_DIGITS} digits")
        return int(digits, 10)


_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), [*"~nN", ""])
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_decimal_int)


def read_yaml(data: bytes | str) -> Any:
    """Parse one YAML document with the strict manifest schema."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_MANIFEST_BYTES:
        raise _problem("DPONE_MANIFEST_OVERSIZE", f"more than {MAX_MANIFEST_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _problem("DPONE_MANIFEST_YAML_INVALID", "not UTF-8 text") from None
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text)
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        where = _line(exc.problem_mark) if exc.problem_mark is not None else "unknown position"
        raise _problem("DPONE_MANIFEST_YAML_INVALID", where) from None
    except yaml.YAMLError as exc:
        position = getattr(exc, "position", None)
        where = f"character {position}" if isinstance(position, int) else type(exc).__name__
        raise _problem("DPONE_MANIFEST_YAML_INVALID", where) from None
    except RecursionError:
        raise _problem("DPONE_MANIFEST_YAML_INVALID", "nesting too deep") from None
    finally:
        if loader is not None:
            loader.dispose()


# ------------------------------------------------------------------------------------------------------ mapping --
def _segment(part: str | int) -> str:
    if isinstance(part, int):
        return f"[{part}]"
    return part if _PLAIN_KEY.fullmatch(part) else "<unprintable key>"


def _path(loc: tuple[str | int, ...], unions: tuple[str, ...]) -> str:
    parts: list[str] = []
    for index, part in enumerate(loc):
        if index == 1 and isinstance(loc[0], str) and loc[0] in unions:
            continue  # the discriminator tag pydantic inserts after a tagged-union field
        segment = _segment(part)
        parts.append(segment if segment.startswith("[") or not parts else "." + segment)
    return "".join(parts) or "$"


def _reason(err: ErrorDetails) -> str:
    kind = err["type"]
    ctx: dict[str, Any] = dict(err.get("ctx") or {})
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "not a field of this object"
    if kind == "invalid_key":
        return "mapping key is not a string"
    if kind in (IDENTIFIER_ERROR, WINDOW_ERROR):
        return err["msg"]
    if kind == "value_error":
        return str(ctx.get("error", "invalid value")).removeprefix("Value error, ")
    if kind in ("literal_error", "enum"):
        return "expected " + str(ctx.get("expected", "one of the documented values"))
    if kind == "string_pattern_mismatch":
        return "does not match " + str(ctx.get("pattern", "the allowed pattern"))
    if kind in ("string_too_long", "too_long"):
        return f"longer than {ctx.get('max_length')}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = next(iter(ctx.values()), "?")
        return {"greater_than": "must be >", "greater_than_equal": "must be >=", "less_than": "must be <"}.get(
            kind, "must be <="
        ) + f" {bound}"
    if kind.endswith(("_type", "_parsing")):
        return err["msg"]  # pydantic's type messages name the expected type, never the input
    return kind


def _code_and_path(err: ErrorDetails, unions: tuple[str, ...]) -> tuple[str, str, str]:
    kind = err["type"]
    path = _path(tuple(err["loc"]), unions)
    reason = _reason(err)
    if path.startswith(_SELECTOR_PATH + ".source_snapshot") or (path == _SELECTOR_PATH and kind == "value_error"):
        return "native_transfer.source_snapshot_mode_invalid", path, reason
    if kind == "union_tag_not_found":
        return "DPONE_MANIFEST_FIELD_MISSING", path + ".type", "required"
    if kind == "union_tag_invalid":
        return (
            "DPONE_MANIFEST_FIELD_INVALID",
            path + ".type",
            "expected " + str((err.get("ctx") or {}).get("expected_tags")),
        )
    code = {
        "missing": "DPONE_MANIFEST_FIELD_MISSING",
        "extra_forbidden": "DPONE_MANIFEST_UNKNOWN_FIELD",
        IDENTIFIER_ERROR: "DPONE_IDENTIFIER_INVALID",
        WINDOW_ERROR: "DPONE_MANIFEST_WINDOW_INVALID",
    }.get(kind, "DPONE_MANIFEST_FIELD_INVALID")
    return code, path, reason


def _route(raw: Mapping[Any, Any]) -> type[BaseModel]:
    version = raw.get("version")
    if isinstance(version, bool):
        raise _problem("DPONE_MANIFEST_FIELD_INVALID", f"version: expected {SUPPORTED_VERSION}, not a boolean")
    if isinstance(version, int) and version != SUPPORTED_VERSION:
        raise _problem("DPONE_MANIFEST_VERSION_UNSUPPORTED", f"version: supported {SUPPORTED_VERSION}")
    sink = raw.get("sink")
    if sink is None:
        raise _problem("DPONE_MANIFEST_FIELD_MISSING", "sink: required")
    if not isinstance(sink, Mapping):
        raise _problem("DPONE_MANIFEST_FIELD_INVALID", "sink: expected a mapping")
    kind = sink.get("type")
    if kind is None:
        raise _problem("DPONE_MANIFEST_FIELD_MISSING", "sink.type: required")
    if not isinstance(kind, str) or kind not in _ROUTES:
        raise _problem("DPONE_MANIFEST_FIELD_INVALID", "sink.type: expected 'clickhouse', 'mssql' or 'postgres'")
    return _ROUTES[kind]


def manifest_from_mapping(raw: object) -> Manifest:
    """Validate an already parsed manifest (a mapping) into its route model; all field problems are collected."""
    if not isinstance(raw, Mapping):
        raise _problem("DPONE_MANIFEST_YAML_INVALID", "the top level is not a mapping")
    model = _route(raw)
    try:
        loaded = model.model_validate(dict(raw))
    except ValidationError as exc:
        unions = _UNION_FIELDS[model]
        problems = []
        for err in exc.errors(include_url=False, include_input=False):
            code, path, reason = _code_and_path(err, unions)
            problems.append(DponeError(code, f"{path}: {reason}"))
        raise ManifestError(tuple(problems)) from None
    assert isinstance(loaded, ClusterPublicationManifest | NativeTransferManifest)
    return loaded


def parse_manifest(data: bytes | str) -> Manifest:
    """Parse manifest YAML text into its route model."""
    return manifest_from_mapping(read_yaml(data))


def load_manifest(path: str | Path) -> Manifest:
    """Read and parse a manifest file; an unreadable path, or one that is not a regular file (a FIFO, a device, a
    directory), fails with ``DPONE_MANIFEST_UNREADABLE``. The file is opened without blocking and checked on the
    open descriptor, so a FIFO never blocks the reader and a path swapped after a check is not read."""
    try:
        descriptor = os.open(Path(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _problem("DPONE_MANIFEST_UNREADABLE", type(exc).__name__) from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise _problem("DPONE_MANIFEST_UNREADABLE", "not a regular file")
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            data = handle.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise _problem("DPONE_MANIFEST_UNREADABLE", type(exc).__name__) from None
    finally:
        os.close(descriptor)
    return parse_manifest(data)


def read_manifest_input(value: ManifestInput, *, kind: type[M], base_dir: Path | None = None) -> M:
    """The manifest of route ``kind`` from what an operator was given; any other route's manifest is refused.

    A model is taken as is and a mapping validated. A path-like, or a one-line string ending in ``.yaml``/``.yml``, is
    a file (a relative one resolves against ``base_dir`` when given); any other string is inline YAML text.
    """
    loaded: object
    if isinstance(value, ClusterPublicationManifest | NativeTransferManifest):
        loaded = value
    elif isinstance(value, Mapping):
        loaded = manifest_from_mapping(dict(value))
    elif isinstance(value, os.PathLike) or (
        isinstance(value, str) and "\n" not in value and value.strip().endswith(_YAML_SUFFIXES)
    ):
        path = Path(value)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        loaded = load_manifest(path)
    elif isinstance(value, str):
        loaded = parse_manifest(value)
    else:
        raise _problem("DPONE_MANIFEST_FIELD_INVALID", "manifest: expected a path, YAML text, a mapping or a model")
    if not isinstance(loaded, kind):
        raise DponeError("DPONE_MANIFEST_FIELD_INVALID", _KIND_REQUIRED[kind])
    return loaded
