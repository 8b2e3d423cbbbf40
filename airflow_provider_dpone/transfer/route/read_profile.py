"""The frozen read profile: query-level settings, inspected filters, principal/roles and row-policy identity.

Settings are frozen at query level and then *observed* under that same overlay: if the server
lacks a setting, or a profile constraint overrides a frozen value, admission fails; nothing is weakened per workload.
Server-side filters are inspected and must be empty; they are never cleared to obtain admission. Row policies are
never bypassed: they are enumerated, reduced to an identity digest, and the SELECT runs under them. An account that
cannot inspect policies cannot prove their applicability, so it is refused.
"""

from __future__ import annotations

from typing import Final

from airflow_provider_dpone.core.canonical import sha256_hex, tagged_digest
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.raw_snapshot import AccessRecord, FilterState, SettingRecord
from airflow_provider_dpone.transfer.values.source_observation import AccessObservation, SettingsObservation

FILTER_SETTINGS: Final = ("additional_table_filters", "additional_result_filter")
_EMPTY_TABLE_FILTERS: Final = frozenset({"", "{}"})


def frozen_settings(max_execution_time_seconds: int) -> dict[str, str]:
    """The versioned framework read profile; values are text exactly as ``system.settings`` reports them."""
    if not 0 < max_execution_time_seconds <= 7 * 86_400:
        raise DponeError("native_transfer.source_read_profile_unsupported", "max_execution_time must be bounded")
    return {
        "final": "0",
        "use_query_cache": "0",
        "apply_mutations_on_fly": "0",
        "apply_patch_parts": "1",
        "apply_deleted_mask": "1",
        "max_parallel_replicas": "1",
        "skip_unavailable_shards": "0",
        "limit": "0",
        "offset": "0",
        "extremes": "0",
        "sort_overflow_mode": "throw",
        "read_overflow_mode": "throw",
        "result_overflow_mode": "throw",
        "timeout_overflow_mode": "throw",
        "max_execution_time": str(max_execution_time_seconds),
    }


def admit_settings(
    observed: SettingsObservation, frozen: dict[str, str]
) -> tuple[tuple[SettingRecord, ...], FilterState]:
    """Require every frozen value to be effective and every inspected filter to be empty."""
    values = observed.values
    for name, expected in frozen.items():
        if name not in values:
            raise DponeError("native_transfer.source_read_profile_unsupported", f"server lacks setting {name}")
        if values[name] != expected:
            raise DponeError("native_transfer.source_read_profile_unsupported", f"setting {name} is overridden")
    table_filters = values.get("additional_table_filters")
    if table_filters is None:
        raise DponeError(
            "native_transfer.source_read_profile_unsupported", "additional_table_filters is not inspectable"
        )
    if table_filters not in _EMPTY_TABLE_FILTERS:
        raise DponeError("native_transfer.source_read_profile_unsupported", "additional_table_filters is not empty")
    result_filter = values.get("additional_result_filter")
    if result_filter not in (None, ""):
        raise DponeError("native_transfer.source_read_profile_unsupported", "additional_result_filter is not empty")
    records = tuple(SettingRecord(name=name, value=frozen[name]) for name in sorted(frozen))
    state = FilterState(
        additional_table_filters="empty", additional_result_filter="absent" if result_filter is None else "empty"
    )
    return records, state


def admit_access(observed: AccessObservation) -> AccessRecord:
    """Principal, roles and the identity of every row policy on the relation (predicates only as digests).

    ``policy_filtered``: a policy on the relation applies to this principal (to the user or one of its roles),
    so what it reads is filtered. Policies on the relation none of which applies to this principal are refused:
    what such a principal reads is decided by the server's
    ``access_control_improvements.users_without_row_policies_can_read_rows`` (every row, or none), which SQL cannot
    read, so its applicability cannot be inspected (seed 003).
    """
    if not observed.policies_inspectable:
        raise DponeError("native_transfer.source_read_profile_unsupported", "row policies cannot be inspected")
    roles = set(observed.current_roles) | set(observed.enabled_roles)
    policies = []
    for policy in observed.row_policies:
        subjects = {observed.user, *roles}
        applies = (policy.apply_to_all and not subjects & set(policy.apply_to_except)) or bool(
            subjects & set(policy.apply_to_list)
        )
        policies.append(
            {
                "id": policy.policy_id,
                "name_sha256": sha256_hex(policy.name),
                "filter_sha256": sha256_hex(policy.select_filter),
                "restrictive": policy.is_restrictive,
                "applies": applies,
            }
        )
    if policies and not any(policy["applies"] for policy in policies):
        raise DponeError(
            "native_transfer.source_read_profile_unsupported",
            f"{len(policies)} row policies on the relation, none for this account: whether it reads every row or none "
            "depends on the server's users_without_row_policies_can_read_rows, which SQL cannot read; give the "
            "account its own permissive policy on the relation (USING 1 TO the account) or drop the others",
        )
    policies.sort(key=lambda item: (str(item["id"]), str(item["name_sha256"])))
    return AccessRecord(
        principal_sha256=sha256_hex(observed.user),
        roles_sha256=tagged_digest(
            "dpone.principal-roles.v1", sorted(observed.current_roles), sorted(observed.enabled_roles)
        ),
        row_policy_sha256=tagged_digest("dpone.row-policies.v1", policies),
        policy_filtered=any(policy["applies"] for policy in policies),
    )
