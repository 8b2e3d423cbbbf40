"""``dpone.clickhouse-raw-query-snapshot.v1`` (sealed at EOF) and ``completion_metadata.source_snapshot_v1``.

The extension carries both bounded preimages (profile and EOF) and their digests, so recovery recomputes every
digest from what the journal holds and never needs the source again. Any disagreement fails closed with
``native_transfer.recovery_binding_invalid``.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from airflow_provider_dpone.core.canonical import Hex64, digest, sha256_hex
from airflow_provider_dpone.core.errors import DponeError
from airflow_provider_dpone.transfer.values.raw_snapshot import RawSnapshotProfile, raw_source_query_id

EOF_KIND: Final = "dpone.clickhouse-raw-query-snapshot.v1"
EXTENSION_KEY: Final = "source_snapshot_v1"


class SourceEof(BaseModel):
    """The bounded canonical preimage of the EOF descriptor."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vendor_query_id_sha256: Hex64
    rows: int = Field(ge=0)
    touched_part_coverage_sha256: Hex64
    before_physical_profile_sha256: Hex64
    after_physical_profile_sha256: Hex64
    endpoint_authority_agreement: bool


def vendor_query_id_sha256(vendor_query_id: str) -> str:
    return sha256_hex(vendor_query_id)


def eof_descriptor_sha256(profile_sha256: str, eof: SourceEof) -> str:
    """Digest of the sealed descriptor: binds the profile digest and the EOF preimage."""
    return digest(
        {"kind": EOF_KIND, "source_snapshot_profile_sha256": profile_sha256, "source_eof": eof.model_dump(mode="json")}
    )


class SourceSnapshotExtension(BaseModel):
    """The one closed, namespaced completion-metadata extension written atomically with stage-complete."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["dpone.clickhouse-raw-query-snapshot.v1"]
    mode: Literal["exact_raw_rows"]
    source_query_binding: str
    profile: RawSnapshotProfile
    source_snapshot_profile_sha256: Hex64
    source_eof: SourceEof
    source_eof_descriptor_sha256: Hex64

    @classmethod
    def seal(cls, profile: RawSnapshotProfile, legacy_binding_sha256: str, eof: SourceEof) -> SourceSnapshotExtension:
        profile_sha = profile.sha256()
        return cls(
            kind=EOF_KIND,
            mode="exact_raw_rows",
            source_query_binding=raw_source_query_id(legacy_binding_sha256, profile_sha),
            profile=profile,
            source_snapshot_profile_sha256=profile_sha,
            source_eof=eof,
            source_eof_descriptor_sha256=eof_descriptor_sha256(profile_sha, eof),
        )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def verify_digests(self, legacy_binding_sha256: str) -> None:
        """Recompute profile, EOF and binding digests from the preimages; any mismatch fails closed."""
        profile_sha = self.profile.sha256()
        if profile_sha != self.source_snapshot_profile_sha256:
            raise DponeError("native_transfer.recovery_binding_invalid", "profile digest does not match its preimage")
        if eof_descriptor_sha256(profile_sha, self.source_eof) != self.source_eof_descriptor_sha256:
            raise DponeError("native_transfer.recovery_binding_invalid", "EOF descriptor digest does not match")
        if raw_source_query_id(legacy_binding_sha256, profile_sha) != self.source_query_binding:
            raise DponeError("native_transfer.recovery_binding_invalid", "source query binding does not recompute")
