"""How many devices one instance of a collective spans: XLA's group mode and the group size
that follows from it and the module's replica and partition counts (the replica groups
themselves are decoded by :mod:`parsers.hlo.replica_groups`)."""

from __future__ import annotations


def group_mode(channel_id: int, use_global_device_ids: bool, opcode: str = "") -> str:
    """``CollectiveOpGroupMode`` (hlo.md §5 table; ``GetCollectiveOpGroupMode``).

    all-reduce, all-gather and reduce-scatter (and their async starts) always carry
    ``use_global_device_ids``, so with a channel id "false" means cross-replica-and-partition;
    all-to-all, collective-permute and collective-broadcast do not carry it (cross-partition).
    """
    if channel_id <= 0:
        return "cross-replica"
    if use_global_device_ids:
        return "flattened-id"
    if opcode.startswith(("all-reduce", "all-gather", "reduce-scatter")):
        return "cross-replica-and-partition"
    return "cross-partition"


def group_size(groups: list[list[int]] | None, mode: str, replica_count: int | None,
               partition_count: int | None) -> int | None:
    """Devices taking part in one instance of the collective, None when it cannot be known.

    An empty group list means every participant of the mode. In cross-replica-and-partition
    mode each replica id stands for all partitions of that replica.
    """
    if groups:
        size = len(groups[0])
        if mode == "cross-replica-and-partition":
            return size * partition_count if partition_count else None
        return size
    if mode == "cross-replica":
        return replica_count
    if mode == "cross-partition":
        return partition_count
    if replica_count and partition_count:
        return replica_count * partition_count
    return None
