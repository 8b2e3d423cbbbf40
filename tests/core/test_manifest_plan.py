"""The normalized plan: what changes the operation identity, and what must not."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_provider_dpone.core.canonical import canonical_json_bytes, sha256_hex
from airflow_provider_dpone.core.manifest import load_manifest, normalized_plan, normalized_plan_digest, parse_manifest
from tests.support.manifest_samples import EXAMPLES, cluster_of, external, load, storage_of, to_yaml, transfer

pytestmark = pytest.mark.unit

Edit = Callable[[dict[str, Any]], object]


def _digest(raw: dict[str, Any]) -> str:
    return normalized_plan_digest(load(raw))


def _edited(base: Callable[[], dict[str, Any]], edit: Edit) -> dict[str, Any]:
    raw = base()
    edit(raw)
    return raw


def test_digest_is_sha256_of_canonical_json() -> None:
    manifest = load(external())
    plan = normalized_plan(manifest)
    assert normalized_plan_digest(manifest) == sha256_hex(canonical_json_bytes(plan))
    assert json.loads(canonical_json_bytes(plan)) == plan


def test_external_example_plan_is_pinned() -> None:
    """Golden: a change here changes every operation id derived from this plan; it must be deliberate."""
    manifest = load_manifest(EXAMPLES / "clickhouse_external_full_refresh.yaml")
    assert normalized_plan(manifest) == {
        "kind": "dpone.normalized-plan.v1",
        "version": 1,
        "route": "clickhouse_cluster_full_refresh",
        "source": {
            "type": "clickhouse",
            "connection_id": "dpone_clickhouse_default",
            "query_sha256": sha256_hex("SELECT id, name, amount, updated_at FROM analytics.source_table"),
        },
        "sink": {
            "type": "clickhouse",
            "connection_id": "dpone_clickhouse_default",
            "database": "analytics",
            "table": "target_table",
            "staging_database": "analytics",
        },
        "load": {"strategy": "full_refresh", "max_source_bytes": 1073741824},
        "physical_design": {
            "storage": {
                "clickhouse": {
                    "engine": "MergeTree",
                    "order_by": ["id"],
                    "cluster": {"name": "dpone_cluster", "ddl_scope": "cluster", "replication_mode": "external"},
                }
            }
        },
    }
    assert normalized_plan_digest(manifest) == "6d47e6b11ced38362b4cbf6ffd7047fecd9d16476e1c0390bf168344e2a187b6"


def test_yaml_layout_does_not_change_the_digest() -> None:
    raw = external()
    compact = to_yaml(raw)
    reordered = to_yaml(dict(reversed(list(raw.items()))))
    flow = json.dumps(raw)  # JSON is YAML: flow style, quoted keys
    commented = "# header\n" + compact.replace("\n", "   # note\n", 3)
    block_query = compact.replace(
        "query: SELECT id, name FROM analytics.source_table",
        "query: |\n    SELECT id, name FROM analytics.source_table\n",
    )
    digests = {
        normalized_plan_digest(parse_manifest(text)) for text in (compact, reordered, flow, commented, block_query)
    }
    assert len(digests) == 1


def _internal_explicit() -> dict[str, Any]:
    return _edited(external, lambda r: cluster_of(r).update(replication_mode="internal"))


def _transfer_without_options() -> dict[str, Any]:
    return _edited(transfer, lambda r: r["source"].pop("options"))


def _from_artifact() -> dict[str, Any]:
    return _edited(
        external, lambda r: r.update(source={"type": "artifact", "sha256": "ab" * 32, "store_uri": "file:///a"})
    )


def _selector(**selector: Any) -> Edit:
    return lambda r: r["source"].update(options={"native_transfer": {"source_snapshot": selector}})


@pytest.mark.parametrize(
    ("base", "edit"),
    [
        (external, lambda r: r.update(name="another_label")),
        (_internal_explicit, lambda r: cluster_of(r).pop("replication_mode")),
        (external, lambda r: r["sink"].update(staging_database="analytics")),
        (external, lambda r: r["sink"].update(options={"durable_quality_replay": False})),
        (external, lambda r: r["source"].update(query="  SELECT id, name FROM analytics.source_table\n\n")),
        (transfer, lambda r: r["load"]["window"].update(start="2026-09-01T00:00:00+00:00")),
        (transfer, lambda r: r["load"]["window"].update(start="2026-09-01T00:00:00.000000Z")),
        (transfer, lambda r: r["sink"].update(options={"durable_quality_replay": False})),
        (_transfer_without_options, _selector(mode="query_visible", replica_scope="single_server")),
        (_transfer_without_options, _selector(mode="query_visible")),
        (
            _transfer_without_options,
            lambda r: r["source"].update(
                options={"native_transfer": {"source_snapshot": None, "execution": {"import_backend": "bcp"}}}
            ),
        ),
        (_from_artifact, lambda r: r["source"].update(store_uri="s3://bucket/other", store_connection_id="aws")),
    ],
)
def test_non_semantic_edits_keep_the_digest(base: Callable[[], dict[str, Any]], edit: Edit) -> None:
    before = _digest(base())
    assert _digest(_edited(base, edit)) == before


@pytest.mark.parametrize(
    ("base", "edit"),
    [
        (external, lambda r: r["sink"].update(table="target_table_2")),
        (external, lambda r: r["sink"].update(database="analytics2", staging_database="analytics2")),
        (external, lambda r: r["sink"].update(connection_id="other_cluster")),
        (external, lambda r: r["source"].update(connection_id="other_source")),
        (external, lambda r: r["source"].update(query="SELECT id, name FROM analytics.source_table WHERE id > 0")),
        (external, lambda r: r["source"].update(query="SELECT id,  name FROM analytics.source_table")),
        (external, lambda r: r["load"].update(max_source_bytes=2048)),
        (external, lambda r: r["load"].update(max_source_rows=1000)),
        (external, lambda r: storage_of(r).update(engine="ReplacingMergeTree")),
        (external, lambda r: storage_of(r).update(order_by=["id", "name"])),
        (external, lambda r: storage_of(r).update(order_by=[])),
        (external, lambda r: storage_of(r).update(partition_by="toYYYYMM(ts)")),
        (external, lambda r: cluster_of(r).update(name="other_cluster")),
        (external, lambda r: cluster_of(r).update(replication_mode="internal")),
        (external, lambda r: cluster_of(r).update(ddl_scope="local")),
        (external, lambda r: r["sink"].update(options={"durable_quality_replay": True})),
        (external, lambda r: r.update(source={"type": "artifact", "sha256": "ab" * 32, "store_uri": "file:///a"})),
        (
            transfer,
            lambda r: r["source"]["options"]["native_transfer"]["source_snapshot"].update(
                replica_scope="connected_replica"
            ),
        ),
        (transfer, lambda r: r["source"]["options"].pop("native_transfer")),
        (transfer, lambda r: r["source"]["options"]["native_transfer"].update(execution={"chunk_rows": 5000})),
        (
            transfer,
            lambda r: r["source"]["options"]["native_transfer"].update(execution={"import_backend": "mssql_sqlclient"}),
        ),
        (transfer, lambda r: r["load"]["window"].update(end="2026-09-03T00:00:00Z")),
        (transfer, lambda r: r["load"]["window"].update(column="inserted_at")),
        (transfer, lambda r: r["sink"].update(type="postgres")),
        (transfer, lambda r: r["sink"].update(schema="staging")),
        (transfer, lambda r: r["source"].update(table="raw_events_v2")),
    ],
)
def test_semantic_edits_change_the_digest(base: Callable[[], dict[str, Any]], edit: Edit) -> None:
    assert _digest(_edited(base, edit)) != _digest(base())


def _durable(quality: dict[str, Any] | None = None) -> dict[str, Any]:
    raw = _internal_explicit()
    raw["sink"]["options"] = {"durable_quality_replay": True}
    if quality is not None:
        raw["quality"] = quality
    return raw


def test_the_quality_policy_is_identity_bearing_only_when_selected() -> None:
    """The selected policy (its defaults spelled out) is part of the plan, hence of the operation id; a policy whose
    selector is off is refused by admission, so it never reaches the plan."""
    selected = _digest(_durable())
    assert selected != _digest(_internal_explicit())
    assert _digest(_durable({"min_rows": 0, "target_metrics": ["row_count"]})) == selected
    assert _digest(_durable({"min_rows": 1})) != selected
    assert _digest(_durable({"target_metrics": []})) != selected


def test_plan_carries_no_sql_text_store_location_or_name() -> None:
    raw = external()
    raw["source"]["query"] = "SELECT 'secret-literal' AS s FROM analytics.source_table"
    text = json.dumps(normalized_plan(load(raw)))
    assert "secret-literal" not in text and "SELECT" not in text
    assert raw["name"] not in text
    raw["source"] = {
        "type": "artifact",
        "sha256": "ab" * 32,
        "store_uri": "s3://private-bucket/x",
        "store_connection_id": "aws_x",
    }
    text = json.dumps(normalized_plan(load(raw)))
    assert "private-bucket" not in text and "aws_x" not in text and "ab" * 32 in text


def test_omitted_selector_writes_no_snapshot_key() -> None:
    raw = transfer()
    raw["source"].pop("options")
    plan = normalized_plan(load(raw))
    assert "source_snapshot" not in plan["source"]["native_transfer"]
    assert normalized_plan(load(transfer()))["source"]["native_transfer"]["source_snapshot"] == {
        "mode": "exact_raw_rows",
        "replica_scope": "single_server",
    }


def test_transfer_plan_records_window_in_one_utc_spelling() -> None:
    raw = transfer()
    raw["load"]["window"]["start"] = "2026-09-01T00:00:00.5+00:00"
    window = normalized_plan(load(raw))["load"]["window"]
    assert window == {"column": "event_time", "start": "2026-09-01T00:00:00.500000Z", "end": "2026-09-02T00:00:00Z"}


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


@given(seed=st.integers(min_value=0, max_value=2**32 - 1), style=st.sampled_from([None, True, False]))
@settings(max_examples=60, deadline=None)
def test_key_order_and_flow_style_never_change_the_digest(seed: int, style: bool | None) -> None:
    for base in (external, transfer):
        raw = base()
        text = yaml.safe_dump(_shuffled(raw, random.Random(seed)), sort_keys=False, default_flow_style=style)
        assert normalized_plan_digest(parse_manifest(text)) == _digest(raw)
