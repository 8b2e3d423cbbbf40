"""The recorded release of a publication that stopped after its swap (the RELEASED phase's evidence).

A publication whose ``EXCHANGE``/``RENAME`` ran but whose check after it failed (``PUBLISHED_CONTENT_DIVERGENT``,
``PUBLICATION_FOREIGN_UUID``, ``PUBLICATION_MIXED``) is never COMMITTED. The operator restores the predecessor (swaps
back) or accepts what the target serves now, and the release step (``cluster/protocol/release.py``) records the
decision with what it observed on every member:

* ``restored``: every member is exactly as before the publication: the baseline target UUID (or none) under the
  target name, holding the baseline's recorded row count and content digest, and the operation's candidate under
  the candidate name;
* ``accepted``: every member is exactly as after it: the operation's candidate under the target name, the baseline
  under the candidate name; the target holds the artifact's schema and, on every member, the same row count (the one
  the operator declared, ``accepted_row_count``) and the same content digest. What is accepted is that content, not
  the verified artifact: the record names the digest it holds.

The model checks what it can alone (the decision's shape); the record checks the members against its own bindings.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictStr, model_validator

from airflow_provider_dpone.core.canonical import Hex64, MemberId, NonNegative, TimestampMs, UInt64, UuidText

ReleaseDecision = Literal["restored", "accepted"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")


class ReleasedMember(BaseModel):
    """One member as the release observed it: the two names' UUIDs in one snapshot, and the target's content
    (computed by the server with the artifact's digest version; ``None`` when no table is under the target name)."""

    model_config = _CONFIG

    member_id: MemberId
    target_uuid: UuidText | None
    candidate_uuid: UuidText | None
    """What is left under the candidate name: restored, the operation's candidate; accepted, the predecessor."""
    row_count: NonNegative | None
    content_digest: Hex64 | None

    @model_validator(mode="after")
    def _content_with_target(self) -> Self:
        absent = self.target_uuid is None
        if absent != (self.row_count is None) or absent != (self.content_digest is None):
            raise ValueError("an existing target records its row count and content digest; an absent one neither")
        return self


class Release(BaseModel):
    """The operator's decision on a publication stopped after its swap, and the evidence it was checked against."""

    model_config = _CONFIG

    decision: ReleaseDecision
    stopped_by: StrictStr = Field(pattern=r"^DPONE_[A-Z0-9_]+$")
    """The recorded failure code the publication stopped with."""
    publication_epoch: UInt64
    """The epoch of the bound publication whose queue entry had finished on every host."""
    accepted_row_count: NonNegative | None = None
    """The row count the operator declared for ``accepted`` (what they inspected); ``None`` for ``restored``."""
    members: tuple[ReleasedMember, ...] = Field(min_length=1)
    released_at_ms: TimestampMs

    @model_validator(mode="after")
    def _decision_is_consistent(self) -> Self:
        if (self.decision == "accepted") != (self.accepted_row_count is not None):
            raise ValueError("an accepted release declares its row count; a restored one none")
        if self.decision == "accepted":
            digests = {member.content_digest for member in self.members}
            counts = {member.row_count for member in self.members}
            if len(digests) != 1 or None in digests or counts != {self.accepted_row_count}:
                raise ValueError("accepted: every member holds the declared row count and one content digest")
        return self
