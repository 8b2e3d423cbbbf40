"""Classification of ClickHouse table engine names for publication targets.

One closed parser for both static admission (the engine a manifest declares) and runtime admission (the engine
``system.tables`` reports). A name is classified only when it is spelled exactly as ClickHouse spells a known engine;
anything else (other case, unknown prefix or suffix, parameters) is ``OTHER`` and is refused as a target.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class EngineClass(StrEnum):
    MERGE_TREE = "merge_tree"
    """A direct, non-replicated ``*MergeTree``: the only target kind of external replication mode."""
    REPLICATED_MERGE_TREE = "replicated_merge_tree"
    """``Replicated*MergeTree``: the only target kind of internal replication mode."""
    SHARED_MERGE_TREE = "shared_merge_tree"
    """``Shared*MergeTree`` (ClickHouse Cloud storage): no publication contract yet."""
    DISTRIBUTED = "distributed"
    """A Distributed access facade: never a publication target."""
    OTHER = "other"
    """Merge, View, MaterializedView, Memory, Log, KeeperMap, Buffer, Null, ... and every unknown name."""


MERGE_TREE_FAMILY: Final[frozenset[str]] = frozenset(
    {
        "MergeTree",
        "ReplacingMergeTree",
        "SummingMergeTree",
        "AggregatingMergeTree",
        "CollapsingMergeTree",
        "VersionedCollapsingMergeTree",
        "GraphiteMergeTree",
        "CoalescingMergeTree",
    }
)


def classify_engine(name: str) -> EngineClass:
    """Classify an engine *name* (no parameters): exact spellings only, everything else is ``OTHER``."""
    if name in MERGE_TREE_FAMILY:
        return EngineClass.MERGE_TREE
    if name.startswith("Replicated") and name.removeprefix("Replicated") in MERGE_TREE_FAMILY:
        return EngineClass.REPLICATED_MERGE_TREE
    if name.startswith("Shared") and name.removeprefix("Shared") in MERGE_TREE_FAMILY:
        return EngineClass.SHARED_MERGE_TREE
    if name == "Distributed":
        return EngineClass.DISTRIBUTED
    return EngineClass.OTHER
