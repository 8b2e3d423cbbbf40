"""Manifest loading: both routes parse, and every malformed or hostile input fails with a stable code, unechoed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.core.manifest import (
    MAX_MANIFEST_BYTES,
    ClusterPublicationManifest,
    ManifestError,
    NativeTransferManifest,
    ReplicationMode,
    SealedArtifactSource,
    load_manifest,
    manifest_from_mapping,
    normalized_plan,
    normalized_plan_digest,
    parse_manifest,
)
from airflow_provider_dpone.core.manifest.transfer import StringMapping
from airflow_provider_dpone.core.manifest.transfer_options import ReplicaScope, SnapshotMode
from tests.support.manifest_samples import EXAMPLES, cluster_of, external, load, storage_of, to_yaml, transfer

pytestmark = pytest.mark.unit


def _codes(error: DponeError) -> list[str]:
    return [p.code for p in error.problems] if isinstance(error, ManifestError) else [error.code]


def _fails(data: str | bytes | dict[str, Any], code: str) -> DponeError:
    with pytest.raises(DponeError) as info:
        load(data) if isinstance(data, dict) else parse_manifest(data)
    assert code in _codes(info.value), str(info.value)
    return info.value


def _everything_said(error: DponeError) -> str:
    problems = error.problems if isinstance(error, ManifestError) else (error,)
    return str(error) + "".join(str(p.as_dict()) for p in problems)


# ------------------------------------------------------------------------------------------------ valid input --
def test_examples_load_into_their_routes() -> None:
    loaded = {path.name: load_manifest(path) for path in sorted(EXAMPLES.glob("*.yaml"))}
    assert set(loaded) >= {
        "clickhouse_external_full_refresh.yaml",
        "clickhouse_internal_full_refresh.yaml",
        "clickhouse_to_mssql_raw_snapshot.yaml",
        "clickhouse_to_postgres_raw_snapshot.yaml",
    }
    external_manifest = loaded["clickhouse_external_full_refresh.yaml"]
    assert isinstance(external_manifest, ClusterPublicationManifest)
    assert external_manifest.cluster is not None
    assert external_manifest.cluster.replication_mode is ReplicationMode.EXTERNAL
    raw = loaded["clickhouse_to_mssql_raw_snapshot.yaml"]
    assert isinstance(raw, NativeTransferManifest)
    snapshot = raw.source.options.native_transfer.source_snapshot
    assert snapshot is not None and snapshot.mode is SnapshotMode.EXACT_RAW_ROWS
    assert raw.load.window is not None and raw.load.window.start.tzinfo is not None


def test_omitted_replication_mode_means_internal() -> None:
    raw = external()
    del cluster_of(raw)["replication_mode"]
    manifest = load(raw)
    assert isinstance(manifest, ClusterPublicationManifest)
    assert manifest.cluster is not None and manifest.cluster.replication_mode is ReplicationMode.INTERNAL


def test_artifact_source_and_python_mapping_api() -> None:
    raw = external()
    raw["source"] = {"type": "artifact", "sha256": "ab" * 32, "store_uri": "s3://bucket/dpone/artifacts"}
    manifest = manifest_from_mapping(raw)
    assert isinstance(manifest, ClusterPublicationManifest) and isinstance(manifest.source, SealedArtifactSource)


def test_models_are_frozen() -> None:
    manifest = load(external())
    with pytest.raises(Exception, match="frozen"):
        manifest.name = "other"  # type: ignore[misc]


def test_omitted_selector_is_none_and_postgres_sink_parses() -> None:
    raw = transfer("postgres")
    del raw["source"]["options"]
    manifest = load(raw)
    assert isinstance(manifest, NativeTransferManifest)
    assert manifest.source.options.native_transfer.source_snapshot is None
    assert manifest.sink.type == "postgres" and manifest.sink.target_schema == "dbo"


def test_string_mapping_is_a_sink_option_bound_into_the_plan() -> None:
    raw = transfer("postgres")
    default = load(raw)
    assert isinstance(default, NativeTransferManifest)
    assert default.sink.options.string_mapping is StringMapping.BINARY
    raw["sink"]["options"] = {"string_mapping": "text"}
    text = load(raw)
    assert isinstance(text, NativeTransferManifest) and text.sink.options.string_mapping is StringMapping.TEXT
    assert normalized_plan_digest(text) != normalized_plan_digest(default), "another mapping is another operation"
    assert "string_mapping" not in normalized_plan(default)["sink"], "the default leaves earlier plans unchanged"
    raw["sink"]["options"] = {"string_mapping": "latin1"}
    with pytest.raises(DponeError):
        load(raw)


def test_explicit_selector_values() -> None:
    raw = transfer()
    raw["source"]["options"]["native_transfer"]["source_snapshot"]["replica_scope"] = "connected_replica"
    manifest = load(raw)
    assert isinstance(manifest, NativeTransferManifest)
    snapshot = manifest.source.options.native_transfer.source_snapshot
    assert snapshot is not None and snapshot.replica_scope is ReplicaScope.CONNECTED_REPLICA


# ---------------------------------------------------------------------------------------------- YAML strictness --
@pytest.mark.parametrize(
    "text",
    [
        "version: 1\nname: [unclosed\n",
        "a: b: c\n",
        "\tversion: 1\n",
        "version: 1\n---\nversion: 1\n",
        "x: !!python/object:os.system {}\n",
        "x: !custom 1\n",
    ],
)
def test_malformed_yaml(text: str) -> None:
    error = _fails(text, "DPONE_MANIFEST_YAML_INVALID")
    assert "line" in error.detail or "character" in error.detail


@pytest.mark.parametrize("text", ["", "# only a comment\n", "- a\n- b\n", "just text\n", "42\n", "null\n"])
def test_top_level_must_be_a_mapping(text: str) -> None:
    _fails(text, "DPONE_MANIFEST_YAML_INVALID")


def test_duplicate_keys_top_level_and_nested() -> None:
    text = to_yaml(external())
    error = _fails(text + "name: second\n", "DPONE_MANIFEST_DUPLICATE_KEY")
    assert error.detail.startswith("line ")
    nested = text.replace("  table: target_table\n", "  table: target_table\n  table: other_table\n")
    assert nested != text
    _fails(nested, "DPONE_MANIFEST_DUPLICATE_KEY")


def test_anchors_and_aliases_are_refused() -> None:
    text = "version: 1\nname: &n x\nsink: {type: clickhouse, table: *n}\n"
    error = _fails(text, "DPONE_MANIFEST_YAML_INVALID")
    assert "alias" in error.detail


def test_non_string_keys_are_refused() -> None:
    _fails("version: 1\n1: x\n", "DPONE_MANIFEST_YAML_INVALID")
    _fails("version: 1\n? [a, b]\n: x\n", "DPONE_MANIFEST_YAML_INVALID")


def test_oversize_and_non_utf8_and_deep_nesting() -> None:
    _fails(b"#" * (MAX_MANIFEST_BYTES + 1), "DPONE_MANIFEST_OVERSIZE")
    _fails(b"name: \xff\xfe\n", "DPONE_MANIFEST_YAML_INVALID")
    _fails("a: " + "[" * 50_000 + "]" * 50_000 + "\n", "DPONE_MANIFEST_YAML_INVALID")


def test_raw_nul_byte_in_stream_is_yaml_invalid() -> None:
    _fails("version: 1\nname: a\x00b\n", "DPONE_MANIFEST_YAML_INVALID")


@pytest.mark.parametrize("spelling", ["yes", "on", "Yes", "ON", "y"])
def test_yaml_1_1_booleans_are_not_booleans(spelling: str) -> None:
    text = to_yaml(external()).replace(
        "  table: target_table\n", f"  table: target_table\n  options:\n    durable_quality_replay: {spelling}\n"
    )
    _fails(text, "DPONE_MANIFEST_FIELD_INVALID")


def test_integers_are_plain_decimals() -> None:
    text = to_yaml(external())
    leading_zero = parse_manifest(text.replace("max_source_bytes: 1048576", "max_source_bytes: 010"))
    assert isinstance(leading_zero, ClusterPublicationManifest) and leading_zero.load.max_source_bytes == 10
    for spelling in ("0o10", "0x10", "1_000", "1:20", "1.5", "1e9"):
        _fails(
            text.replace("max_source_bytes: 1048576", f"max_source_bytes: {spelling}"), "DPONE_MANIFEST_FIELD_INVALID"
        )


# --------------------------------------------------------------------------------------------- schema errors --
@pytest.mark.parametrize(
    ("path", "key"),
    [
        ((), "fallback"),
        ((), "allow_fallback"),
        (("sink",), "force_replay"),
        (("sink", "options"), "durable-quality-replay"),
        (("physical_design", "storage", "clickhouse", "cluster"), "fallback_to_local"),
        (("load",), "max_rows"),
    ],
)
def test_unknown_keys_including_any_fallback_switch(path: tuple[str, ...], key: str) -> None:
    raw = external()
    node = raw
    for part in path:
        node = node.setdefault(part, {})
    node[key] = True
    error = _fails(raw, "DPONE_MANIFEST_UNKNOWN_FIELD")
    assert key in error.detail or key.replace("-", "") in error.detail or "unprintable" in error.detail


def test_transfer_route_has_no_custom_sql_and_no_physical_design() -> None:
    raw = transfer()
    raw["source"]["query"] = "SELECT * FROM events.raw_events FINAL"
    error = _fails(raw, "DPONE_MANIFEST_UNKNOWN_FIELD")
    assert "source.query" in error.detail
    raw = transfer()
    raw["physical_design"] = external()["physical_design"]
    _fails(raw, "DPONE_MANIFEST_UNKNOWN_FIELD")


@pytest.mark.parametrize(
    ("where", "key"),
    [(("source",), "where"), (("source",), "filter"), (("load", "window"), "predicate"), (("source",), "final")],
)
def test_transfer_route_has_no_custom_predicates(where: tuple[str, ...], key: str) -> None:
    raw = transfer()
    node = raw
    for part in where:
        node = node[part]
    node[key] = "id > 0"
    error = _fails(raw, "DPONE_MANIFEST_UNKNOWN_FIELD")
    assert error.detail.startswith(".".join(where) + "." + key)


def test_replay_option_has_no_source_placement() -> None:
    raw = transfer()
    raw["source"]["options"]["durable_quality_replay"] = True
    _fails(raw, "DPONE_MANIFEST_UNKNOWN_FIELD")


@pytest.mark.parametrize("value", [None, "true", "false", 1, 0, "yes"])
def test_durable_quality_replay_is_a_strict_boolean(value: object) -> None:
    raw = external()
    raw["sink"]["options"] = {"durable_quality_replay": value}
    error = _fails(raw, "DPONE_MANIFEST_FIELD_INVALID")
    assert "sink.options.durable_quality_replay" in error.detail


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r.pop("name"), "name"),
        (lambda r: r.pop("source"), "source"),
        (lambda r: r["source"].pop("type"), "source.type"),
        (lambda r: r["source"].pop("query"), "source.query"),
        (lambda r: r["sink"].pop("table"), "sink.table"),
        (lambda r: r["load"].pop("strategy"), "load.strategy"),
        (lambda r: storage_of(r).pop("engine"), "physical_design.storage.clickhouse.engine"),
        (lambda r: cluster_of(r).pop("name"), "physical_design.storage.clickhouse.cluster.name"),
        (lambda r: r.pop("version"), "version"),
    ],
)
def test_missing_fields_are_named(edit: Any, field: str) -> None:
    raw = external()
    edit(raw)
    error = _fails(raw, "DPONE_MANIFEST_FIELD_MISSING")
    assert any(p.detail.startswith(field + ":") for p in error.problems)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r["load"].update(max_source_bytes="1048576"), "load.max_source_bytes"),
        (lambda r: r["load"].update(max_source_bytes=True), "load.max_source_bytes"),
        (lambda r: r["load"].update(strategy="append"), "load.strategy"),
        (lambda r: storage_of(r).update(order_by="id"), "physical_design.storage.clickhouse.order_by"),
        (lambda r: storage_of(r).update(engine="ReplicatedMergeTree('/p', '{replica}')"), "physical_design.storage"),
        (lambda r: cluster_of(r).update(replication_mode="both"), "physical_design.storage.clickhouse.cluster"),
        (lambda r: cluster_of(r).update(ddl_scope="on_cluster"), "physical_design.storage.clickhouse.cluster"),
        (lambda r: r["source"].update(type="s3"), "source.type"),
        (lambda r: r["source"].update(query="   \n"), "source.query"),
        (lambda r: r["source"].update(query="SELECT 1\x00"), "source.query"),
        (lambda r: r.update(name="has space"), "name"),
        (lambda r: r.update(sink=["clickhouse"]), "sink"),
        (lambda r: r["sink"].update(type="bigquery"), "sink.type"),
        (lambda r: r.update(version="1"), "version"),
    ],
)
def test_wrong_types_and_values(edit: Any, field: str) -> None:
    raw = external()
    edit(raw)
    error = _fails(raw, "DPONE_MANIFEST_FIELD_INVALID")
    assert field in error.detail


def test_unsupported_version_has_its_own_code() -> None:
    raw = external()
    raw["version"] = 2
    _fails(raw, "DPONE_MANIFEST_VERSION_UNSUPPORTED")


def test_all_problems_are_collected() -> None:
    raw = external()
    raw["sink"]["bogus"] = 1
    raw["sink"]["table"] = "bad`name"
    del raw["load"]["strategy"]
    raw["sink"]["options"] = {"durable_quality_replay": "true"}
    with pytest.raises(ManifestError) as info:
        load(raw)
    assert sorted(_codes(info.value)) == sorted(
        [
            "DPONE_MANIFEST_UNKNOWN_FIELD",
            "DPONE_IDENTIFIER_INVALID",
            "DPONE_MANIFEST_FIELD_MISSING",
            "DPONE_MANIFEST_FIELD_INVALID",
        ]
    )
    assert "(+3 more)" in str(info.value)


# --------------------------------------------------------------------------------------------- hostile names --
HOSTILE_NAMES = [
    "tab`le",
    'tab"le',
    "tab'le",
    "tab\x00le",
    "t" * 300,
    "t\u0430ble",  # Cyrillic a
    "ta\u200bble",  # zero-width space
    "tab;le",
    "tab le",
    "db.table",
    "1table",
]

NAME_FIELDS = [
    ("sink", "database"),
    ("sink", "table"),
    ("sink", "staging_database"),
    ("cluster", "name"),
    ("cluster", "access_table"),
    ("order_by", 0),
    ("partition_by", None),
]


@pytest.mark.parametrize("hostile", HOSTILE_NAMES)
@pytest.mark.parametrize("where", NAME_FIELDS)
def test_hostile_identifiers_are_refused_and_not_echoed(hostile: str, where: tuple[str, Any]) -> None:
    raw = external()
    owner, key = where
    if owner == "sink":
        raw["sink"][key] = hostile
    elif owner == "cluster":
        cluster_of(raw)[key] = hostile
    elif owner == "order_by":
        storage_of(raw)["order_by"] = [hostile]
    else:
        storage_of(raw)["partition_by"] = f"toYYYYMM({hostile})"
    error = _fails(raw, "DPONE_IDENTIFIER_INVALID")
    assert hostile not in _everything_said(error)


@pytest.mark.parametrize("hostile", HOSTILE_NAMES)
def test_hostile_transfer_names_and_window_column(hostile: str) -> None:
    for edit in (
        lambda r: r["source"].update(database=hostile),
        lambda r: r["source"].update(table=hostile),
        lambda r: r["sink"].update(schema=hostile),
        lambda r: r["sink"].update(table=hostile),
        lambda r: r["load"]["window"].update(column=hostile),
    ):
        raw = transfer()
        edit(raw)
        assert hostile not in _everything_said(_fails(raw, "DPONE_IDENTIFIER_INVALID"))


def test_hostile_names_written_in_yaml_escapes() -> None:
    text = to_yaml(external()).replace("table: target_table", 'table: "tar\\0get"')
    _fails(text, "DPONE_IDENTIFIER_INVALID")
    text = to_yaml(external()).replace("table: target_table", 'table: "t\\u0430rget"')
    _fails(text, "DPONE_IDENTIFIER_INVALID")


@pytest.mark.parametrize(
    "hostile",
    ["user:secret@host", "postgres://u:p@h/db", "conn id", "conn`id", "c" * 300, "c\u0430nn", "-leading"],
)
def test_hostile_connection_ids(hostile: str) -> None:
    raw = external()
    raw["sink"]["connection_id"] = hostile
    error = _fails(raw, "DPONE_MANIFEST_FIELD_INVALID")
    assert hostile not in _everything_said(error)


@pytest.mark.parametrize("key", ["bad`key", "k" * 300, "k\x00", "k\u0430y", "'; DROP TABLE x; --"])
def test_hostile_unknown_keys_are_not_echoed(key: str) -> None:
    raw = external()
    raw["sink"][key] = 1
    error = _fails(raw, "DPONE_MANIFEST_UNKNOWN_FIELD")
    assert key not in _everything_said(error)
    assert "sink.<unprintable key>" in error.detail


@pytest.mark.parametrize(
    "uri", ["s3://user:secret@bucket/x", "file:///tmp/x?token=abc", "ftp://host/x", "s3://b/x#frag", "/tmp/plain"]
)
def test_artifact_store_uri_carries_no_credentials(uri: str) -> None:
    raw = external()
    raw["source"] = {"type": "artifact", "sha256": "ab" * 32, "store_uri": uri}
    error = _fails(raw, "DPONE_MANIFEST_FIELD_INVALID")
    assert uri not in _everything_said(error)


@pytest.mark.parametrize("sha", ["AB" * 32, "ab" * 31, "zz" * 32, ""])
def test_artifact_sha256_is_lower_hex(sha: str) -> None:
    raw = external()
    raw["source"] = {"type": "artifact", "sha256": sha, "store_uri": "file:///var/lib/dpone"}
    _fails(raw, "DPONE_MANIFEST_FIELD_INVALID")


@pytest.mark.parametrize("expression", ["sleep(id)", "toYYYYMM(a, b)", "toYYYYMM(toDate(ts))", "id + 1"])
def test_partition_by_is_a_column_or_allowed_date_function(expression: str) -> None:
    raw = external()
    storage_of(raw)["partition_by"] = expression
    with pytest.raises(DponeError) as info:
        load(raw)
    assert set(_codes(info.value)) <= {"DPONE_MANIFEST_FIELD_INVALID", "DPONE_IDENTIFIER_INVALID"}


# ----------------------------------------------------------------------------------------------------- window --
@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("2026-09-01T00:00:00", "2026-09-02T00:00:00Z"),  # naive
        ("2026-09-01T00:00:00+02:00", "2026-09-02T00:00:00Z"),  # not UTC
        ("2026-09-01", "2026-09-02T00:00:00Z"),  # date only
        ("now", "2026-09-02T00:00:00Z"),  # wall-clock word
        ("{{ data_interval_start }}", "2026-09-02T00:00:00Z"),  # template
        ("2026-09-02T00:00:00Z", "2026-09-02T00:00:00Z"),  # empty interval
        ("2026-09-03T00:00:00Z", "2026-09-02T00:00:00Z"),  # reversed
        ("2026-02-30T00:00:00Z", "2026-09-02T00:00:00Z"),  # not a calendar day
        (1788220800, "2026-09-02T00:00:00Z"),  # epoch number
    ],
)
def test_window_must_be_a_fixed_utc_half_open_interval(start: object, end: object) -> None:
    raw = transfer()
    raw["load"]["window"].update(start=start, end=end)
    _fails(raw, "DPONE_MANIFEST_WINDOW_INVALID")


def test_window_presence_follows_strategy() -> None:
    raw = transfer()
    del raw["load"]["window"]
    _fails(raw, "DPONE_MANIFEST_WINDOW_INVALID")
    raw = transfer()
    raw["load"]["strategy"] = "full_refresh"
    _fails(raw, "DPONE_MANIFEST_WINDOW_INVALID")


def test_unquoted_yaml_timestamps_stay_exact() -> None:
    text = to_yaml(transfer()).replace("'2026-09-01T00:00:00Z'", "2026-09-01T00:00:00.250000Z")
    manifest = parse_manifest(text)
    assert isinstance(manifest, NativeTransferManifest) and manifest.load.window is not None
    assert manifest.load.window.start.microsecond == 250000


# --------------------------------------------------------------------------------------------------- selector --
@pytest.mark.parametrize(
    "selector",
    [
        {"mode": "final"},
        {"mode": "exact_raw_rows", "use_final": False},
        {"replica_scope": "single_server"},
        {"mode": "exact_raw_rows", "replica_scope": "all_replicas"},
        {"mode": None},
        "exact_raw_rows",
    ],
)
def test_selector_shape_errors_have_the_selector_code(selector: object) -> None:
    raw = transfer()
    raw["source"]["options"]["native_transfer"]["source_snapshot"] = selector
    error = _fails(raw, "native_transfer.source_snapshot_mode_invalid")
    assert "source.options.native_transfer.source_snapshot" in error.detail


def test_raw_rows_require_target_local_verification() -> None:
    raw = transfer()
    raw["source"]["options"]["native_transfer"]["execution"] = {"verification_backend": "source_only"}
    error = _fails(raw, "native_transfer.source_snapshot_mode_invalid")
    assert "target_local" in error.detail


def test_other_native_transfer_options_stay_closed() -> None:
    raw = transfer()
    raw["source"]["options"]["native_transfer"]["wire"] = {"mode": "text"}
    _fails(raw, "DPONE_MANIFEST_FIELD_INVALID")
    raw = transfer()
    raw["source"]["options"]["native_transfer"]["cache"] = True
    _fails(raw, "DPONE_MANIFEST_UNKNOWN_FIELD")


# -------------------------------------------------------------------------------------------------- file I/O --
def test_unreadable_paths(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.yaml", tmp_path):
        with pytest.raises(DponeError) as info:
            load_manifest(path)
        assert info.value.code == "DPONE_MANIFEST_UNREADABLE"
        assert str(tmp_path) not in str(info.value)


# ------------------------------------------------------------------------------------------------- properties --
_BASELINE = external()
_BASELINE["sink"]["table"] = "bad`name"
_BASELINE["sink"]["bad\x00key"] = "an unknown hostile key, so the fixed placeholder text is part of the baseline"
with pytest.raises(DponeError) as _baseline_info:
    manifest_from_mapping(_BASELINE)
_BASELINE_SAID = _everything_said(_baseline_info.value)


@given(name=st.text(min_size=6, max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_non_identifier_is_refused_without_echo(name: str) -> None:
    assume(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name) is None)
    assume(name not in _BASELINE_SAID)
    raw = external()
    raw["sink"]["table"] = name
    raw["sink"][name] = "also as an unknown key"
    with pytest.raises(DponeError) as info:
        manifest_from_mapping(raw)
    assert "DPONE_IDENTIFIER_INVALID" in _codes(info.value)
    assert name not in _everything_said(info.value)
