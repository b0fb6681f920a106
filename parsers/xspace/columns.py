"""Column helpers both XSpace line sources share: the stats read from events, their
conversion to the model's types, the frame of one line, the kind of each device activity,
and the column-memory budget both decoders enforce alike."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

import polars as pl

from parsers.launch import launch_text
from tracelens.core.errors import TraceInputError
from tracelens.core.model import Text

# one name for every dangling metadata id: its number says nothing, and a million distinct
# made-up names made every per-name group-by of the analyses crawl (58 s for 1M events)
UNKNOWN_NAME = "<unknown event metadata>"

# Stats we read from events; everything else is left alone.
EVENT_STATS = ("correlation_id", "hlo_op", "hlo_module", "program_id", "memcpy_details",
               "device_ordinal", "step_num", "kernel_details", "run_id")
INT_STATS = ("program_id", "correlation_id", "device_ordinal", "step_num", "run_id")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_MEMCPY_SUB = {"htod": "h2d", "h2d": "h2d", "dtoh": "d2h", "d2h": "d2h", "dtod": "d2d",
               "d2d": "d2d", "ptop": "p2p", "p2p": "p2p"}

# Column memory of the events read <= FACTOR x input bytes + BASE (the C decoder's own bound,
# parsers/_xspace.c): a file whose events would take more (a flood of empty 2-byte events
# becomes 83 bytes of columns each) is refused, by both decoders alike.
COLUMN_BUDGET_FACTOR = 16
COLUMN_BUDGET_BASE = 64 << 20
COLUMN_BYTES_PER_EVENT = 4 + 8 + 8 + 9 * len(EVENT_STATS)  # md code, start, end; kind + value


def check_column_budget(path: Path, n_events: int, input_bytes: int) -> None:
    """Refuse a file whose ``n_events`` events to read would take more column memory than
    the budget allows for its ``input_bytes``."""
    need = n_events * COLUMN_BYTES_PER_EVENT
    if need > COLUMN_BUDGET_FACTOR * input_bytes + COLUMN_BUDGET_BASE:
        raise TraceInputError(path, f"{n_events} events in {input_bytes} bytes would take "
                              f"{need >> 20} MiB of columns, more than "
                              f"{COLUMN_BUDGET_FACTOR} bytes per input byte: refused "
                              "(events of almost no bytes each)")


def as_int(values: list[Any]) -> pl.Series:
    """Integer stats as Int64; anything else (a string, a uint64 above 2**63) becomes null
    (the uint64 ones are counted by :func:`too_large`)."""
    return pl.Series(values, dtype=pl.Int64, strict=False)


def too_large(values: Iterable[Any]) -> int:
    """How many values are integers outside int64 (uint64 stats above 2**63 - 1): exact in
    the file, but the model's Int64 columns cannot hold them, so they become null."""
    return sum(1 for v in values if type(v) is int and not INT64_MIN <= v <= INT64_MAX)


def as_str(values: list[Any]) -> list[str | None]:
    """String stats as str; other values as their text (a uint64 keeps every digit)."""
    return [v if isinstance(v, str) else (None if v is None else str(v)) for v in values]


def line_frame(cols: dict[str, list[Any]], **consts: Any) -> pl.DataFrame:
    """The model's event columns of one line from per-event lists (the reference path)."""
    df = pl.DataFrame({
        "name": pl.Series(cols["name"], dtype=pl.String),
        "start_ns": pl.Series(cols["start_ns"], dtype=pl.Int64),
        "end_ns": pl.Series(cols["end_ns"], dtype=pl.Int64),
        "op": pl.Series(as_str(cols["hlo_op"]), dtype=pl.String),
        "module": pl.Series(as_str(cols["hlo_module"]), dtype=pl.String),
        "program_id": as_int(cols["program_id"]),
        "correlation_id": as_int(cols["correlation_id"]),
        "memcpy_details": pl.Series(as_str(cols["memcpy_details"]), dtype=pl.String),
        "device_ordinal": as_int(cols["device_ordinal"]),
        "step_num": as_int(cols["step_num"]),
        "kernel_details": pl.Series(as_str(cols["kernel_details"]), dtype=pl.String),
        "run_id": as_int(cols["run_id"]),
    })
    return df.with_columns(**{k: pl.lit(v, dtype=pl.Int64) for k, v in consts.items()})


