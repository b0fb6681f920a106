"""The model's ``launch`` text from a format's launch-shape columns, one polars expression.

``tracelens.core.model.EVENT_SCHEMA`` ``launch`` is ``grid=X,Y,Z block=X,Y,Z regs=N shared=B`` with
only the parts the trace gives (the XSpace reader writes the same text from
``kernel_details``). Shared by the Kineto and rocprofv3 readers so the text cannot drift.
"""

from __future__ import annotations

import polars as pl


def launch_text(grid: pl.Expr, block: pl.Expr, regs: pl.Expr, shared: pl.Expr) -> pl.Expr:
    """``grid``/``block``: the dimensions as ``"X,Y,Z"`` strings; ``regs``: registers per
    thread (omitted when 0 or null, as XSpace does); ``shared``: shared memory / LDS bytes.
    Null when no part is known."""
    parts = [pl.when(grid.is_not_null() & (grid != "")).then(pl.lit("grid=") + grid),
             pl.when(block.is_not_null() & (block != "")).then(pl.lit("block=") + block),
             pl.when(regs > 0).then(pl.lit("regs=") + regs.cast(pl.String)),
             pl.when(shared.is_not_null()).then(pl.lit("shared=") + shared.cast(pl.String))]
    text = pl.concat_str(parts, separator=" ", ignore_nulls=True)
    return pl.when(text != "").then(text)


def dims(x: pl.Expr, y: pl.Expr, z: pl.Expr) -> pl.Expr:
    """Three integer dimension columns as ``"X,Y,Z"``; null unless all three are known."""
    return pl.format("{},{},{}", x, y, z)
