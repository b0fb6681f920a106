"""Write an analysis table as Parquet, CSV or JSON Lines (the format from the file name).

Parquet files carry, in their key-value metadata, the tracelens version, the table's name and
its schema (column -> polars type), so dashboards can check what they read.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import polars.selectors as cs

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl",
           ".ndjson": "jsonl"}


def format_of(path: Path) -> str | None:
    """The table format a file name asks for (None when its extension is not one we write)."""
    return FORMATS.get(path.suffix.lower())


def parquet_metadata(df: pl.DataFrame, table: str, version: str) -> dict[str, str]:
    return {"tracelens_version": version, "tracelens_table": table,
            "tracelens_schema": json.dumps({k: str(v) for k, v in df.schema.items()})}


def write_table(df: pl.DataFrame, path: Path, table: str, version: str) -> None:
    """Write ``df`` to ``path`` in the format its extension names (Parquet by default)."""
    fmt = format_of(path) or "parquet"
    # the frames' dictionary-encoded text (tracelens.core.model.Text) is written as the documented
    # String columns, as a reader of the file expects them
    df = df.with_columns(cs.categorical().cast(pl.String))
    tmp = path.with_name(path.name + ".part")  # a failed write leaves no partial file
    if fmt == "parquet":
        df.write_parquet(tmp, metadata=parquet_metadata(df, table, version))
    elif fmt == "csv":
        df.write_csv(tmp)  # enums as their strings; nothing nested is in these tables
    else:
        df.write_ndjson(tmp)
    tmp.replace(path)