def device_kind(df: pl.DataFrame, line_types: str | None) -> pl.DataFrame:
    """kind and memcpy subcategory, from the event name, the line's types, or memcpy_details."""
    types = (line_types or "").lower()
    copy_only_line = bool(types) and "kernel" not in types and "memcpy" in types
    set_only_line = bool(types) and "kernel" not in types and "memset" in types \
        and "memcpy" not in types
    name = pl.col("name")
    sub = name.str.extract(r"(?i)^Memcpy(HtoD|DtoH|DtoD|PtoP|H2D|D2H|D2D|P2P)", 1) \
        .str.to_lowercase().replace_strict(_MEMCPY_SUB, default=None)
    kind = (pl.when(name.str.contains(r"(?i)^Memset")).then(pl.lit("memset"))
            .when(name.str.contains(r"(?i)^Memcpy") | pl.col("memcpy_details").is_not_null())
            .then(pl.lit("memcpy"))
            .when(pl.lit(set_only_line)).then(pl.lit("memset"))
            .when(pl.lit(copy_only_line)).then(pl.lit("memcpy"))
            .otherwise(pl.lit("kernel")))
    line_sub = None
    if copy_only_line:
        m = re.search(r"memcpy(htod|dtoh|dtod|ptop|h2d|d2h|d2d|p2p)", types)
        line_sub = _MEMCPY_SUB.get(m.group(1)) if m else None
    return df.with_columns(
        kind=kind,
        subcategory=pl.when(kind == "memcpy").then(sub.fill_null(pl.lit(line_sub)))
        .otherwise(None),
        bytes=pl.when(kind != "kernel").then(
            pl.col("memcpy_details").str.extract(r"(?:^|\s)size:(\d+)", 1)
            .cast(pl.Float64, strict=False)).otherwise(None),
    )


def launch_shape(details: pl.Series) -> pl.Series:
    """``kernel_details`` (every ROCm and CUDA collector format, xprof.md §1) as the model's
    ``launch`` text (:func:`parsers.launch.launch_text`): grid, block, registers, and shared
    memory = static + dynamic shared memory, or ROCm's ``group_mem`` (LDS). Worked out once
    per distinct string (collectors intern them), then mapped back (text columns on their
    codes, with the result as text)."""
    def field(name: str) -> pl.Expr:
        return pl.col("kd").str.extract(rf"(?:^|\s){name}:(\S+)", 1)

    def number(name: str) -> pl.Expr:
        return field(name).cast(pl.Int64, strict=False)

    distinct = details.unique().drop_nulls()
    uniq = pl.DataFrame({"kd": distinct.cast(pl.String)}, schema={"kd": pl.String})
    static_dyn = pl.when(number("static_shared").is_not_null()
                         | number("dynamic_shared").is_not_null()).then(
        pl.sum_horizontal(number("static_shared"), number("dynamic_shared")))
    uniq = uniq.with_columns(launch=launch_text(
        field("grid"), field("block"), number("regs"),
        pl.coalesce(static_dyn, number("group_mem"))))
    if details.dtype == Text:
        shapes = pl.DataFrame({"kd": distinct, "launch": uniq["launch"].cast(Text)})
        return details.to_frame("kd").join(shapes, on="kd", how="left",
                                           maintain_order="left")["launch"]
    return details.replace_strict(uniq["kd"], uniq["launch"], default=None,
                                  return_dtype=pl.String).alias("launch")
