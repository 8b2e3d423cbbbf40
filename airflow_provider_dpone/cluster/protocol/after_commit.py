"""After COMMITTED, look again: every member's published target observed once more after the COMMITTED write.

The check after the publication DDL (:func:`~airflow_provider_dpone.cluster.protocol.publication.publish`) ends
before the COMMITTED CAS, so a write into a member's target between the two is committed unseen. The publish entry
point, whenever it finds or makes its record COMMITTED, observes every member's target again with the same
observation (:func:`~airflow_provider_dpone.cluster.protocol.observe.observe_published`, judged by
:func:`~airflow_provider_dpone.cluster.protocol.observe.is_exact`) and puts the verdict in the receipt
(``after_commit``). It writes nothing: COMMITTED stands. A member that no longer holds the committed generation
raises the ``published_changed_after_commit`` alert, and the entry point raises :class:`ChangedAfterCommitError` (coded,
terminal) with the committed result, so the task fails only once the publication is durable. A retry looks again;
it never publishes again.
"""

from __future__ import annotations

from airflow_provider_dpone.cluster.protocol.context import Context
from airflow_provider_dpone.cluster.protocol.observe import is_exact, observe_published
from airflow_provider_dpone.cluster.protocol.results import Committed
from airflow_provider_dpone.cluster.values.authority.codec import AuthorityRecord
from airflow_provider_dpone.cluster.values.inventory import member_label
from airflow_provider_dpone.cluster.values.publication_receipts import AfterCommit, MemberLook
from airflow_provider_dpone.core.alerts import PUBLISHED_CHANGED_AFTER_COMMIT
from airflow_provider_dpone.core.errors import DponeError

CHANGED = "DPONE_CLICKHOUSE_CLUSTER_PUBLISHED_CHANGED_AFTER_COMMIT"


class ChangedAfterCommitError(DponeError):
    """The ``PUBLISHED_CHANGED_AFTER_COMMIT`` failure of a publication that is committed: ``committed`` is its result,
    whose receipt's ``after_commit`` says which members changed."""

    def __init__(self, committed: Committed, detail: str) -> None:
        super().__init__(CHANGED, detail)
        self.committed = committed


def look_again(ctx: Context, record: AuthorityRecord) -> AfterCommit:
    """Observe every member's target (concurrently, judged in member order) against the committed generation; alert
    once per member that changed."""
    artifact = record.artifact
    assert artifact is not None  # a committed record holds its artifact (record invariant)
    observed = ctx.each_member(
        lambda member_id: observe_published(ctx, record.member(member_id), artifact), record.member_ids()
    )
    looks = []
    for member in record.members:
        obs = observed[member.member_id]
        looks.append(
            MemberLook(
                member_id=member.member_id,
                matched=is_exact(obs, member, artifact),
                same_table=obs.exists and obs.uuid == member.candidate_uuid,
                schema_matched=obs.exists and obs.columns == artifact.schema_pairs,
                row_count=obs.row_count,
                content_digest=obs.content_digest,
            )
        )
    for look in looks:
        if not look.matched:
            ctx.alert(PUBLISHED_CHANGED_AFTER_COMMIT, member_id=look.member_id, phase=record.phase.value, code=CHANGED)
    return AfterCommit(observed_at_ms=ctx.now(), matched=all(look.matched for look in looks), members=tuple(looks))


def require_unchanged(committed: Committed) -> Committed:
    """``committed`` when its look found every member unchanged; else :class:`ChangedAfterCommitError` carrying it."""
    look = committed.receipt.after_commit
    if look is None or look.matched:
        return committed
    labels = {member.member_id: member.label for member in committed.receipt.members}  # the bound positions
    changed = [labels.get(m.member_id, member_label(m.member_id, None, None)) for m in look.members if not m.matched]
    raise ChangedAfterCommitError(committed, f"members {', '.join(changed)} of {len(look.members)}; it stays COMMITTED")
