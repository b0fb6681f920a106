"""The distinct rows of a frame's key columns, and each row's index among them.

A 2M-event trace has a few thousand distinct kernels per device: what the classifier, the HLO
kind of each op and the per-op cost say of an event depends only on its kernel's keys
(:data:`SIGNATURE`). The loader finds each event's row among them once
(:func:`signatures`); the stages then work on the small table and spread their answers with
one gather per column, instead of each hashing and joining the millions of rows again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import polars as pl

SIGNATURE = ("host", "rank", "device", "kind", "name", "op", "program_id")
"""An event's kernel: what the classifier (kind, name, op and the op's HLO), the op cost
table (host, program id, op) and the main kernel of an op execution (per device, by name)
read of it."""


def combo_hash(keys: pl.DataFrame, seed: int) -> pl.Series:
    """A 64-bit key per row: XOR of per-column hashes, ~20x faster than hashing rows jointly.
    Categorical and enum columns hash their codes (within a column, one code per string),
    3x faster than their strings."""
    coded = (pl.Categorical, pl.Enum)
    hashes = [(pl.col(k).to_physical() if isinstance(keys.schema[k], coded) else pl.col(k))
              .hash(seed=seed + i) for i, k in enumerate(keys.columns)]
    out = hashes[0]
    for h in hashes[1:]:
        out = out ^ h
    return keys.select(out.alias("h"))["h"]


def distinct_rows(keys: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The distinct rows of ``keys`` in first-seen order, and for each row the index (UInt32)
    of its row among them.

    Rows are grouped by one 64-bit hash and checked with a second, independent one (hashing is
    cheap; comparing millions of long kernel names is not). If the check ever fails, the exact
    but slower join on the values themselves is used.
    """
    hashes = pl.DataFrame({"h": combo_hash(keys, 0), "check": combo_hash(keys, 3)})
    firsts = (hashes.with_row_index("row").group_by("h")
              .agg(pl.col("row").first(), pl.col("check").first())
              .sort("row")  # first-seen order: the rules then read the names in memory order
              .with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("combo")))
    combo = hashes.join(firsts.select("h", "combo"), on="h", how="left",
                        maintain_order="left")["combo"]
    if (hashes["check"] == firsts["check"].gather(combo)).all():
        return keys[firsts["row"]], combo
    distinct = keys.unique(maintain_order=True)
    combo = keys.join(distinct.with_row_index("combo"), on=list(keys.columns), how="left",
                      nulls_equal=True, maintain_order="left")["combo"]
    return distinct, combo


@dataclass(frozen=True)
class Signatures:
    """``table``: the distinct :data:`SIGNATURE` rows of a frame's events; ``row``: each
    event's row in ``table`` (valid for that frame, in its row order)."""

    table: pl.DataFrame
    row: pl.Series

    def spread(self, values: pl.Series) -> pl.Series:
        """Per-signature ``values`` (one per row of ``table``) as one per event."""
        return values.gather(self.row)


def signatures(events: pl.DataFrame, keys: Sequence[str] = SIGNATURE) -> Signatures:
    """The :class:`Signatures` of ``events`` (columns it lacks are null)."""
    cols = [pl.col(k) if k in events.columns else pl.lit(None, dtype=pl.String).alias(k)
            for k in keys]
    table, row = distinct_rows(events.select(cols))
    return Signatures(table, row)
