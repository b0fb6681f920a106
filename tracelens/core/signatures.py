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

import numpy as np
import polars as pl

SIGNATURE = ("host", "rank", "device", "kind", "name", "op", "program_id", "hlo_category")
"""An event's kernel: what the classifier (kind, name, op and the op's HLO), the op cost
table (host, program id, op) and the main kernel of an op execution (per device, by name)
read of it; ``hlo_category`` is a TPU op's own category (the classifier's signal there)."""


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


_PACKABLE = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)


def packed_key(keys: pl.DataFrame) -> np.ndarray | None:
    """Each row's values as one int64, exact: a mixed-radix number whose digits are the
    columns' values (categorical and enum columns: their codes, one per string) less the
    column's minimum, null one past its maximum. None when a column holds other values (text,
    floats, 64-bit unsigned) or the product of the columns' ranges reaches 2**62. A trace's
    kernels take a few thousand codes per column: built in place, one array of the rows."""
    key: np.ndarray | None = None
    space = 1
    for col in keys.get_columns():
        phys = col.to_physical() if isinstance(col.dtype, (pl.Categorical, pl.Enum)) else col
        if phys.dtype not in _PACKABLE:
            return None
        lo, hi = phys.min(), phys.max()
        if lo is None:  # every value null: one digit
            continue
        lo, nulls = int(lo), phys.null_count() > 0  # type: ignore[arg-type]
        width = int(hi) - lo + 1 + nulls  # type: ignore[arg-type]
        space *= width
        if space >= 2**62:
            return None
        if width == 1:
            continue
        if nulls:  # null is the digit 0, the values 1.. (no overflow: hi - lo < 2**62)
            digits, shift = (phys.cast(pl.Int64) - lo + 1).fill_null(0).to_numpy(), 0
        else:
            digits, shift = phys.to_numpy(), lo
        if key is None:
            key = np.array(digits, np.int64)  # a copy: the frame's buffers stay as they are
        else:
            key *= width
            key += digits
        if shift:
            key -= shift
    return np.zeros(keys.height, np.int64) if key is None else key


def distinct_rows(keys: pl.DataFrame) -> tuple[pl.DataFrame, pl.Series]:
    """The distinct rows of ``keys`` in first-seen order, and for each row the index (UInt32)
    of its row among them.

    Rows are grouped by their :func:`packed_key` when it exists (exact); else by one 64-bit
    hash, checked with a second, independent one (hashing is cheap; comparing millions of
    long kernel names is not), and if the check ever fails, by the exact but slower join on
    the values themselves.
    """
    packed = packed_key(keys)
    if packed is not None:
        return _first_seen(keys, pl.Series("h", packed))
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


def _first_seen(keys: pl.DataFrame, key: pl.Series) -> tuple[pl.DataFrame, pl.Series]:
    """:func:`distinct_rows` by an exact one-column ``key``: a group-by and a join on int64
    (2M rows: 0.07 s and 5k page faults, against 0.14 s and 26k for the two hashes)."""
    frame = key.to_frame("h")
    firsts = (frame.with_row_index("row").group_by("h").agg(pl.col("row").first())
              .sort("row").with_columns(pl.int_range(pl.len(), dtype=pl.UInt32).alias("combo")))
    combo = frame.join(firsts.select("h", "combo"), on="h", how="left",
                       maintain_order="left")["combo"]
    return keys[firsts["row"]], combo


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
