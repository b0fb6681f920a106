"""Which collective executions are one instance across devices (docs/definitions.md#collectives).

The k-th execution of the same op in the same module on each device (or, when the trace has
no op, the k-th collective of the same type) is one instance. Here, below the analyzers, so
that aligning hosts on collective ends (:mod:`tracelens.loading.align`) and the collectives analysis
match instances the same way.
"""

from __future__ import annotations

import polars as pl

_DEVICE = ["host", "rank", "device"]  # as ``tracelens.analyze.timeline.breakdown.DEVICE_KEYS``


def with_instance_keys(events: pl.DataFrame) -> pl.DataFrame:
    """The collective events, sorted by device and start, with ``type`` (the subcategory, or
    "unknown"), ``instance_key`` and ``occurrence`` (k, from 0, per device and key)."""
    # stable: collectives that start together on a device keep their row order (the k-th
    # execution does not depend on the sort's threads), and several times faster than the
    # unstable sort on rows that arrive grouped by device
    coll = events.filter(pl.col("category") == "collective").sort([*_DEVICE, "start_ns"],
                                                                  maintain_order=True)
    # no shortcut for a part without collectives: the same expressions give its empty frame
    # the same column types (a String ``type`` beside another part's Categorical one failed
    # to concatenate when the parts of a job were merged)
    return coll.with_columns(type=pl.col("subcategory").fill_null("unknown")).with_columns(
        instance_key=pl.when(pl.col("op").is_not_null())
        .then(pl.concat_str(pl.col("module").fill_null(""), pl.lit("/"), pl.col("op")))
        .otherwise(pl.concat_str(pl.lit("type:"), pl.col("type"))),
    ).with_columns(occurrence=pl.int_range(pl.len()).over([*_DEVICE, "instance_key"]))
